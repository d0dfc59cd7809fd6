"""The GL-free half of Stage II's render targets (:class:`SceneTargets`): the settings checked,
the scene root, every (view, temporal, spatial) sample's camera and each view's mask camera
(Panda3D nodes and lenses), the atlas's tile layout, the mask's size, and the frame protocol of
a renderer that draws at submit. The compute backend (``compute.targets.ComputeTargets``)
builds on it and opens no GL context; ``render_targets.RenderTargets`` adds the GL context,
buffers and passes.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

import numpy as np

from ..core.trajectory import VIEWS
from .look import Look

MASK_BIT = 30
# first-person cameras see the level but never the character's own body (§6.3): their colour
# cameras use bits FP_BIT_BASE + t (no character copy is shown on them) and their mask camera
# FP_MASK_BIT (nothing is shown on it), so the first-person mask is empty
FP_BIT_BASE = 16
FP_MASK_BIT = 29
LEVEL_HIDE = 29  # level geometry is hidden from mask cameras


class SceneTargets:
    """The GL-free half of a renderer's targets: the settings checked, the scene root, every
    (view, temporal, spatial) sample's camera and each view's mask camera (Panda3D nodes with
    their lenses), the atlas's tile layout and the mask's size. The compute backend
    (``compute.targets.ComputeTargets``) is one of these and opens no GL context at all;
    :class:`RenderTargets` adds the GL context, buffers and passes."""

    def __init__(self, width: int, height: int, spatial: int = 1, temporal: int = 1,
                 display: str = "p3headlessgl", mask_scale: int = 2, near: float = 0.05,
                 far: float = 4000.0, *, look: Look):
        from panda3d.core import loadPrcFileData

        # texture loading (no power-of-two rescale, no size cap, no compression, no model
        # cache) is the same for every backend; the display lines matter only to GL
        loadPrcFileData("wmforge-render", f"""
            window-type none
            load-display {display}
            audio-library-name null
            model-cache-dir
            textures-power-2 none
            max-texture-dimension -1
            compressed-textures 0
            notify-level-display error
            notify-level-glgsg error
            sync-video 0
        """)
        from .models import fixed_draw_order

        fixed_draw_order()
        from panda3d.core import NodePath

        self.W, self.H, self.S, self.T = width, height, spatial, temporal
        self.N = spatial * temporal
        if self.N > 64:
            raise ValueError(f"render: spatial x temporal = {self.N} samples; at most 64")
        if temporal > FP_MASK_BIT - FP_BIT_BASE:
            raise ValueError(f"render.temporal_samples is {temporal}; at most "
                             f"{FP_MASK_BIT - FP_BIT_BASE} (one camera bit per sample)")
        self.near, self.far = near, far
        self.look = look
        if self.look.shadow_pcf_taps not in (1, 2, 4, 8):
            raise ValueError(f"render.shadow_pcf_taps is {self.look.shadow_pcf_taps}; "
                             "expected 1, 2, 4 or 8")
        if self.look.shading not in ("auto", "deferred", "forward"):
            raise ValueError(f"render.shading is {self.look.shading!r}; expected "
                             "auto|deferred|forward")
        if self.look.tone_map not in ("aces", "none"):
            raise ValueError(f"render.tone_map is {self.look.tone_map!r}; expected aces|none")
        self.scene = NodePath("scene")
        self.tiles_per_row = max(1, min(self.N * len(VIEWS), 16384 // width))
        ntiles = self.N * len(VIEWS)
        rows = math.ceil(ntiles / self.tiles_per_row)
        self.atlas_size = (self.tiles_per_row * width, rows * height)
        if self.atlas_size[1] > 16384:
            raise ValueError(f"render: {ntiles} tiles of {width}x{height} exceed a 16384 px "
                             "atlas; use fewer samples or a smaller preset")
        mw, mh = max(1, width // mask_scale), max(1, height // mask_scale)
        self.mask_scale = mask_scale
        self.mask_size = (mw, mh)
        # no GL here: the GL side's handles stay None (RenderTargets sets them)
        self.engine: Any = None
        self.pipe: Any = None
        self.host: Any = None
        self.gsg: Any = None
        self.atlas: Any = None
        self.software = False
        self.deferred = False
        self.shading = "forward"
        self.lighting: Any = None
        self.meter_on = False
        self.yuv = False
        self.with_preview = False
        self.yuv_pass: Any = None
        self.pbo: Any = None
        self._done: deque[tuple[dict[str, Any], dict[str, np.ndarray]]] = deque()
        self._make_cameras()

    def _lens(self) -> Any:
        from panda3d.core import PerspectiveLens

        lens = PerspectiveLens()
        lens.setFilmSize(self.W, self.H)
        lens.setNearFar(self.near, self.far)
        return lens

    def _make_cameras(self) -> None:
        """Every sample's colour camera (``cams``, its atlas tile in ``tile_origin``) and each
        view's mask camera (``mask_cams``, drawing only the flat white mask copy)."""
        from panda3d.core import (
            BitMask32,
            Camera,
            ColorAttrib,
            LightAttrib,
            MaterialAttrib,
            RenderState,
            ShaderAttrib,
            TextureAttrib,
        )

        self.cams: dict[tuple[str, int, int], Any] = {}
        self.tile_origin: dict[tuple[str, int], tuple[int, int]] = {}
        for v, view in enumerate(VIEWS):
            for t in range(self.T):
                for s in range(self.S):
                    k = t * self.S + s
                    tile = v * self.N + k
                    col, row = tile % self.tiles_per_row, tile // self.tiles_per_row
                    self.tile_origin[(view, k)] = (col * self.W, row * self.H)
                    cam = Camera(f"{view}_{t}_{s}", self._lens())
                    cam.setCameraMask(BitMask32.bit(FP_BIT_BASE + t if view == "fp" else t))
                    self.cams[(view, t, s)] = self.scene.attachNewNode(cam)
        state = RenderState.make(ColorAttrib.makeFlat((1, 1, 1, 1)), TextureAttrib.makeAllOff(),
                                 LightAttrib.makeAllOff(), MaterialAttrib.makeOff(),
                                 ShaderAttrib.makeOff(), 100)
        self.mask_cams: dict[str, Any] = {}
        for view in VIEWS:
            cam = Camera(f"mask_{view}", self._lens())
            cam.setCameraMask(BitMask32.bit(FP_MASK_BIT if view == "fp" else MASK_BIT))
            cam.setInitialState(state)
            self.mask_cams[view] = self.scene.attachNewNode(cam)

    # ------------------------------------------------------------------ the frame protocol

    def set_exposure(self, multiplier: float) -> None:
        """The linear exposure multiplier the resolve applies before the tone map."""
        raise NotImplementedError

    def set_meter(self, on: bool) -> None:
        """Meter mode: each pixel's log2 luminance codes instead of the tone-mapped colour."""
        raise NotImplementedError

    def draw(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """Draw one frame with the cameras as placed: colour and mask per view."""
        raise NotImplementedError

    @property
    def lag(self) -> int:
        """Frames :meth:`collect` may trail :meth:`submit` by (0: drawn at submit)."""
        return 0

    @property
    def in_flight(self) -> int:
        """Frames submitted and not collected yet."""
        return len(self._done)

    def submit(self) -> None:
        """Draw one frame with the cameras as placed; its images come from :meth:`collect`,
        in submission order."""
        self._done.append(self.draw())

    def collect(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """The oldest submitted frame's colour and mask per view."""
        if not self._done:
            raise RuntimeError("render: collect() with no frame submitted")
        return self._done.popleft()

    def discard(self) -> None:
        """Forget every submitted frame not collected (after an error mid-clip)."""
        self._done.clear()

    def warmup(self, frames: int) -> None:
        """Frames drawn before the first kept one (GL: shaders and textures made resident);
        nothing to draw without GL."""
        del frames

    def close(self) -> None:
        """Let go of what the targets hold (GL: its windows and buffers)."""
