"""Validation: a wrong key, type or range stops a run at start-up, naming the key (DESIGN §5)."""

from __future__ import annotations

import re
from typing import Any

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from ..core.stage1_config import validate_action_config
from ..engine.render_settings import leaders_mode
from .execution import ClusterConfig, MonitorConfig, NodeConfig, UnrealConfig, UploadConfig
from .rendering import RESOLUTION_PRESETS
from .schema import WmforgeConfig


class ConfigError(ValueError):
    """A configuration value is missing, misspelt, of the wrong type or out of range."""


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
    st = obj.trajectories.spawn.stream_timeout_s
    if not st > 0:
        raise ConfigError(f"{source}: trajectories.spawn.stream_timeout_s is {st}: expected a "
                          "number of seconds > 0 (the wait for a streamed world around a spawn)")
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
    if r.backend not in ("gl", "compute", "auto"):
        raise ConfigError(f"{source}: render.backend is {r.backend!r}; expected gl, compute "
                          "or auto")
    if r.compute_shading not in ("pixel", "sample"):
        raise ConfigError(f"{source}: render.compute_shading is {r.compute_shading!r}; "
                          "expected pixel or sample")
    try:
        leaders_mode(r.compute_leaders)
    except ValueError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    if r.readback not in ("sync", "pbo"):
        raise ConfigError(f"{source}: render.readback is {r.readback!r}; expected sync or pbo")
    if r.yuv not in ("auto", "device", "encoder"):
        raise ConfigError(f"{source}: render.yuv is {r.yuv!r}; expected auto, device or "
                          "encoder")
    # backend auto may resolve to gl (stages.engine.compute.backend.choose_backend)
    if r.yuv == "device" and r.backend in ("gl", "auto") and r.readback != "pbo":
        raise ConfigError(f"{source}: render.yuv=device with the gl backend needs "
                          "render.readback=pbo (the planes are read back through pixel-pack "
                          f"buffers); got render.readback={r.readback}")
    if r.backend == "compute" and obj.engine.name != "embedded":
        raise ConfigError(f"{source}: render.backend=compute needs engine.name=embedded (the "
                          f"compute renderer is embedded-only; engine {obj.engine.name!r} "
                          "renders with gl): use render.backend=gl or auto")
    if r.backend == "compute" and r.ground_truth:
        raise ConfigError(f"{source}: render.backend=compute cannot write render.ground_truth "
                          f"{list(r.ground_truth)} yet (the layers are drawn by the GL pass): "
                          "use render.backend=gl, or render.ground_truth=[]")
    from ..engine.stage2 import check_ground_truth

    try:
        check_ground_truth(obj.engine.name, r.ground_truth)
    except ValueError as exc:
        raise ConfigError(f"{source}: {exc}") from None
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
        validate_cluster_settings(obj.upload, obj.monitor, obj.cluster)
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
    for k, what in (("max_triangles", "triangles a level may draw"),
                    ("max_texture_px", "px, the longest texture side rendered at full size")):
        v = getattr(r.limits, k)
        if v < 1:
            raise ConfigError(f"{source}: render.limits.{k} {v}: expected a whole number >= 1 "
                              f"({what})")
    if not 0 <= r.align_min <= 1:
        raise ConfigError(f"{source}: render.align_min {r.align_min}: expected 0..1")
    return obj


def validate_node(nd: NodeConfig) -> None:
    """Raise ValueError naming the ``node.*`` key that is out of range."""
    if nd.slots_per_gpu < 1 or nd.cpu_slots < 1:
        raise ValueError("node.slots_per_gpu and node.cpu_slots must be >= 1")
    if nd.retries < 0 or nd.stall_timeout_s <= 0 or nd.stage1_timeout_s < 0:
        raise ValueError("node.retries >= 0, node.stall_timeout_s > 0 and "
                         "node.stage1_timeout_s >= 0 expected")
    if nd.memory_gb < 0 or nd.slot_memory_gb < 0:
        raise ValueError(f"node.memory_gb {nd.memory_gb} and node.slot_memory_gb "
                         f"{nd.slot_memory_gb}: expected GiB >= 0 (0 = no cap)")
    if any(g < 0 for g in nd.gpus):
        raise ValueError(f"node.gpus {nd.gpus}: expected GPU ids >= 0")
    if nd.display not in ("auto", "plain", "off"):
        raise ValueError(f"node.display {nd.display!r}: expected auto, plain or off")


# S3's general-purpose bucket naming rules (AWS "Bucket naming rules"): reserved prefixes and
# suffixes that S3 refuses or keeps for its own access points and directory buckets
_BUCKET_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
_BUCKET_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")


