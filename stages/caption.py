"""`caption` stage: a dense caption for every clip (notes §4.2, §4.6).

Default backend ``grounded``: written from the recorded trajectory and the inventory, so nothing
can be invented. Optional ``vlm``: an OpenAI-compatible chat endpoint captions one key frame every
``caption.vlm.keyframe_s`` seconds (cached; frames between key frames reuse its caption); the
per-view captions stay grounded. Output: ``data/captions/captions.parquet``, one row per clip.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pandas as pd

from .config import ConfigError, WmforgeConfig
from .core.trajectory import VIEWS
from .datasets.clip_spans import Clip, ClipError, list_clips, row_dict
from .datasets.grounded_caption import grounded_captions
from .datasets.samples import clip_frames
from .parquet_io import write_parquet
from .shared.stage_args import stage_args

COLUMNS = ["key", "level_id", "trajectory", "start_frame", "end_frame", "fps", "backend",
           "caption", *[f"caption_{v}" for v in VIEWS], "keyframes_json", "phrases_json"]


def clip_tables(clip: Clip) -> tuple[dict, dict[str, dict]]:
    """The clip's rows of frames.parquet and, per view, of cameras.parquet (as column lists)."""
    fr, cams = clip_frames(clip)
    per_view = {v: {str(k): c[k].tolist() for k in c}
                for v, c in ((v, cams[cams["view"] == v]) for v in VIEWS)}
    return {str(k): fr[k].tolist() for k in fr}, per_view


def caption_clips(clips: list[Clip], levels: pd.DataFrame, characters: pd.DataFrame,
                  cfg: WmforgeConfig, log=print) -> pd.DataFrame:
    client = None
    if cfg.caption.backend == "vlm":
        from .datasets.vlm_caption import VLMClient

        v = cfg.caption.vlm
        if v.view not in VIEWS:
            raise ConfigError(f"caption.vlm.view {v.view!r}: expected one of {list(VIEWS)}")
        client = VLMClient(v.base_url, v.model, os.environ.get(v.api_key_env) or None,
                           v.timeout_s, v.max_retries, Path(v.cache_dir), v.max_tokens)
    rows = []
    for clip in clips:
        frames, cams = clip_tables(clip)
        meta = json.loads((clip.render_dir / "meta.json").read_text())
        level = row_dict(levels, "level_id", clip.level_id) or {"level_id": clip.level_id}
        character = row_dict(characters, "character_id", str(meta["character_id"])) or {
            "character_id": meta["character_id"]}
        g = grounded_captions(frames, cams, clip.fps, level, character,
                              (clip.width, clip.height))
        caption, keyframes = g["caption"], []
        if client is not None:
            from .datasets.vlm_caption import vlm_keyframe_captions

            v = cfg.caption.vlm
            keyframes = vlm_keyframe_captions(client, clip.render_dir / f"{v.view}.mp4",
                                              clip.start, clip.end, clip.fps, v.keyframe_s,
                                              g["phrases"])
            caption = " ".join(f"[{k['t']:.1f} s] {k['caption']}" for k in keyframes)
        rows.append({"key": clip.key, "level_id": clip.level_id, "trajectory": clip.trajectory,
                     "start_frame": clip.start, "end_frame": clip.end, "fps": clip.fps,
                     "backend": cfg.caption.backend, "caption": caption,
                     **{f"caption_{v}": g["views"][v] for v in VIEWS},
                     "keyframes_json": json.dumps(keyframes),
                     "phrases_json": json.dumps(g["phrases"])})
    if client is not None:
        log(f"caption: VLM {client.url}: {client.requests_sent} requests, "
            f"{client.cache_hits} answers from the cache")
    return pd.DataFrame(rows, columns=COLUMNS)


def main(argv: list[str] | None = None) -> int:
    parsed = stage_args("wmforge caption", __doc__, argv, {
        "renders": "data/renders", "inventory": "data/inventory", "out": "data/captions"})
    if parsed is None:
        return 2
    args, cfg = parsed
    from .datasets.vlm_caption import VLMError

    renders = Path(args.renders)
    index = pd.read_parquet(renders / "index.parquet")
    inv = Path(args.inventory)
    levels = pd.read_parquet(inv / "levels.parquet")
    chars = pd.read_parquet(inv / "characters.parquet")
    try:
        clips = list_clips(renders, index, cfg.clips.clip_s, cfg.clips.min_clip_s)
        table = caption_clips(clips, levels, chars, cfg)
    except (ClipError, VLMError, ConfigError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    write_parquet(table, Path(args.out) / "captions.parquet")
    print(f"caption: {len(table)} clips captioned ({cfg.caption.backend}) → {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
