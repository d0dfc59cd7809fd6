"""A recorded trajectory as the embedded Stage II renderer reads it: validated tables, asset
paths resolved to the slot's staged copy, dynamic-prop poses per frame (paper §7)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from ..core.trajectory import PROP_COLUMNS, TrajectoryError, validate, validate_props
from .stage2 import Stage2Failure


class _Fail(Stage2Failure):
    """A Stage II failure of the embedded renderer."""


def _resolve(p: str, base: Path, path_map: dict[str, str] | None = None) -> Path:
    """The file to read for a path recorded in a trajectory: relative to ``base``, then moved
    to the slot's staged copy when one of ``path_map``'s prefixes matches (§5.3)."""
    q = Path(p)
    q = q if q.is_absolute() else base / q
    for src, dst in (path_map or {}).items():
        try:
            return Path(dst) / q.relative_to(src)
        except ValueError:
            continue
    return q


def file_stamp(path: Path) -> str:
    """``size:mtime_ns`` of ``path`` ('missing' when it cannot be read): a level file
    replaced in place under the same name gets another stamp (a node's renderers live across
    jobs, and a level is loaded, and compiled for, once per renderer)."""
    try:
        st = path.stat()
    except OSError:
        return "missing"
    return f"{st.st_size}:{st.st_mtime_ns}"


def _load_traj(traj_dir: Path) -> tuple[pd.DataFrame, pd.DataFrame, dict, pd.DataFrame]:
    try:
        frames = pd.read_parquet(traj_dir / "frames.parquet")
        cams = pd.read_parquet(traj_dir / "cameras.parquet")
        meta = json.loads((traj_dir / "meta.json").read_text())
        pp = traj_dir / "props.parquet"
        props = (pd.read_parquet(pp) if pp.is_file() else
                 pd.DataFrame({c: [] for c in PROP_COLUMNS}))
    except (OSError, ValueError) as exc:
        raise _Fail("invalid_trajectory", f"{traj_dir}: {exc}") from None
    try:
        validate({str(c): frames[c].tolist() for c in frames},
                 {str(c): cams[c].tolist() for c in cams}, meta)
        validate_props({str(c): props[c].tolist() for c in props}, len(frames))
    except TrajectoryError as exc:
        raise _Fail("invalid_trajectory", f"{traj_dir}/{exc}") from None
    return frames, cams, meta, props


def prop_table(props: pd.DataFrame, names: list[str], n: int
               ) -> list[list[tuple[tuple[float, float, float], tuple[float, ...]]]] | None:
    """Per frame, per prop of the loaded level: (pos, quat). None when nothing was recorded
    (a v1 trajectory). The recorded props must be the level's dynamic props, in order."""
    if props.empty:
        return None
    rec = props.drop_duplicates("prop_index").sort_values("prop_index")
    got = [str(x) for x in rec["prop"]]
    if got != names:
        raise _Fail("invalid_trajectory", f"props.parquet: props {got} do not match the "
                    f"level's dynamic props {names}")
    props = props.sort_values(["frame", "prop_index"])
    pos = props[["pos_x", "pos_y", "pos_z"]].to_numpy().reshape(n, len(names), 3)
    rot = props[["rot_w", "rot_x", "rot_y", "rot_z"]].to_numpy().reshape(n, len(names), 4)
    return [[(tuple(pos[f, k]), tuple(rot[f, k])) for k in range(len(names))]
            for f in range(n)]


def _level_up_axis(meta: dict, path: Path) -> str | None:
    """The level's coordinate-system override as the engine takes it. Trajectories before
    contract v3 stored the pack's ``up_axis`` hint ("Z" by default), which the loader ignored
    for glTF (always Y-up) and applied to other formats; read that way, not as an override."""
    up = (meta.get("level") or {}).get("up_axis")
    version = meta.get("schema_version", 3)
    if isinstance(version, int) and version < 3 and path.suffix.lower() in (".glb", ".gltf"):
        return None
    return up
