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
