"""The near-plane clip in one compaction (issue #30; written by the change's review): the
``_clip_near`` of today against the per-case one it replaced (96bbdd1, kept here verbatim as
``_old_clip_near``, the reference) on random triangles with every
mix of corners in front, behind and exactly on the plane: the same triangles, source indices
and barycentrics (as multisets: the order changed to source order), finite, and empty input."""

from __future__ import annotations

import torch

from stages.engine.compute.raster import _clip_near


def _old_clip_near(clip: torch.Tensor, src: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Clip [n,3,4] clip-space triangles against the near plane z = -w. Returns the clipped
    triangles [m,3,4], their source index [m] (into ``src``'s values) and each new corner's
    barycentrics in its source triangle [m,3,3]; winding is kept."""
    dev = clip.device
    d = clip[..., 2] + clip[..., 3]  # >= 0: in front of the near plane
    inside = d >= 0
    n_in = inside.sum(1)
    eye = torch.eye(3, device=dev, dtype=clip.dtype)
    outs_c, outs_s, outs_b = [], [], []
    keep = n_in == 3
    if keep.any():
        outs_c.append(clip[keep])
        outs_s.append(src[keep])
        outs_b.append(eye.expand(int(keep.sum()), 3, 3))
    ar = torch.arange(3, device=dev)
    for nin in (1, 2):
        sel = n_in == nin
        if not sel.any():
            continue
        c, s, ins, dd = clip[sel], src[sel], inside[sel], d[sel]
        # rotate the corners (keeping the winding) so that the odd one out comes first
        first = torch.argmax(ins.to(torch.int8), 1) if nin == 1 else torch.argmin(
            ins.to(torch.int8), 1)
        order = (first[:, None] + ar[None, :]) % 3
        c = torch.gather(c, 1, order[:, :, None].expand(-1, 3, 4))
        dd = torch.gather(dd, 1, order)
        b = eye[order]  # corner barycentrics in the source
        A, B, C = c[:, 0], c[:, 1], c[:, 2]
        bA, bB, bC = b[:, 0], b[:, 1], b[:, 2]
        dA, dB, dC = dd[:, 0:1], dd[:, 1:2], dd[:, 2:3]
        if nin == 1:  # A in front: (A, A->B, A->C)
            tb, tc = dA / (dA - dB), dA / (dA - dC)
            AB, AC = A + (B - A) * tb, A + (C - A) * tc
            outs_c.append(torch.stack([A, AB, AC], 1))
            outs_b.append(torch.stack([bA, bA + (bB - bA) * tb, bA + (bC - bA) * tc], 1))
            outs_s.append(s)
        else:  # A behind, B and C in front: quad B, C, C->A, B->A as two triangles
            tb, tc = dB / (dB - dA), dC / (dC - dA)
            BA, CA = B + (A - B) * tb, C + (A - C) * tc
            bBA, bCA = bB + (bA - bB) * tb, bC + (bA - bC) * tc
            outs_c += [torch.stack([B, C, CA], 1), torch.stack([B, CA, BA], 1)]
            outs_b += [torch.stack([bB, bC, bCA], 1), torch.stack([bB, bCA, bBA], 1)]
            outs_s += [s, s]
    if not outs_c:
        return (clip.new_zeros(0, 3, 4), src.new_zeros(0), clip.new_zeros(0, 3, 3))
    return torch.cat(outs_c), torch.cat(outs_s), torch.cat(outs_b)



def _rows(c: torch.Tensor, s: torch.Tensor, b: torch.Tensor) -> list[tuple]:
    flat = torch.cat([c.reshape(len(c), -1), b.reshape(len(b), -1),
                      s[:, None].to(c.dtype)], 1)
    return sorted(tuple(r) for r in flat.tolist())


def _random_clip(n: int, seed: int, dtype: torch.dtype) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    clip = torch.randn(n, 3, 4, generator=g, dtype=dtype) * 3
    clip[..., 3] = clip[..., 3].abs() + 0.1
    # a fifth of the corners exactly on the plane (z = -w), some triangles all on it
    on = torch.rand(n, 3, generator=g) < 0.2
    on[: n // 20] = True
    clip[..., 2] = torch.where(on, -clip[..., 3], clip[..., 2])
    return clip


def test_the_new_clip_makes_the_old_triangles():
    for seed, dtype in ((0, torch.float32), (1, torch.float64), (2, torch.float32)):
        clip = _random_clip(4000, seed, dtype)
        src = torch.arange(len(clip)) * 7 + 3
        new = _clip_near(clip, src)
        old = _old_clip_near(clip, src)
        assert all(bool(torch.isfinite(t).all()) for t in new)
        assert new[0].shape[0] == old[0].shape[0] > 0
        assert _rows(*new) == _rows(*old)  # bit-identical rows, up to order
        assert bool((new[1][1:] >= new[1][:-1]).all())  # source order


def test_the_new_clip_takes_no_triangles():
    c, s, b = _clip_near(torch.zeros(0, 3, 4), torch.zeros(0, dtype=torch.int64))
    assert c.shape == (0, 3, 4) and s.shape == (0,) and b.shape == (0, 3, 3)
