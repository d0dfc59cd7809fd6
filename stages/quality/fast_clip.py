"""The open_clip ViT image tower rebuilt for fast inference, computing the same function.

Each ``ResidualAttentionBlock`` (``nn.MultiheadAttention`` + MLP) becomes a ``FastBlock``:
the same LayerNorms, the same weights, attention through ``F.scaled_dot_product_attention``
(flash attention on a GPU) and plain linear layers, which ``torch.compile`` fuses with the
LayerNorms and QuickGELUs between them. With ``fp8=True`` every linear layer of the
transformer (qkv, attention output, both MLP layers: ~96 % of ViT-L/14's FLOPs) runs in
float8 e4m3 on the tensor cores (2× the fp16 rate on Hopper):

- weights are scaled per output channel once, when the tower is rebuilt;
- activations are scaled per row (per token) on the fly, so a frame's numbers never depend
  on which other frames share its batch (batch composition varies with chunking and
  worker timing; the scores must not);
- products accumulate in fp32, come out in bf16; the residual stream is bf16, LayerNorm fp32.

The patch embedding, the class/position embeddings, ``ln_post`` and the projection are left
as they are (0.2 % of the FLOPs).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

FP8 = torch.float8_e4m3fn
FP8_MAX = float(torch.finfo(FP8).max)  # 448


class Fp8Linear(nn.Module):
    """``x @ W.T + b`` with W and x in float8 e4m3, per-channel / per-row scales, fp32
    accumulation, bf16 out."""

    w8: torch.Tensor
    w_scale: torch.Tensor
    bias: torch.Tensor | None

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None) -> None:
        super().__init__()
        w = weight.detach().float()
        scale = w.abs().amax(dim=1, keepdim=True).clamp(min=1e-12) / FP8_MAX
        self.register_buffer("w8", (w / scale).to(FP8))  # (out, in), row-major
        self.register_buffer("w_scale", scale.t().contiguous())  # (1, out)
        self.register_buffer("bias", None if bias is None
                             else bias.detach().to(torch.bfloat16))

    @classmethod
    def of(cls, lin: nn.Linear) -> Fp8Linear:
        return cls(lin.weight, lin.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lead, k = x.shape[:-1], x.shape[-1]
        x2 = x.reshape(-1, k).float()
        s = x2.abs().amax(dim=1, keepdim=True).clamp(min=1e-12) / FP8_MAX
        y = torch._scaled_mm((x2 / s).to(FP8), self.w8.t(), scale_a=s, scale_b=self.w_scale,
                             out_dtype=torch.bfloat16)
        if self.bias is not None:
            y = y + self.bias
        return y.reshape(*lead, -1)


class FastBlock(nn.Module):
    """An open_clip ``ResidualAttentionBlock`` (self-attention, batch-first) as
    ln_1 → qkv → SDPA → out → residual; ln_2 → fc → act → proj → residual."""

    def __init__(self, blk: Any, fp8: bool) -> None:
        super().__init__()
        attn = blk.attn
        if not isinstance(attn, nn.MultiheadAttention) or hasattr(blk, "ln_1_kv"):
            raise TypeError(f"FastBlock: expected a self-attention ResidualAttentionBlock, "
                            f"got {type(blk).__name__}")
        d = attn.embed_dim
        self.heads = attn.num_heads
        qkv = nn.Linear(d, 3 * d, bias=attn.in_proj_bias is not None)
        qkv.weight = attn.in_proj_weight
        if attn.in_proj_bias is not None:
            qkv.bias = attn.in_proj_bias
        lin = Fp8Linear.of if fp8 else (lambda m: m)
        self.ln_1, self.ls_1, self.ln_2, self.ls_2 = blk.ln_1, blk.ls_1, blk.ln_2, blk.ls_2
        self.qkv, self.out = lin(qkv), lin(attn.out_proj)
        self.fc, self.act, self.proj = lin(blk.mlp.c_fc), blk.mlp.gelu, lin(blk.mlp.c_proj)
        self.dtype = torch.bfloat16 if fp8 else attn.out_proj.weight.dtype

    def forward(self, x: torch.Tensor, attn_mask: torch.Tensor | None = None) -> torch.Tensor:
        if attn_mask is not None:
            raise ValueError("FastBlock: attention masks are not supported (image tower)")
        b, n, d = x.shape
        qkv = self.qkv(self.ln_1(x)).view(b, n, 3, self.heads, d // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, n, d)
        x = x + self.ls_1(self.out(a)).to(x.dtype)
        return x + self.ls_2(self.proj(self.act(self.fc(self.ln_2(x))))).to(x.dtype)


def accelerate_tower(visual: Any, fp8: bool = False) -> Any:
    """Replace, in place, the blocks of an open_clip ``VisionTransformer`` by ``FastBlock``s.
    ``fp8``: float8 linear layers; the tower must be in bf16 as open_clip makes it with
    ``precision="bf16"`` (weights bf16, LayerNorms fp32). Returns ``visual``."""
    tr = visual.transformer
    if not getattr(tr, "batch_first", False):
        raise TypeError("accelerate_tower: expected a batch-first open_clip transformer")
    if fp8 and visual.conv1.weight.dtype != torch.bfloat16:
        raise TypeError(f"accelerate_tower(fp8=True): expected a bf16 tower (open_clip "
                        f"precision='bf16'), got {visual.conv1.weight.dtype}")
    tr.resblocks = nn.ModuleList(FastBlock(b, fp8) for b in tr.resblocks)
    return visual


def fp8_supported(device: str) -> str | None:
    """None when float8 matmuls run on ``device``; otherwise why not."""
    if not hasattr(torch, "_scaled_mm"):
        return f"torch {torch.__version__} has no float8 matmul"
    if str(device).startswith("cuda"):
        cap = torch.cuda.get_device_capability(torch.device(device))
        if cap < (8, 9):
            return (f"{torch.cuda.get_device_name(torch.device(device))} (compute capability "
                    f"{cap[0]}.{cap[1]}) has no float8 tensor cores (needs 8.9+: Ada, Hopper)")
    return None
