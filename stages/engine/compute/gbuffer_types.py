"""The G-buffer the compute renderer hands to its lighting pass (the interface of issue #30's
two halves; the planes are those of ``stages.engine.deferred``'s GL G-buffer, unpacked).

Sky pixels (depth 1) hold zeros in emission, albedo, metallic, normal and roughness and 1 in
shadow.

Layout: index ``v`` of the leading axis is ``view * N + k`` with ``view`` the position in
``stages.core.trajectory.VIEWS`` and ``k = t * S + s`` (temporal sample t, spatial sample s,
N = S x T): the atlas tile order of ``render_targets``. Rows run top to bottom (row 0 is the
top of the image, as in the resolved frames; GL's atlas rows are bottom-up), columns left to
right; each plane is at the sample resolution (the output resolution: samples differ by a
sub-pixel lens shift, not by size).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class GBuffer:
    """One frame's G-buffer for every (view, sample); all tensors on one device."""

    emission: torch.Tensor       # [V,H,W,3] float32, the material's emission, linear light
    albedo: torch.Tensor         # [V,H,W,3] float32, base colour, linear
    metallic: torch.Tensor       # [V,H,W] float32 in [0,1]
    normal: torch.Tensor         # [V,H,W,3] float32, world, unit, turned toward the camera
    roughness: torch.Tensor      # [V,H,W] float32 in [0.04,1]
    shadow: torch.Tensor         # [V,H,W] float32, the sun's shadow factor: 1 lit .. 0 shadowed
    depth: torch.Tensor          # [V,H,W] float32, GL window depth in [0,1]; 1 = sky/nothing
    inv_view_proj: torch.Tensor  # [V,4,4] float32, clip -> world (column vectors: p = M @ c)
    eye: torch.Tensor | None = None  # [V,3] float32, each camera's position (world); None:
    # derive it with ``camera_positions()``

    def camera_positions(self) -> torch.Tensor:
        """[V,3] each camera's position: ``eye``, or, without it, the point where the
        view-projection's x, y and w rows all vanish (a perspective camera's centre)."""
        if self.eye is not None:
            return self.eye
        vp = torch.linalg.inv(self.inv_view_proj.double())
        A = vp[:, [0, 1, 3], :3]
        b = -vp[:, [0, 1, 3], 3]
        return torch.linalg.solve(A, b).float()

    @property
    def covered(self) -> torch.Tensor:
        """[V,H,W] bool: where a surface was drawn (not the sky)."""
        return self.depth < 1.0

    def world_position(self) -> torch.Tensor:
        """[V,H,W,3] world positions rebuilt from depth, as the GL lighting pass does (pixel
        centres; rows top-down). Sky pixels get the far plane's point."""
        V, H, W = self.depth.shape
        dev = self.depth.device
        x = (torch.arange(W, device=dev, dtype=torch.float32) + 0.5) / W * 2 - 1
        y = 1 - (torch.arange(H, device=dev, dtype=torch.float32) + 0.5) / H * 2
        ndc = torch.stack(torch.broadcast_tensors(x[None, None, :], y[None, :, None],
                                                  self.depth * 2 - 1,
                                                  torch.ones_like(self.depth)), -1)
        w4 = torch.einsum("vij,vhwj->vhwi", self.inv_view_proj, ndc)
        return w4[..., :3] / w4[..., 3:4]
