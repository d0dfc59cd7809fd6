"""Structured configuration: one dataclass per stage, composed by Hydra from ``conf/``.

``conf/`` is the single source; ``params.yaml`` is its composed result (committed, rewritten by
``wmforge params``; DVC rewrites it itself on ``dvc exp run``). Every stage validates the part of
``params.yaml`` it reads against these dataclasses before any work, so a misspelt key or a wrong
type stops the run at start-up naming the key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from .cluster_config import MonitorConfig, UploadConfig, validate_cluster_settings
from .core.cameras import CameraRigConfig
from .core.stage1 import ActionConfig, SpawnConfig, validate_action_config
from .node_config import NodeConfig, validate_node
from .unreal_config import UnrealConfig, validate_unreal

REPO_ROOT = Path(__file__).resolve().parent.parent
CONF_DIR = REPO_ROOT / "conf"
PARAMS_PATH = REPO_ROOT / "params.yaml"


class ConfigError(ValueError):
    """A configuration value is missing, misspelt, of the wrong type or out of range."""


@dataclass
class LibraryConfig:
    # asset library root that `inventory` scans (relative paths are relative to the repo root)
    root: str = "assets/sample"
    # user-edited per-level overrides (walk speed, exposure, enabled); relative to `root`
    overrides_file: str = "overrides.yaml"


@dataclass
class SampleLibraryConfig:
    # seed of the procedural sample-asset generator: same seed, same bytes
    seed: int = 7
    # grid cells per side of generated terrain heightfields (triangles = 2 * cells^2)
    terrain_cells: int = 48
    # side of generated square textures, pixels (power of two)
    texture_size: int = 128
    # copy the real third-party assets shipped in installed wheels (panda3d models, pybullet_data)
    include_wheel_assets: bool = True


@dataclass
class InventoryConfig:
    # levels whose horizontal extent exceeds this are treated as partitioned open worlds, metres
    max_extent_m: float = 1000.0
    # collision capsule = model bounding box x this safety factor (slightly above 1)
    capsule_safety: float = 1.1
    # minimum capsule radius, metres (clamp for thin or flat characters)
    min_capsule_radius_m: float = 0.2
    # minimum capsule total height, metres
    min_capsule_height_m: float = 0.6
    # default walking speed when neither character nor level override sets one, m/s
    default_walk_speed: float = 1.6
    # enable showcase / preview layouts for production (the paper excludes them)
    enable_showcase: bool = False
    # enable sub-levels that are partial on their own (the paper excludes them)
    enable_sublevels: bool = False
    # per-file read limit, bytes; larger files are inventoried by size only
    max_probe_bytes: int = 256_000_000
    # find characters without a character.json: skinned models (egg joints, glTF skins) and
    # their clip files; every inferred value is recorded in characters.parquet's `guesses`
    discover_characters: bool = True


@dataclass
class EngineConfig:
    # which adapter: "embedded" (Panda3D + Bullet) or "unreal"
    name: str = "embedded"
    # Panda3D display module for offscreen rendering (p3headlessgl = EGL; p3tinydisplay = software)
    display: str = "p3headlessgl"
    # simulation rate, frames per second (fixed step)
    fps: int = 30


@dataclass
class TrajectoriesConfig:
    # trajectories per enabled level
    per_level: int = 2
    # frames per trajectory (production preset: 1800 = 60 s at 30 fps)
    frames: int = 300
    # characters to sample from: inventory character ids, or empty for every usable one
    characters: list[str] = field(default_factory=list)
    # cast occlusion rays for the external cameras (off only for benchmarking)
    camera_rays: bool = True
    # only these level ids (empty: every enabled level)
    levels: list[str] = field(default_factory=list)
    actions: ActionConfig = field(default_factory=ActionConfig)
    spawn: SpawnConfig = field(default_factory=SpawnConfig)
    cameras: CameraRigConfig = field(default_factory=CameraRigConfig)


RESOLUTION_PRESETS = {"540p": (960, 540), "720p": (1280, 720), "1080p": (1920, 1080)}


@dataclass
class RenderConfig:
    # resolution preset: 540p (screening), 720p, 1080p
    preset: str = "720p"
    # explicit size in px overriding the preset (0 = use the preset); even numbers
    width: int = 0
    height: int = 0
    # anti-aliasing as Movie Render Queue does it: sub-pixel jittered spatial samples x
    # sub-frame temporal samples, accumulated in linear light into each output frame
    spatial_samples: int = 8
    temporal_samples: int = 1
    # fraction of the frame interval the temporal samples span (0.5 = a 180-degree shutter)
    shutter: float = 0.5
    # frames rendered and discarded after the level loads (texture residency, caches)
    warmup_frames: int = 8
    # H.264 (libx264) settings, pinned so the same inputs give the same bytes
    x264_preset: str = "veryfast"
    crf: int = 20
    encoder_threads: int = 2
    # x264 MB-tree: smaller files, but no byte-identical re-runs (see EncodeSettings.mbtree)
    x264_mbtree: bool = False
    # keyframe interval, s (closed GOP: seeking decodes at most this much)
    gop_s: float = 1.0
    # write the tiled five-view preview MP4 (never scored)
    preview: bool = True
    # the preview is for eyes only (never scored): a faster x264 preset and more threads so its
    # 1.5x-a-view picture never becomes the stream that holds the renderer back
    preview_x264_preset: str = "ultrafast"
    preview_encoder_threads: int = 4
    # frames queued between renderer and encoder (bounds memory)
    queue_depth: int = 4
    # alignment gate: mask resolution divisor, hit radius in mask px, minimum aligned share
    mask_scale: int = 2
    align_radius_px: int = 3
    align_min: float = 0.95
    # node id in instance ids (node id + timestamp + sequence number)
    node_id: str = "local"
    # kill a renderer process running longer than this, s (0 = no limit)
    instance_timeout_s: float = 0.0
    # the look (stages/engine/pbr.py): sun shadow map size (px per side) and the half-width of
    # the area around the character it covers (m; refitted every frame)
    shadow_map_size: int = 2048
    shadow_extent_m: float = 25.0
    # shadow-map taps per output pixel (1, 2, 4 or 8; each a hardware 2x2 comparison), spread
    # over the pixel's samples: softness (at 8 samples every value costs one tap a sample)
    shadow_pcf_taps: int = 4
    # automatic exposure: metered on the first meter_frames frames of each trajectory, bringing
    # the geometric mean luminance to exposure_key (0 frames = fixed exposure); the level's
    # exposure_compensation (overrides.yaml, EV) multiplies it
    meter_frames: int = 3
    exposure_key: float = 0.1
    # tone map applied to linear light before the sRGB encode: aces (filmic) or none (clamp)
    tone_map: str = "aces"
    # strength of the sky's image-based light (diffuse and specular)
    ibl_strength: float = 0.6
    # deferred: the rasterizer writes a G-buffer and a compute pass lights it (the same look;
    # an H100/H200 runs pixel shaders on few units, compute on all; needs OpenGL 4.3);
    # forward: the whole look in the fragment shader (the reference; OpenGL 3.3); auto:
    # deferred on a GPU with compute shaders, forward on a software rasterizer (llvmpipe)
    shading: str = "auto"

    def size(self) -> tuple[int, int]:
        if self.width and self.height:
            return self.width, self.height
        return RESOLUTION_PRESETS[self.preset]


@dataclass
class ScreenConfig:
    # renderability screening (§4.2): clips per candidate level, each this long, s
    clips: int = 5
    clip_s: float = 10.0
    # screening render: preset (or explicit size) and spatial samples (1: no anti-aliasing)
    preset: str = "540p"
    width: int = 0
    height: int = 0
    spatial_samples: int = 1
    # characters to screen with (inventory ids of the library being screened; a missing one
    # stops the stage at start-up); empty: every usable walking character of that library
    characters: list[str] = field(default_factory=list)
    # added to the global seed, so screening clips differ from production trajectories
    seed_offset: int = 1000
    # an engine process (Stage I or II of one level) running longer than this fails, s
    timeout_s: float = 900.0
    # hovering: walking frames out of ground contact above this share, or the capsule bottom
    # more than hover_gap_m above the visible ground below in more than hover_gap_share of frames
    hover_airborne_share: float = 0.5
    hover_gap_m: float = 0.25
    hover_gap_share: float = 0.3
    # interpenetration: capsule overlapping visible geometry by more than penetration_tol_m in
    # more than penetration_share of frames
    penetration_tol_m: float = 0.05
    penetration_share: float = 0.1
    # a level fails a detector that trips on at least this share of its clips
    reject_clip_share: float = 0.4
    # the file of manual verdicts that override the automatic ones (relative to the repo root)
    review_file: str = "review/screen.yaml"
    # contact-sheet tile width, px (at least 320: frames are scaled to it, reasons written on)
    sheet_tile_w: int = 480


@dataclass
class ScoreConfig:
    # visual quality (§4.2): clips per renderable level, each this long, s
    clips: int = 20
    clip_s: float = 10.0
    preset: str = "540p"
    width: int = 0
    height: int = 0
    spatial_samples: int = 1
    seed_offset: int = 2000
    timeout_s: float = 900.0
    # aesthetic scorer: "brisque" (embedded, ships its model; lower is better) or "laion"
    # (CLIP ViT-L/14 + the LAION improved aesthetic MLP; higher is better, about 1..10)
    scorer: str = "brisque"
    # frames sampled evenly from every view video (SpatialVID samples 3)
    frames_per_view: int = 8
    # "keyframes": at evenly spaced times, the keyframe at or before each (GOP starts, 1 s
    # apart); each reached by a seek and decoded alone, ~1/30 of a full decode; two times in
    # one GOP fall back to "even"; "even": spread over all frames, first and last included
    sample_at: str = "keyframes"
    # processes decoding (and, for BRISQUE, scoring) views; 0: one per CPU, 1: no pool
    decode_workers: int = 0
    # LAION weights: a local directory holding clip_weights_file and mlp_file
    laion_weights_dir: str = "models/laion-aesthetic"
    clip_weights_file: str = "open_clip_pytorch_model.bin"
    mlp_file: str = "sac+logos+ava1-l14-linearMSE.pth"
    # fetch missing weights from the hub (machines with internet only)
    allow_download: bool = False
    # images per batch; "auto" device: cuda when there is one
    batch_size: int = 32
    device: str = "auto"
    # LAION: "auto" = fp16 on CUDA (weights fp16, LayerNorm fp32), fp32 elsewhere; "bf16";
    # "fp8" = the transformer's linear layers in float8 e4m3 (Ada/Hopper GPUs), the rest
    # bf16: the tower 1.18x fp16's rate on the H200, embeddings within cosine 0.998 of fp32
    # on random weights (not checked on the real ones: README, Benchmarks)
    precision: str = "auto"
    # LAION: torch.compile the image tower (fuses the LayerNorms and activations between the
    # matmuls; ~1 min once per process); "auto" = on CUDA
    compile: str = "auto"


@dataclass
class SelectConfig:
    # a view passes when its aesthetic score clears the scorer's bar and its mean luma is
    # strictly between lum_min and lum_max (0-255)
    aes_min: float = 5.5  # LAION units (higher is better)
    brisque_max: float = 45.0  # BRISQUE units (lower is better)
    lum_min: float = 25.0
    lum_max: float = 140.0
    # a level is retained when more than this share of its sampled views pass
    level_pass_share: float = 0.25


@dataclass
class ClusterConfig:
    # node ids of the cluster; pools partition the retained levels, one pool per node
    nodes: list[str] = field(default_factory=lambda: ["local"])
    # the node this machine runs as (its pool feeds trajectories); empty: every pool
    node: str = ""
    # passes over each pool, each in its own shuffled order
    passes: int = 1
    # --- the Ray executor (execution only; the pools stage reads nodes and passes) ---
    # Ray GCS port of `wmforge cluster up --head` (workers join HOST:PORT)
    head_port: int = 6379
    # Ray's dashboard (an HTTP server and several processes); off by default
    include_dashboard: bool = False
    # a lease not renewed for this long expires and its unit is handed out again, s
    lease_s: float = 120.0
    # the allocator's persisted state (on the head's disk); a restart reads it back
    allocator_state: str = "work/allocator/state.json"
    # the allocator's HTTP status port (0 = a free port, written next to the state file)
    allocator_http_port: int = 0
    # engine processes run as this unprivileged user when the engine requires it (Unreal
    # refuses root); empty = the runner's own user
    engine_user: str = ""


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


@dataclass
class WmforgeConfig:
    # global seed; every work unit derives its own seed from this and its id
    seed: int = 0
    library: LibraryConfig = field(default_factory=LibraryConfig)
    sample_library: SampleLibraryConfig = field(default_factory=SampleLibraryConfig)
    inventory: InventoryConfig = field(default_factory=InventoryConfig)
    engine: EngineConfig = field(default_factory=EngineConfig)
    trajectories: TrajectoriesConfig = field(default_factory=TrajectoriesConfig)
    render: RenderConfig = field(default_factory=RenderConfig)
    screen: ScreenConfig = field(default_factory=ScreenConfig)
    score: ScoreConfig = field(default_factory=ScoreConfig)
    select: SelectConfig = field(default_factory=SelectConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    node: NodeConfig = field(default_factory=NodeConfig)
    upload: UploadConfig = field(default_factory=UploadConfig)
    monitor: MonitorConfig = field(default_factory=MonitorConfig)
    clips: ClipsConfig = field(default_factory=ClipsConfig)
    caption: CaptionConfig = field(default_factory=CaptionConfig)
    shard: ShardConfig = field(default_factory=ShardConfig)
    report: ReportConfig = field(default_factory=ReportConfig)
    unreal: UnrealConfig = field(default_factory=UnrealConfig)


def register_configs() -> None:
    """Register the schema with Hydra's ConfigStore (name ``wmforge_schema``)."""
    ConfigStore.instance().store(name="wmforge_schema", node=WmforgeConfig)


