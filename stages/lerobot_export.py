"""`lerobot` stage: the rendered clips as a LeRobot v3.0 dataset in ``data/lerobot`` (one
episode per clip; the clip caption is the episode's task text)."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from .config import ConfigError
from .datasets.clip_spans import ClipError, list_clips
from .datasets.lerobot_v3 import export_lerobot
from .shared.stage_args import stage_args


def main(argv: list[str] | None = None) -> int:
    parsed = stage_args("wmforge lerobot", __doc__, argv, {
        "renders": "data/renders", "captions": "data/captions/captions.parquet",
        "out": "data/lerobot"})
    if parsed is None:
        return 2
    args, cfg = parsed
    try:
        renders = Path(args.renders)
        clips = list_clips(renders, pd.read_parquet(renders / "index.parquet"),
                           cfg.clips.clip_s, cfg.clips.min_clip_s)
        caps = pd.read_parquet(args.captions)
        info = export_lerobot(clips, dict(zip(caps["key"], caps["caption"], strict=True)),
                              Path(args.out), cfg.shard.lerobot_chunk_size)
    except (ConfigError, ClipError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"lerobot: {info['total_episodes']} episodes, {info['total_frames']} frames "
          f"(LeRobot {info['codebase_version']}) → {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
