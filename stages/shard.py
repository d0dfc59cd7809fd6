"""`shard` stage: WebDataset tar shards of about ``shard.max_shard_bytes``, one sample per clip
(notes §4.3), and ``index.parquet`` (sample key → shard, level, category, trajectory, frames,
duration).

A sample holds ``<key>.<view>.mp4`` and ``<key>.<view>.camera.json`` (K in pixels, 4x4
camera-to-world per frame) for the five views, ``<key>.json`` (metadata), ``<key>.txt``
(caption), ``<key>.<view>.<layer>.mkv`` and ``<key>.instances.parquet`` (the ground-truth
layers the render has, lossless), ``<key>.frames.parquet`` (per-frame action, in the
reader's convention: applied after the frame, and character pose) and ``<key>.cameras.parquet``
(per-frame camera poses). Keys contain no dots. Every tar member has a fixed mtime, owner and
mode, so the same inputs give byte-identical shards.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import pandas as pd

from .config import ShardConfig
from .core.trajectory import VIEWS
from .datasets.clip_spans import Clip, ClipError, list_clips, row_dict
from .datasets.layer_exports import clip_layers, cut_layer_file
from .datasets.samples import (
    dump_json,
    export_frames,
    parquet_bytes,
    sample_json,
    view_camera_json,
    view_video,
)
from .datasets.tar_shards import ShardWriter
from .parquet_io import write_parquet
from .shared.stage_args import stage_args

INDEX_COLUMNS = ["key", "shard", "level_id", "category", "trajectory", "character_id",
                 "start_frame", "frames", "duration_s", "fps", "width", "height", "bytes"]


def write_shards(clips: list[Clip], captions: pd.DataFrame, levels: pd.DataFrame,
                 out: Path, cfg: ShardConfig, selection: pd.DataFrame | None = None,
                 scorer: str | None = None) -> pd.DataFrame:
    """Write the shards under ``out`` (old shards there are removed first) and return the
    index. A clip without a caption is an error naming the clip: captions must be current."""
    import json

    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("shard-*.tar*"):
        old.unlink()
    by_key = captions.set_index("key") if not captions.empty else captions
    missing = [c.key for c in clips if c.key not in by_key.index]
    if missing:
        raise ClipError(f"captions.parquet has no caption for {len(missing)} clip(s), e.g. "
                        f"{missing[0]}: re-run the caption stage")
    writer = ShardWriter(out, cfg.max_shard_bytes, cfg.mtime)
    rows = []
    with tempfile.TemporaryDirectory(prefix="wmforge-shard-") as tmp:
        scratch = Path(tmp)
        for clip in clips:
            meta = json.loads((clip.render_dir / "meta.json").read_text())
            frames, cams = export_frames(clip)
            cap = {str(k): v for k, v in by_key.loc[clip.key].to_dict().items()}
            cap["key"] = clip.key
            level = row_dict(levels, "level_id", clip.level_id)
            sel = row_dict(selection, "level_id", clip.level_id)
            if sel:
                sel["scorer"] = scorer
            doc = sample_json(clip, frames, cams, cap, level, meta, sel or None)
            members: list[tuple[str, bytes | Path]] = [
                (f"{v}.mp4", view_video(clip, v, scratch)) for v in VIEWS]
            members += [(f"{v}.camera.json", dump_json(view_camera_json(clip, cams, v)))
                        for v in VIEWS]
            layers = clip_layers(meta)  # ground truth: the lossless layer files, cut to the clip
            members += [(f"{v}.{x}.mkv", cut_layer_file(clip, v, x, scratch))
                        for v in VIEWS for x in layers]
            if layers:
                members.append(("instances.parquet", clip.render_dir / "instances.parquet"))
            members += [("json", dump_json(doc)), ("txt", (cap["caption"] + "\n").encode()),
                        ("frames.parquet", parquet_bytes(frames)),
                        ("cameras.parquet", parquet_bytes(cams))]
            shard = writer.write(clip.key, members)
            size = sum(len(c) if isinstance(c, bytes) else c.stat().st_size for _, c in members)
            rows.append({"key": clip.key, "shard": shard, "level_id": clip.level_id,
                         "category": level.get("category") or "uncategorized",
                         "trajectory": clip.trajectory, "character_id": meta["character_id"],
                         "start_frame": clip.start, "frames": clip.frames,
                         "duration_s": clip.frames / clip.fps, "fps": clip.fps,
                         "width": clip.width, "height": clip.height, "bytes": size})
            for p in scratch.glob(f"{clip.key}.*"):
                p.unlink()
        writer.close()
    return pd.DataFrame(rows, columns=INDEX_COLUMNS)


def main(argv: list[str] | None = None) -> int:
    parsed = stage_args("wmforge shard", __doc__, argv, {
        "renders": "data/renders", "captions": "data/captions/captions.parquet",
        "inventory": "data/inventory", "select": "data/select/levels.parquet",
        "out": "data/shards"})
    if parsed is None:
        return 2
    args, cfg = parsed
    renders, out = Path(args.renders), Path(args.out)
    index = pd.read_parquet(renders / "index.parquet")
    levels = pd.read_parquet(Path(args.inventory) / "levels.parquet")
    captions = pd.read_parquet(args.captions)
    try:
        clips = list_clips(renders, index, cfg.clips.clip_s, cfg.clips.min_clip_s)
        sel_path = Path(args.select)
        selection = pd.read_parquet(sel_path) if sel_path.is_file() else None
        table = write_shards(clips, captions, levels, out, cfg.shard, selection,
                             cfg.score.scorer)
    except ClipError as exc:
        print(f"error: {exc}", file=sys.stderr)
        shutil.rmtree(out, ignore_errors=True)
        return 2
    write_parquet(table, out / "index.parquet")
    print(f"shard: {len(table)} samples in {table['shard'].nunique()} shard(s), "
          f"{table['duration_s'].sum() / 60:.1f} min of five-view video → {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