def bucket_name_problem(name: str) -> str:
    """What makes ``name`` an invalid S3 bucket name by S3's full rules ("" when valid)."""
    if not 3 <= len(name) <= 63:
        return f"{len(name)} characters (3 to 63 allowed)"
    if not re.fullmatch(r"[a-z0-9.-]+", name):
        return "only lowercase letters, digits, dots and hyphens are allowed"
    if not (name[0].isalnum() and name[-1].isalnum()):
        return "must begin and end with a letter or digit"
    if ".." in name:
        return "two adjacent dots"
    if re.fullmatch(r"\d{1,3}(\.\d{1,3}){3}", name):
        return "formatted as an IP address"
    for p in _BUCKET_PREFIXES:
        if name.startswith(p):
            return f"the prefix {p!r} is reserved"
    for sfx in _BUCKET_SUFFIXES:
        if name.endswith(sfx):
            return f"the suffix {sfx!r} is reserved"
    return ""


def _need(key: str, value: float, ok: bool, expected: str) -> None:
    if not ok:
        raise ValueError(f"{key} {value!r}: expected {expected}")


def validate_cluster_settings(up: UploadConfig, mon: MonitorConfig,
                              cl: ClusterConfig | None = None) -> None:
    """Raise ValueError naming the ``upload.*`` / ``monitor.*`` / ``cluster.*`` key that is
    out of range."""
    if cl is not None:
        _need("cluster.lease_s", cl.lease_s, cl.lease_s > 0, "seconds > 0")
        _need("cluster.runner_restarts", cl.runner_restarts, cl.runner_restarts >= 0,
              "a count >= 0 (0: a crashed runner process takes its node out of the run)")
        _need("cluster.death_check_s", cl.death_check_s, cl.death_check_s > 0, "seconds > 0")
        _need("cluster.dead_runner_s", cl.dead_runner_s,
              0 < cl.dead_runner_s <= cl.death_check_s,
              f"seconds > 0 and <= cluster.death_check_s ({cl.death_check_s})")
    _need("upload.restart_backoff_s", up.restart_backoff_s, up.restart_backoff_s > 0,
          "seconds > 0")
    _need("upload.poison_after", up.poison_after, up.poison_after >= 1,
          "a count >= 1 (crashes in a row before the uploader is given up)")
    _need("upload.stable_s", up.stable_s, up.stable_s > 0, "seconds > 0")
    _need("upload.end_wait_s", up.end_wait_s, up.end_wait_s > 0, "seconds > 0")
    _need("monitor.backlog_alert_s", mon.backlog_alert_s, mon.backlog_alert_s > 0,
          "seconds > 0")
    if up.part_mb < 5 or up.multipart_mb < up.part_mb:
        raise ValueError(f"upload.part_mb {up.part_mb} must be >= 5 (S3's minimum part) and "
                         f"upload.multipart_mb {up.multipart_mb} >= upload.part_mb")
    if up.quiet_s < 0 or up.poll_s <= 0 or up.backoff_max_s < up.poll_s:
        raise ValueError("upload.quiet_s >= 0, upload.poll_s > 0 and upload.backoff_max_s >= "
                         "upload.poll_s expected")
    problem = bucket_name_problem(up.bucket)
    if problem:
        raise ValueError(f"upload.bucket {up.bucket!r}: not an S3 bucket name: {problem}")
    if not mon.warn_free_mb >= mon.drain_free_mb >= mon.prune_free_mb >= 0:
        raise ValueError(f"monitor thresholds: expected warn_free_mb ({mon.warn_free_mb}) >= "
                         f"drain_free_mb ({mon.drain_free_mb}) >= prune_free_mb "
                         f"({mon.prune_free_mb}) >= 0")
    if not (mon.gpu_probe == "nvml" or mon.gpu_probe.startswith("standin:")):
        raise ValueError(f"monitor.gpu_probe {mon.gpu_probe!r}: expected 'nvml' or "
                         "'standin:<file>'")


def validate_unreal(u: UnrealConfig) -> None:
    """Raise ValueError naming the ``unreal.*`` key that is out of range."""
    if u.image_format not in ("png", "exr"):
        raise ValueError(f"unreal.image_format {u.image_format!r}: expected png or exr")
    if u.engine_warmup_frames < 0 or u.texture_pool_mb < 0 or u.max_log_bytes < 1_000_000:
        raise ValueError("unreal.engine_warmup_frames >= 0, unreal.texture_pool_mb >= 0 and "
                         "unreal.max_log_bytes >= 1000000 expected")
    if not u.exit_grace_s > 0:
        raise ValueError(f"unreal.exit_grace_s {u.exit_grace_s!r}: expected seconds > 0")
    if not u.run_as or u.run_as == "root":
        raise ValueError(f"unreal.run_as {u.run_as!r}: name an unprivileged user")
