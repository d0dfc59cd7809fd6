"""The encoder's pinned settings: the same frames give the same bytes."""

from __future__ import annotations

import hashlib

import numpy as np

from stages.media.video import EncodeSettings, VideoWriter, read_frames


def _frames(h: int, w: int, n: int) -> list[np.ndarray]:
    """A blocky random texture sliding diagonally: enough motion for the rate control to
    matter, like a camera moving over a textured floor."""
    rng = np.random.default_rng(0)
    base = rng.integers(0, 255, (h // 6 + 1, w // 6 + 1, 3)).astype(np.uint8)
    tex = np.repeat(np.repeat(base, 6, 0), 6, 1)[:h, :w]
    return [np.ascontiguousarray(np.roll(tex, (i, 2 * i), axis=(0, 1))) for i in range(n)]


def test_the_same_frames_encode_to_the_same_bytes_at_a_height_that_is_not_a_multiple_of_16(
        tmp_path):
    """160×90 is the sample scoring size. With x264's MB-tree on, 10 encodes of these frames
    in one process gave 2 different files (the Apartment's real frames: 5 of 10)."""
    frames = _frames(90, 160, 60)
    hashes = set()
    for k in range(12):
        w = VideoWriter(tmp_path / f"{k}.mp4", 160, 90, 30, EncodeSettings())
        for f in frames:
            w.write(f)
        hashes.add(hashlib.sha256(w.close(len(frames)).read_bytes()).hexdigest())
    assert len(hashes) == 1
    got = read_frames(tmp_path / "0.mp4")
    assert len(got) == 60
    assert np.abs(got[30].astype(int) - frames[30]).mean() < 12  # still the picture
