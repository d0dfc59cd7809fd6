"""The rebuilt image tower (stages/quality/fast_clip.py) computes open_clip's function."""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("open_clip")

from open_clip.model import convert_weights_to_lp  # noqa: E402
from open_clip.transformer import LayerNormFp32, QuickGELU, VisionTransformer  # noqa: E402

from stages.quality.fast_clip import Fp8Linear, accelerate_tower  # noqa: E402


def _tiny_tower() -> VisionTransformer:
    """ViT-L/14's structure (QuickGELU, fp32 LayerNorms, batch-first) at toy width."""
    torch.manual_seed(0)
    v = VisionTransformer(image_size=56, patch_size=14, width=64, layers=3, heads=4,
                          mlp_ratio=4.0, output_dim=32, act_layer=QuickGELU,
                          norm_layer=LayerNormFp32).eval()
    for p in v.parameters():
        p.data.normal_(0, 0.05)
    return v


def test_fast_blocks_compute_the_open_clip_tower_and_fp8_stays_close():
    ref = _tiny_tower()
    x = torch.randn(5, 3, 56, 56, generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        want = ref(x)
        fast = accelerate_tower(copy.deepcopy(ref))
        assert all(type(b).__name__ == "FastBlock" for b in fast.transformer.resblocks)
        # same weights, same function: SDPA + plain linears instead of nn.MultiheadAttention
        assert torch.allclose(fast(x), want, atol=1e-5)

        low = copy.deepcopy(ref)
        convert_weights_to_lp(low, torch.bfloat16)
        with pytest.raises(TypeError, match="bf16"):
            accelerate_tower(copy.deepcopy(ref), fp8=True)
        f8 = accelerate_tower(low, fp8=True)
        linears = [m for m in f8.modules() if isinstance(m, Fp8Linear)]
        assert len(linears) == 4 * 3  # qkv, out, fc, proj in each of the 3 blocks
        got = f8(x.bfloat16()).float()
        cos = torch.nn.functional.cosine_similarity(got, want)
        assert cos.min() > 0.999, cos
        # per-row activation scales: a frame's embedding is the same alone or in a batch
        alone = torch.cat([f8(x[i:i + 1].bfloat16()).float() for i in range(len(x))])
        assert torch.equal(alone, got)


def test_fp8_linear_matches_the_float_product():
    torch.manual_seed(2)
    lin = torch.nn.Linear(64, 48)
    x = torch.randn(7, 3, 64)
    with torch.inference_mode():
        want = lin(x)
        got = Fp8Linear.of(lin)(x).float()
    assert got.shape == want.shape
    # e4m3 keeps 3 mantissa bits: ~6 % per element, averaging out over 64 products
    rel = (got - want).norm() / want.norm()
    assert rel < 0.05, rel


@pytest.mark.parametrize("h,w", [(540, 960), (90, 160), (300, 224)])
def test_resize_matrices_are_the_antialiased_bicubic_resize_and_centre_crop(h, w):
    """The GPU preprocessing's resize-and-crop as two matrix products equals F.interpolate
    (antialiased bicubic, shortest side 224) followed by the centre crop, down- and
    upscaling, and stays close to open_clip's PIL preprocessing."""
    import numpy as np
    import torch.nn.functional as F
    from PIL import Image

    from stages.quality.scorers import resize_matrix

    s = 224 / min(h, w)
    oh, ow = max(224, round(h * s)), max(224, round(w * s))
    top, left = (oh - 224) // 2, (ow - 224) // 2
    rng = np.random.default_rng(h)
    img = rng.integers(0, 256, (h // 8 + 1, w // 8 + 1, 3), dtype=np.uint8)
    img = np.asarray(Image.fromarray(img).resize((w, h), Image.BILINEAR))
    x = torch.from_numpy(img).permute(2, 0, 1).double()[None]
    want = F.interpolate(x, size=(oh, ow), mode="bicubic", antialias=True,
                         align_corners=False)[..., top:top + 224, left:left + 224]
    rows, cols = resize_matrix(h, oh, top).double(), resize_matrix(w, ow, left).double()
    assert rows.shape == (224, h) and cols.shape == (224, w)
    got = rows @ x @ cols.t()
    assert torch.allclose(got, want, atol=1e-9)
    pil = Image.fromarray(img).resize((ow, oh), Image.BICUBIC)
    pil = np.asarray(pil)[top:top + 224, left:left + 224].astype(float)
    diff = np.abs(got[0].permute(1, 2, 0).clamp(0, 255).numpy() - pil)
    assert diff.mean() < 1.0, diff.mean()  # grey levels: PIL rounds to integers
