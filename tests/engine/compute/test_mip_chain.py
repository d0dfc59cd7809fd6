"""The compute backend's texture mip chain (``compute.scene.mip_chain``), reduced in bands of
rows so an 8192x8192 texture fits in memory (render.limits, issue #30), gives the same bytes as
reducing whole levels at once, as it did before: odd sizes, single rows and columns, sRGB and
linear textures, bands of one row, of three and of more rows than the level has."""

from __future__ import annotations

import numpy as np
import pytest

from stages.engine.compute.scene import _srgb_encode, mip_chain


def whole_levels(img: np.ndarray, srgb: bool) -> list[np.ndarray]:
    """The mip chain as it was computed before the bands: every level whole, in float64."""
    out = [img]
    lin = img.astype(np.float64) / 255.0
    if srgb:
        rgb = lin[..., :3]
        lin[..., :3] = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    while lin.shape[0] > 1 or lin.shape[1] > 1:
        h, w = lin.shape[:2]
        h2, w2 = max(1, h // 2), max(1, w // 2)
        a = lin[: h2 * 2 if h > 1 else 1, : w2 * 2 if w > 1 else 1]
        a = a.reshape(h2, a.shape[0] // h2, w2, a.shape[1] // w2, 4).mean(axis=(1, 3))
        lin = a
        enc = a.copy()
        if srgb:
            enc[..., :3] = _srgb_encode(a[..., :3])
        out.append(np.clip(np.rint(enc * 255.0), 0, 255).astype(np.uint8))
    return out


@pytest.mark.parametrize("shape", [(1, 1), (1, 7), (7, 1), (3, 5), (37, 129), (256, 100),
                                   (513, 1025)])
@pytest.mark.parametrize("srgb", [True, False])
def test_banded_mip_chain_gives_the_whole_level_bytes(shape, srgb):
    img = np.random.default_rng(sum(shape)).integers(0, 256, (*shape, 4), dtype=np.uint8)
    want = whole_levels(img, srgb)
    for band in (1, 3, 256):
        got = mip_chain(img, srgb, band)
        assert [g.shape for g in got] == [w.shape for w in want], (shape, band)
        for k, (g, w) in enumerate(zip(got, want, strict=True)):
            assert np.array_equal(g, w), (shape, srgb, band, k)
    assert want[-1].shape == (1, 1, 4)