register_configs()


def validate(raw: Any, source: str) -> WmforgeConfig:
    """Merge ``raw`` onto the schema; raise ConfigError naming ``source`` and the bad key."""
    schema = OmegaConf.structured(WmforgeConfig)
    try:
        merged = OmegaConf.merge(schema, raw)
        obj = OmegaConf.to_object(merged)
    except OmegaConfBaseException as exc:
        key = getattr(exc, "full_key", None) or "?"
        msg = str(exc).splitlines()[0]
        raise ConfigError(f"{source}: bad config key '{key}': {msg}") from None
    assert isinstance(obj, WmforgeConfig)
    try:
        validate_action_config(obj.trajectories.actions)
    except ValueError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    r = obj.render
    if not (r.width and r.height) and r.preset not in RESOLUTION_PRESETS:
        raise ConfigError(f"{source}: render.preset {r.preset!r}; expected one of "
                          f"{sorted(RESOLUTION_PRESETS)} (or set render.width/height)")
    w, h = r.size()
    if w % 2 or h % 2 or w < 16 or h < 16:
        raise ConfigError(f"{source}: render size {w}x{h}: need even numbers >= 16 (yuv420p)")
    if not 1 <= r.spatial_samples * r.temporal_samples <= 64:
        raise ConfigError(f"{source}: render.spatial_samples x render.temporal_samples must be "
                          "between 1 and 64")
    if r.shading not in ("auto", "deferred", "forward"):
        raise ConfigError(f"{source}: render.shading is {r.shading!r}; expected auto, "
                          "deferred or forward")
    if r.shadow_pcf_taps not in (1, 2, 4, 8):
        raise ConfigError(f"{source}: render.shadow_pcf_taps is {r.shadow_pcf_taps}; expected "
                          "1, 2, 4 or 8")
    if obj.score.scorer not in ("brisque", "laion"):
        raise ConfigError(f"{source}: score.scorer {obj.score.scorer!r}: expected 'brisque' or "
                          "'laion'")
    for name in ("screen", "score"):
        sc = getattr(obj, name)
        if not (sc.width and sc.height) and sc.preset not in RESOLUTION_PRESETS:
            raise ConfigError(f"{source}: {name}.preset {sc.preset!r}; expected one of "
                              f"{sorted(RESOLUTION_PRESETS)} (or set {name}.width/height)")
        if sc.clips < 1 or sc.clip_s <= 0:
            raise ConfigError(f"{source}: {name}.clips must be >= 1 and {name}.clip_s > 0")
    if obj.screen.sheet_tile_w < 320:
        raise ConfigError(f"{source}: screen.sheet_tile_w {obj.screen.sheet_tile_w}: expected "
                          ">= 320 px (tiles large enough to judge)")
    if not obj.cluster.nodes or len(set(obj.cluster.nodes)) != len(obj.cluster.nodes):
        raise ConfigError(f"{source}: cluster.nodes {obj.cluster.nodes}: expected distinct ids")
    if obj.cluster.node and obj.cluster.node not in obj.cluster.nodes:
        raise ConfigError(f"{source}: cluster.node {obj.cluster.node!r} is not in cluster.nodes")
    try:
        validate_node(obj.node)
        validate_unreal(obj.unreal)
        validate_cluster_settings(obj.upload, obj.monitor)
    except ValueError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    if obj.caption.backend not in ("grounded", "vlm"):
        raise ConfigError(f"{source}: caption.backend {obj.caption.backend!r}: expected "
                          "'grounded' or 'vlm'")
    if obj.clips.clip_s < 0 or obj.clips.min_clip_s < 0:
        raise ConfigError(f"{source}: clips.clip_s and clips.min_clip_s must be >= 0")
    if obj.shard.max_shard_bytes < 1_000_000:
        raise ConfigError(f"{source}: shard.max_shard_bytes {obj.shard.max_shard_bytes}: "
                          "expected at least 1000000")
    if not 0 <= r.align_min <= 1:
        raise ConfigError(f"{source}: render.align_min {r.align_min}: expected 0..1")
    return obj


