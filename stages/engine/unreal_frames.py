"""Stage II on the node side of an Unreal render (paper §7.2): MRQ wrote one image sequence per
camera; verify every camera's frame count, encode each view (and the tiled preview) with the
same encoder as the embedded engine, and delete the image sequences only after the videos
verify. A camera that a level's own sequence actor took over shows as a still picture while the
recorded camera moves (Table 2): :func:`camera_takeover` finds it in the frames."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from ..core.trajectory import VIEWS
from .publish import publish_trajectory
from .render_settings import RenderSettings
from .stage2 import Stage2Failure

IMAGE_EXT = {"png": ".png", "exr": ".exr"}
STILL_DIFF = 0.5  # mean abs difference (0..255) below which two frames count as the same
STILL_MIN_FRAMES = 30  # a still run this long ...
STILL_MIN_MOVE_M = 1.0  # ... while the recorded camera moved this far is a takeover


class FramesError(Stage2Failure):
    """Unreal's frames of a trajectory are missing, invalid or not the recorded camera's."""


def view_frames(frames_dir: Path, view: str, ext: str = ".png") -> list[Path]:
    d = frames_dir / view
    return sorted(p for p in d.glob(f"*{ext}")) if d.is_dir() else []


def verify_counts(frames_dir: Path, n: int, ext: str = ".png") -> dict[str, list[Path]]:
    """Every view has exactly ``n`` images, or FramesError(frames_missing) naming the views."""
    got = {v: view_frames(frames_dir, v, ext) for v in VIEWS}
    bad = {v: len(p) for v, p in got.items() if len(p) != n}
    if bad:
        raise FramesError("frames_missing", f"{frames_dir}: expected {n} frames per view, got "
                          f"{bad}")
    return got


def camera_takeover(diffs: list[float], moves: list[float], still: float = STILL_DIFF,
                    min_frames: int = STILL_MIN_FRAMES,
                    min_move_m: float = STILL_MIN_MOVE_M) -> tuple[int, int, float] | None:
    """(first, length, metres moved) of the first run of near-identical consecutive frames
    (``diffs[i]`` between frame i and i+1) during which the recorded camera moved at least
    ``min_move_m`` (``moves[i]`` metres between i and i+1); None if there is none."""
    start = None
    for i in range(len(diffs) + 1):
        if i < len(diffs) and diffs[i] < still:
            start = i if start is None else start
            continue
        if start is not None:
            moved = sum(moves[start:i])
            if i - start >= min_frames and moved >= min_move_m:
                return start, i - start, moved
            start = None
    return None


def _load(p: Path) -> np.ndarray:
    from PIL import Image

    with Image.open(p) as im:
        return np.asarray(im.convert("RGB"))


def finish_trajectory(frames_dir: Path, traj_dir: Path, out: Path, name: str, key: str,
                      settings: RenderSettings | dict, image_format: str = "png",
                      log: Any = print, layers: list[str] | tuple[str, ...] = (),
                      layers_dir: Path | None = None) -> dict:
    """Verify, encode and publish one rendered trajectory into ``out``; the images are deleted
    only after every video decodes to the expected frame count. With ``layers``, the ground-truth
    passes MRQ wrote under ``layers_dir`` become the layer files (unreal_layers.convert)."""
    import pandas as pd

    from ..media.video import VideoWriter, tile_preview

    rs = RenderSettings.from_dict(settings)
    meta = json.loads((traj_dir / "meta.json").read_text())
    n, fps = int(meta["frame_count"]), int(meta["fps"])
    ext = IMAGE_EXT[image_format]
    files = verify_counts(frames_dir, n, ext)
    out.mkdir(parents=True, exist_ok=True)
    rmeta: dict = {"schema_version": 1, "trajectory": name, "level_id": meta["level_id"],
                   "character_id": meta["character_id"], "frame_count": n, "fps": fps,
                   "duration_s": n / fps, "render_key": key, "settings": rs.as_dict(),
                   "engine": "unreal", "image_format": image_format,
                   "lineage": {"engine": meta.get("engine"),
                               "engine_version": meta.get("engine_version")}}
    cams = pd.read_parquet(traj_dir / "cameras.parquet")
    if image_format == "png":
        enc = rs.encode()
        first = _load(files[VIEWS[0]][0])
        H, W = first.shape[:2]
        writers = {v: VideoWriter(out / f"{v}.mp4", W, H, fps, enc) for v in VIEWS}
        pw = ph = 0
        prev: dict[str, np.ndarray | None] = {v: None for v in VIEWS}
        diffs: dict[str, list[float]] = {v: [] for v in VIEWS}
        preview = None
        try:
            for i in range(n):
                imgs = {v: _load(files[v][i]) for v in VIEWS}
                for v in VIEWS:
                    if imgs[v].shape[:2] != (H, W):
                        raise FramesError("frames_invalid", f"{files[v][i]}: "
                                          f"{imgs[v].shape[1]}x{imgs[v].shape[0]}, expected "
                                          f"{W}x{H}")
                    writers[v].write(imgs[v])
                    p = prev[v]
                    if p is not None:
                        diffs[v].append(float(np.abs(imgs[v][::4, ::4].astype(np.int16)
                                                     - p[::4, ::4]).mean()))
                    prev[v] = imgs[v]
                if rs.preview:
                    tile = tile_preview(imgs, VIEWS)
                    if preview is None:
                        ph, pw = tile.shape[:2]
                        preview = VideoWriter(out / "preview.mp4", pw, ph, fps,
                                              rs.preview_encode())
                    preview.write(tile)
            for w in writers.values():
                w.close(n)
            if preview is not None:
                preview.close(n)
        except BaseException:
            for w in writers.values():
                w.abort()
            if preview is not None:
                preview.abort()
            raise
        rmeta["videos"] = [f"{v}.mp4" for v in VIEWS] + (["preview.mp4"] if preview else [])
        rmeta["encode"] = enc.as_dict()
        takeovers = {}
        for v in VIEWS:
            rows = cams[cams["view"] == v].sort_values("frame")
            xyz = rows[["pos_x", "pos_y", "pos_z"]].to_numpy()
            moves = [float(math.dist(xyz[i], xyz[i + 1])) for i in range(len(xyz) - 1)]
            hit = camera_takeover(diffs[v], moves)
            if hit:
                takeovers[v] = {"first_frame": hit[0], "frames": hit[1], "moved_m": hit[2]}
        if takeovers:
            log(f"wmforge: camera_takeover {name}: {takeovers}")
            shutil.rmtree(out, ignore_errors=True)
            raise FramesError("sequence_took_camera", f"{name}: still picture while the "
                              f"recorded camera moved: {takeovers}")
        for v in VIEWS:  # the videos verified: the image sequences can go (§7.2)
            shutil.rmtree(frames_dir / v, ignore_errors=True)
    else:
        rmeta["videos"] = []
        rmeta["image_sequences"] = {v: len(files[v]) for v in VIEWS}
    if layers:
        from .unreal_layers import convert

        ldir = layers_dir if layers_dir is not None else frames_dir.parent.parent / "layers" / name
        try:
            rmeta["ground_truth"] = convert(ldir, traj_dir, out, layers, rs.width, rs.height, log)
        except BaseException:
            shutil.rmtree(out, ignore_errors=True)
            raise
    return publish_trajectory(traj_dir, out, rmeta)


class UnrealFrames:
    """The Unreal Stage II renderer on this side of the editor
    (:class:`~stages.engine.stage2.Stage2Renderer`): Movie Render Queue has written a
    trajectory's image sequences under ``<instance>/frames/<traj>/``; :meth:`render` verifies,
    encodes and publishes them like the embedded renderer's output."""

    def __init__(self, inst: Path, settings: RenderSettings | dict, image_format: str = "png",
                 log: Any = print, layers: list[str] | tuple[str, ...] = ()):
        self.inst, self.image_format, self.log = inst, image_format, log
        self.layers = tuple(layers)
        self.settings = RenderSettings.from_dict(settings, f"{inst / 'instance.json'}: settings")

    def render(self, traj_dir: Path, name: str, key: str) -> dict:
        return finish_trajectory(self.inst / "frames" / name, traj_dir, self.inst / name, name,
                                 key, self.settings, self.image_format, self.log, self.layers,
                                 self.inst / "layers" / name)

    def close(self) -> None:
        pass

