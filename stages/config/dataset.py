"""The dataset: clips, captions, shards and the dataset card (config groups ``clips``,
``caption``, ``shard``, ``report``)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ClipsConfig:
    # clip length, s: every rendered trajectory is cut into clips this long at GOP boundaries
    # (a multiple of render.gop_s); 0 = one clip per whole trajectory
    clip_s: float = 0.0
    # a trailing remainder shorter than this is dropped, s
    min_clip_s: float = 1.0


@dataclass
class VLMConfig:
    # OpenAI-compatible endpoint (…/v1); the request goes to <base_url>/chat/completions
    base_url: str = "http://127.0.0.1:8000/v1"
    # model name sent in the request
    model: str = "gpt-4o-mini"
    # environment variable holding the API key (unset variable: no Authorization header)
    api_key_env: str = "WMFORGE_VLM_API_KEY"
    # one key frame every this many seconds; frames between key frames reuse its caption
    keyframe_s: float = 2.0
    # which view's frames are shown to the model
    view: str = "back"
    # seconds per request, and retries after a timeout, connection error, 429 or 5xx
    timeout_s: float = 60.0
    max_retries: int = 3
    # answers are cached here by a hash of the request: a re-run never asks twice
    cache_dir: str = ".cache/wmforge/vlm"
    max_tokens: int = 300


@dataclass
class CaptionConfig:
    # "grounded" (from the recorded data; nothing invented) or "vlm" (an OpenAI-compatible VLM)
    backend: str = "grounded"
    vlm: VLMConfig = field(default_factory=VLMConfig)


@dataclass
class ShardConfig:
    # start a new tar shard before it would grow past this many bytes (about 1 GB)
    max_shard_bytes: int = 1_000_000_000
    # mtime of every tar member (fixed, so the same inputs give byte-identical shards)
    mtime: int = 946684800
    # LeRobot v3 export (stage `lerobot`): episodes per chunk directory
    lerobot_chunk_size: int = 1000


@dataclass
class ReportConfig:
    # cell side of the top-down coverage maps, metres
    coverage_cell_m: float = 1.0
