"""The Stage II protocol (DESIGN §4): what every Stage II engine implements.

An instance is one level's renders in one engine process (``<renders>/<scene>/<level>/<instance>/``,
described by its ``instance.json``: level, settings, jobs). For each job the engine gets a
trajectory folder (the Stage I contract: motion, cameras, props, and in its ``meta.json`` the level
and character) and the instance's typed :class:`~stages.engine.render_settings.RenderSettings`,
and leaves ``<instance>/<traj>/``: one MP4 per view, the tiled preview, the trajectory's files and
a ``meta.json`` with the settings, encode settings and the sha256 of every file — written by
:func:`stages.engine.publish.publish_trajectory`, which no engine owns.

Implementations:
- embedded GL: :class:`stages.engine.instance_render.InstanceRenderer` (renders in-process);
- unreal: :class:`stages.engine.unreal_frames.UnrealFrames` (Movie Render Queue writes the image
  sequences in the editor process; this side verifies, encodes and publishes them).
The process around either one (owner lock, progress lines, failures.jsonl, the completion
marker) is the same contract (DESIGN §3 "Progress").
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

from ..media.layers import LAYERS, validate_layers

# the ground-truth layers (issue #33) each Stage II backend (engine.name) can produce
# what each backend makes (Unreal: MRQ passes turned into the same layers by
# engine/unreal_layers.py; its launcher also checks the project's plugins before the editor starts)
GROUND_TRUTH_LAYERS: dict[str, tuple[str, ...]] = {"embedded": LAYERS, "unreal": LAYERS}


def check_ground_truth(engine: str, layers: Sequence[str]) -> tuple[str, ...]:
    """``render.ground_truth`` checked at start-up: known names, and ones the backend makes."""
    names = validate_layers(layers)
    can = GROUND_TRUTH_LAYERS.get(engine, ())
    missing = [x for x in names if x not in can]
    if missing:
        raise ValueError(f"render.ground_truth: engine {engine!r} cannot produce layer(s) "
                         f"{missing} (it makes {list(can) or 'none'}); remove them from "
                         "render.ground_truth or use engine.name=embedded")
    return names


class Stage2Failure(RuntimeError):
    """One trajectory could not be rendered; ``reason`` is a short code for failures.jsonl."""

    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason, self.detail = reason, detail


@runtime_checkable
class Stage2Renderer(Protocol):
    """Renders the trajectories of one instance, one call per trajectory."""

    def render(self, traj_dir: Path, name: str, key: str) -> dict:
        """Render the trajectory in ``traj_dir`` into ``<instance>/<name>/`` and publish it;
        ``key`` is its render key (recorded in meta.json and the progress line). Returns the
        published meta.json; raises :class:`Stage2Failure` for a trajectory that cannot be
        rendered, leaving no folder that looks complete."""
        ...

    def close(self) -> None:
        """Release the engine's resources (after the last trajectory)."""
        ...
