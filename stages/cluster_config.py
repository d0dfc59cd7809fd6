"""Cluster production settings (config groups ``upload`` and ``monitor``; the Ray executor's
keys live in ``cluster``): execution only, they never change an output byte."""

from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass
class UploadConfig:
    """The per-node uploader (paper §8.3). Credentials come from the standard AWS chain
    (environment, shared files, instance profile) and are never part of the config."""

    # S3 endpoint (a custom one for SeaweedFS/MinIO); empty = AWS's own
    endpoint_url: str = "http://127.0.0.1:8333"
    # bucket, created when missing
    bucket: str = "wmforge"
    region: str = "us-east-1"
    # renders go to <prefix>/<scene>/<level>/<instance>/<traj>/<file>
    prefix: str = "renders"
    # failure snapshots go to <snapshot_prefix>/<node>/<instance>/<file>
    snapshot_prefix: str = "snapshots"
    # a finished trajectory is uploaded once its files have not changed for this long, s
    quiet_s: float = 10.0
    # files at least this large go up in parts of part_mb (S3's minimum part is 5 MiB)
    multipart_mb: int = 16
    part_mb: int = 8
    # seconds between scans; back-off after the store is unreachable doubles up to backoff_max_s
    poll_s: float = 2.0
    backoff_max_s: float = 60.0
    # check each object's size and SHA-256 with head_object before deleting the local file
    # (off only to measure what verification costs; then nothing local is deleted)
    verify: bool = True


@dataclass
class MonitorConfig:
    """Node monitors (paper §8.4), separate from the runners."""

    # the disk watched for pressure (empty: node.work_dir)
    disk_path: str = ""
    # free-space thresholds, MiB: warn; stop leasing (the allocator drains the node); prune
    # verified outputs and old logs. Each must be below the previous one's value.
    warn_free_mb: float = 20480.0
    drain_free_mb: float = 10240.0
    prune_free_mb: float = 5120.0
    # logs under node.work_dir older than this are pruned under pressure, h
    prune_log_age_h: float = 24.0
    # GPU probe: "nvml" (pynvml + an EGL device probe), or "standin:<json file>" (a stand-in
    # for NVML read from a file, named as such: tests on machines without a GPU)
    gpu_probe: str = "nvml"
    # remediation: reason code -> shell command run under a file lock with a per-node cooldown
    remediation: dict[str, str] = field(default_factory=dict)
    cooldown_s: float = 900.0
    # seconds between monitor rounds on each node
    interval_s: float = 30.0


def validate_cluster_settings(up: UploadConfig, mon: MonitorConfig) -> None:
    """Raise ValueError naming the ``upload.*`` / ``monitor.*`` key that is out of range."""
    if up.part_mb < 5 or up.multipart_mb < up.part_mb:
        raise ValueError(f"upload.part_mb {up.part_mb} must be >= 5 (S3's minimum part) and "
                         f"upload.multipart_mb {up.multipart_mb} >= upload.part_mb")
    if up.quiet_s < 0 or up.poll_s <= 0 or up.backoff_max_s < up.poll_s:
        raise ValueError("upload.quiet_s >= 0, upload.poll_s > 0 and upload.backoff_max_s >= "
                         "upload.poll_s expected")
    if not re.fullmatch(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]", up.bucket):
        raise ValueError(f"upload.bucket {up.bucket!r}: expected an S3 bucket name (3-63 "
                         "lowercase letters, digits, dots and hyphens)")
    if not mon.warn_free_mb >= mon.drain_free_mb >= mon.prune_free_mb >= 0:
        raise ValueError(f"monitor thresholds: expected warn_free_mb ({mon.warn_free_mb}) >= "
                         f"drain_free_mb ({mon.drain_free_mb}) >= prune_free_mb "
                         f"({mon.prune_free_mb}) >= 0")
    if not (mon.gpu_probe == "nvml" or mon.gpu_probe.startswith("standin:")):
        raise ValueError(f"monitor.gpu_probe {mon.gpu_probe!r}: expected 'nvml' or "
                         "'standin:<file>'")