def compose(overrides: list[str] | None = None, conf_dir: Path = CONF_DIR) -> DictConfig:
    """Compose ``conf/`` the way ``dvc exp run`` does (plain Hydra compose, resolved)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    with initialize_config_dir(str(conf_dir.resolve()), version_base=None):
        cfg = hydra_compose(config_name="config", overrides=list(overrides or []))
    OmegaConf.resolve(cfg)
    return cfg


def composed_yaml(overrides: list[str] | None = None, conf_dir: Path = CONF_DIR) -> str:
    """The exact text DVC writes to params.yaml for this composition."""
    cfg = compose(overrides, conf_dir)
    validate(cfg, f"{conf_dir}")
    return OmegaConf.to_yaml(cfg)


def load_params(path: Path | str = PARAMS_PATH,
                overrides: list[str] | None = None) -> WmforgeConfig:
    """Read and validate params.yaml (plus dotted ``key=value`` overrides)."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"{path}: not found; run `wmforge params` to compose it from conf/")
    try:
        raw = OmegaConf.load(path)
    except Exception as exc:  # yaml syntax error
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    if overrides:
        try:
            raw = OmegaConf.merge(raw, OmegaConf.from_dotlist(list(overrides)))
        except OmegaConfBaseException as exc:
            raise ConfigError(f"override {overrides}: {exc}") from None
    return validate(raw, str(path))
