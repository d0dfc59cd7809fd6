"""LeRobot v3 normalisation statistics, the way LeRobot's own writer makes them: per episode
(``compute_episode_stats``: every frame of a numeric feature; for a video, about 100 frames
sampled evenly, downsampled past 300 px, per channel in [0, 1]), written into the episode table
as ``stats/<feature>/<stat>`` columns, and aggregated over every episode into
``meta/stats.json`` (``aggregate_stats``: weighted by ``count``, variances combined with the
parallel algorithm). ``count`` is in frames: the frames the statistics were computed from.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

STAT_KEYS = ("min", "max", "mean", "std", "count")


def feature_stats(values: np.ndarray) -> dict[str, np.ndarray]:
    """min/max/mean/std over the frames (axis 0) of a (frames, ...) array, count in frames."""
    a = np.asarray(values, np.float64)
    if a.ndim == 1:
        a = a[:, None]
    return {"min": a.min(0), "max": a.max(0), "mean": a.mean(0), "std": a.std(0),
            "count": np.array([len(a)])}


def sample_indices(n: int) -> list[int]:
    """LeRobot's ``sample_indices``: n**0.75 frames evenly spread, at least 100 (or all of a
    shorter episode), at most 10,000."""
    k = max(min(100, n), min(int(n ** 0.75), 10_000))
    return np.round(np.linspace(0, n - 1, k)).astype(int).tolist()


def _downsample(img: np.ndarray, target: int = 150, threshold: int = 300) -> np.ndarray:
    """LeRobot's ``auto_downsample_height_width`` on an (H, W, C) image."""
    h, w = img.shape[:2]
    if max(w, h) < threshold:
        return img
    f = int(w / target) if w > h else int(h / target)
    return img[::f, ::f]


def video_stats(video: Path, frames: int) -> dict[str, np.ndarray]:
    """Per-channel statistics (shape (3, 1, 1), values in [0, 1]) of the sampled frames of one
    episode's video; ``count`` is the number of frames sampled."""
    import av

    want = set(sample_indices(frames))
    px = []
    with av.open(str(video)) as c:
        for i, fr in enumerate(c.decode(video=0)):
            if i in want:
                px.append(_downsample(fr.to_ndarray(format="rgb24")))
    if len(px) != len(want):
        raise ValueError(f"{video}: decoded {len(px)} of the {len(want)} sampled frames "
                         f"(expected {frames} frames)")
    a = np.stack(px).astype(np.float64) / 255.0  # (k, H, W, 3)
    out = {"min": a.min((0, 1, 2)), "max": a.max((0, 1, 2)), "mean": a.mean((0, 1, 2)),
           "std": a.std((0, 1, 2))}
    stats = {k: v.reshape(3, 1, 1) for k, v in out.items()}
    stats["count"] = np.array([len(px)])
    return stats


def aggregate(per_episode: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """LeRobot's ``aggregate_feature_stats``: one feature's statistics over episodes."""
    means = np.stack([s["mean"] for s in per_episode])
    var = np.stack([s["std"] ** 2 for s in per_episode])
    counts = np.stack([s["count"] for s in per_episode]).astype(np.float64)
    total = counts.sum(0)
    while counts.ndim < means.ndim:
        counts = counts[..., None]
    mean = (means * counts).sum(0) / total
    variance = ((var + (means - mean) ** 2) * counts).sum(0) / total
    return {"min": np.min(np.stack([s["min"] for s in per_episode]), 0),
            "max": np.max(np.stack([s["max"] for s in per_episode]), 0),
            "mean": mean, "std": np.sqrt(variance),
            "count": np.array([int(total.reshape(-1)[0])])}


def as_json(stats: dict[str, np.ndarray]) -> dict[str, list]:
    return {k: np.asarray(v).tolist() for k, v in stats.items()}


def episode_columns(stats: dict[str, dict[str, np.ndarray]]) -> dict[str, list]:
    """The episode table's ``stats/<feature>/<stat>`` columns of one episode (LeRobot's
    ``flatten_dict({"stats": episode_stats})``)."""
    return {f"stats/{k}/{s}": np.asarray(v[s]).tolist() for k, v in stats.items()
            for s in STAT_KEYS}
