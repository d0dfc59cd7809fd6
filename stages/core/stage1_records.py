"""What a Stage I trajectory yields (contract in ``trajectory``): its frame rows, prop rows,
meta.json, the result record holding them.

Standard library only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .engine_types import CharacterSpec
from .trajectory import SCHEMA_VERSION, action_stats


@dataclass
class TrajectoryResult:
    index: int
    frames: list[dict]
    cameras: list[dict]
    meta: dict
    failure: str | None = None
    detail: str = ""
    props: list[dict] = field(default_factory=list)


def frame_row(f: int, fps: int, action: str, st: Any, q: Sequence[float], yaw: float,
              ref: float, ch: CharacterSpec, capsule: tuple[float, float], segment: int,
              event: str) -> dict:
    """frames.parquet's row of frame ``f``: the character state ``st`` read after the frame's
    input, its facing ``yaw`` (quaternion ``q``), the yaw ``ref`` the action is expressed in."""
    return {
        "frame": f, "t": f / fps, "action": action,
        "pos_x": st.position[0], "pos_y": st.position[1], "pos_z": st.position[2],
        "rot_w": q[0], "rot_x": q[1], "rot_y": q[2], "rot_z": q[3],
        "yaw_deg": yaw, "ref_yaw_deg": ref,
        "scale_x": ch.scale, "scale_y": ch.scale, "scale_z": ch.scale,
        "capsule_radius_m": capsule[0], "capsule_half_height_m": capsule[1],
        "grounded": bool(st.grounded or ch.locomotion != "walk"),
        "vel_x": st.velocity[0], "vel_y": st.velocity[1], "vel_z": st.velocity[2],
        "speed": math.hypot(st.velocity[0], st.velocity[1]),
        "segment": segment, "event": event,
    }


def prop_rows(f: int, props: Iterable[tuple[str, Sequence[float], Sequence[float]]]
              ) -> list[dict]:
    """props.parquet's rows of frame ``f`` from the engine's (name, position, rotation)."""
    return [{"frame": f, "prop_index": k, "prop": name,
             "pos_x": pos[0], "pos_y": pos[1], "pos_z": pos[2],
             "rot_w": q[0], "rot_x": q[1], "rot_y": q[2], "rot_z": q[3]}
            for k, (name, pos, q) in enumerate(props)]


def trajectory_meta(engine: Any, level_id: str, ch: CharacterSpec, index: int, seed: int,
                    fps: int, frames: list[dict], config: dict, segments: int, level: dict,
                    spawns: list[dict]) -> dict:
    """meta.json of a trajectory, before the capsule and camera entries (which need frames)."""
    return {
        "schema_version": SCHEMA_VERSION, "level_id": level_id,
        "character_id": ch.character_id, "trajectory_index": index,
        "seed": seed, "fps": fps, "frame_count": len(frames),
        "engine": getattr(engine, "name", "?"),
        "engine_version": getattr(engine, "version", "?"),
        "config": config, "segments": segments,
        "level": level,
        "spawns": spawns,
        "action_stats": action_stats([f["action"] for f in frames]),
        "character": {"visual_height_m": ch.visual_height,
                      "locomotion": ch.locomotion, "model": ch.model_path,
                      "animations": ch.animations,
                      "yaw_correction_deg": ch.yaw_correction_deg,
                      "up_axis": ch.up_axis},
    }


def capsule_meta(ch: CharacterSpec, observed: tuple[float, float], source: str) -> dict:
    """meta.json "capsule" (§7.2): the capsule asked for, the one the engine built."""
    return {"requested": {"radius_m": ch.capsule_radius, "half_height_m": ch.capsule_half_height},
            "observed": {"radius_m": observed[0], "half_height_m": observed[1]},
            "source": source}
