"""A real InstanceRenderer with a recorded trajectory's level and character loaded, posed at
any recorded frame: for tests that draw single frames instead of a whole trajectory."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from stages.cluster.keys import render_settings
from stages.config import RenderConfig
from stages.core import replay
from stages.core.trajectory import VIEWS
from stages.engine.instance_render import InstanceRenderer, _load_traj
from stages.engine.replay_render import CharacterPose, SamplePose, ViewPose


class PosedFrames:
    """``ir``: the renderer (``ir.r`` draws); :meth:`pose` gives a recorded frame's pose."""

    def __init__(self, ir: InstanceRenderer, traj_dir: Path):
        self.ir = ir
        frames, cams, meta, _props = _load_traj(traj_dir)
        ir._renderer()
        ir._ensure_level(meta)
        ir._ensure_character(meta)
        self.rows, self.views = replay.frame_tables({c: frames[c].tolist() for c in frames},
                                                    {c: cams[c].tolist() for c in cams})
        self.segs = frames["segment"].tolist()

    def pose(self, f: int, clip_time: float) -> SamplePose:
        """The character and the five cameras at recorded frame ``f`` (no sub-frame offset),
        the walk clip at ``clip_time`` seconds."""
        c = replay.character_pose(self.rows, f, 0.0, self.segs)
        vp = {v: ViewPose(**replay.camera_pose(self.views[v], f, 0.0, self.segs)) for v in VIEWS}
        return SamplePose(CharacterPose(c["pos"], c["quat"], c["scale"], "walk", clip_time), vp)


@contextmanager
def posed_frames(out: Path, cfg: RenderConfig, traj_dir: Path) -> Iterator[PosedFrames]:
    """:class:`PosedFrames` of ``traj_dir`` rendered with ``cfg`` at 30 fps into ``out``
    (embedded GL, offscreen), closed on exit."""
    ir = InstanceRenderer(out, render_settings(cfg, 30), "p3headlessgl", Path.cwd())
    try:
        yield PosedFrames(ir, traj_dir)
    finally:
        ir.close()
