"""How a node runs Unreal Editor (config group ``unreal``), kept apart from the data settings in
:mod:`stages.config`: like the node settings they never change what a trajectory contains."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class UnrealConfig:
    """How a node runs Unreal Editor (config group ``unreal``). Execution settings only: they
    never change what a trajectory contains."""

    # UnrealEditor-Cmd of a UE 5.x Linux install (Engine/Binaries/Linux/UnrealEditor-Cmd)
    editor: str = ""
    # the render project (.uproject) with the Python, Movie Render Queue and Editor Scripting
    # plugins enabled; level packs are staged into its Content/ folder
    project: str = ""
    # the unprivileged user the node runner must run as (Unreal refuses root, §8.4)
    run_as: str = "wmforge"
    # a virtual X display per slot (Xvfb :display_base+k) instead of -RenderOffscreen
    virtual_display: bool = False
    display_base: int = 100
    # Stage I pawn: a Character Blueprint class path; empty = the native Character class
    pawn_class: str = ""
    # extra -ini overrides (Unreal's -ini:File:[Section]:Key=Value), e.g.
    # "Engine:[/Script/Engine.RendererSettings]:r.GenerateMeshDistanceFields=False"
    ini_overrides: list[str] = field(default_factory=list)
    # MRQ image sequence format: png (encoded by the node) or exr (kept, not encoded)
    image_format: str = "png"
    # MRQ engine warm-up frames (ticks without rendering) at the start of each shot
    engine_warmup_frames: int = 0
    # texture residency before rendering (§7.2): texture pool, MB
    texture_pool_mb: int = 8192
    # a Stage II engine log past this many bytes is a failure (log_growth), bytes
    max_log_bytes: int = 512 * 1024 * 1024


def validate_unreal(u: UnrealConfig) -> None:
    """Raise ValueError naming the ``unreal.*`` key that is out of range."""
    if u.image_format not in ("png", "exr"):
        raise ValueError(f"unreal.image_format {u.image_format!r}: expected png or exr")
    if u.engine_warmup_frames < 0 or u.texture_pool_mb < 0 or u.max_log_bytes < 1_000_000:
        raise ValueError("unreal.engine_warmup_frames >= 0, unreal.texture_pool_mb >= 0 and "
                         "unreal.max_log_bytes >= 1000000 expected")
    if not u.run_as or u.run_as == "root":
        raise ValueError(f"unreal.run_as {u.run_as!r}: name an unprivileged user")
