"""The leaders' material and lighting as one Triton kernel (issue #30): the GPU path of
``merged.MergedShading._leaders`` (``gbuffer.material``, ``shade.stored_planes``,
``shade.shade_points``, ``shade.quantize_r11g11b10``), one lane per leader, everything in
registers, each radiance written straight to its sample's slot.

Why: under ``torch.compile`` that graph was 40 % of a 720p x 8 frame's device time (9 ms for
~4.1M surface leaders on an H100): Inductor splits it into many kernels that pass their intermediate
planes through memory, and the chunks are padded to one shape. This kernel reads each
leader's inputs once (corners, material, 32 texels, the PCF taps) and writes 12 bytes.

The arithmetic is the torch path's, float32 (the texture derivatives float64, as there), in
its order, with IEEE division and square root and NaN-keeping clamps: under Triton's
interpreter the stored bytes equal the torch path's, but for the CPU reference's own
processor-dependent steps (the tests allow one leader in 5,000 a step off). On a GPU, fused
multiply-adds and ``exp2``/``log2`` for ``pow`` may move a stored value by one step of its
R11G11B10 code (the ``gpu`` test bounds it). The same inputs give the same bytes: no atomics.
On a CPU the kernel runs only under Triton's interpreter (the tests, at small sizes); the
torch path is the CPU renderer.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..pbr import MAX_LIGHTS
from ..render_settings import leaders_mode, leaders_value
from . import raster_triton
from .cameras import Cameras, Sun
from .compiled import _is_compile_failure
from .gbuffer import PCF_TAPS
from .lighting import Lighting
from .upload import upload

log = logging.getLogger(__name__)

KERNEL_LIGHTS = 4  # leaders_kernel unrolls this many lights (pbr.MAX_LIGHTS when written)
BLOCK = 128
INTERPRET_BLOCK = 4096  # the interpreter's cost is per program: wide programs
# whether render.compute_leaders auto takes the kernel where it can run. Its `gpu` test passed
# on a lent H100 (2026-12-07: both sample levels identical to the CPU torch path but for
# one-step channels). With warm compile caches, 8 renderers under MPS on one lent H100 host
# (2026-12-08) ran 11.02 frames/s each with it against 9.03 with the graph (+22 %), 168.7
# five-view minutes per GPU-hour steady; its cold compile is longer (about 100 s for
# Downtown against 45 s), once a node and level behind the first-compile gate, whose holder
# reports named the compiling leader each time (docs/compute-renderer.md, "The figure set on
# one H100 host")
AUTO_TAKES_KERNEL = True
_modules: dict[bool, Any] = {}


def available(device: torch.device) -> bool:
    """Whether the kernel can run on ``device`` (CUDA with Triton importable)."""
    return MAX_LIGHTS == KERNEL_LIGHTS and raster_triton.available(device)


def setting(value: str) -> str:
    """``render.compute_leaders`` checked and normalised (a bad value: ValueError naming the
    key); a leftover ``WMFORGE_COMPUTE_LEADERS`` (the switch before the key) is warned about."""
    value = leaders_value(value)
    if os.environ.get("WMFORGE_COMPUTE_LEADERS"):
        log.warning("compute: WMFORGE_COMPUTE_LEADERS=%s is no longer read; the leaders' path "
                    "is the config key render.compute_leaders (here %s)",
                    os.environ["WMFORGE_COMPUTE_LEADERS"], value)
    return value


def choose(device: torch.device, setting: str = "auto") -> str | None:
    """The leaders' path on ``device`` as ``render.compute_leaders`` (``setting``) says:
    "triton" or "triton:<registers>" (the kernel), or None (the compiled torch graph). auto
    takes the kernel wherever it can run once ``AUTO_TAKES_KERNEL`` is set, else the graph;
    triton where the kernel cannot run is an error naming the setting, so a render never
    carries a key that names a path it did not take."""
    mode, regs = leaders_mode(setting)
    if mode == "torch" or (mode == "auto" and not AUTO_TAKES_KERNEL):
        return None
    if not available(device):
        if mode == "triton":
            raise RuntimeError(f"render.compute_leaders={setting}: the leaders' Triton kernel "
                               f"cannot run on {device} (it needs a CUDA device and Triton "
                               f"with {KERNEL_LIGHTS} lights); use auto or torch")
        return None
    return "triton" if regs is None else f"triton:{regs}"


def _module(interpret: bool) -> Any:
    """``leaders_kernel`` compiled, or a second copy of it run by Triton's interpreter."""
    if interpret not in _modules:
        if not interpret:
            _modules[False] = importlib.import_module(f"{__package__}.leaders_kernel")
        else:  # the helpers' interpreted copy, then the kernel's, handed the helpers
            lib = _interpreted("leaders_kernel_lib")
            _modules[True] = _interpreted("leaders_kernel", _LIB=lib)
    return _modules[interpret]


def _interpreted(name: str, **extra: Any) -> Any:
    """A second copy of module ``name`` (of this package) with ``_INTERPRET`` set (and
    ``extra``) before it runs: its functions run under Triton's interpreter."""
    path = Path(__file__).with_name(f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"{__package__}.{name}_interpreted", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    for k, v in {"_INTERPRET": True, **extra}.items():
        setattr(mod, k, v)
    spec.loader.exec_module(mod)
    return mod


@contextlib.contextmanager
def _torch_libm() -> Iterator[None]:
    """Triton's interpreter with torch's ``exp2``/``log2`` in place of NumPy's. The two
    libraries round differently in the last bit (6 % of float32 ``exp2`` results on this
    project's AMD EPYC build machine, differently on other CPUs), and the torch path is the
    reference the interpreted kernel must equal: the comparison is then of the kernel's
    arithmetic, not of two maths libraries. On a GPU, ``ex2.approx`` differs anyway (the
    ``gpu`` test bounds it)."""
    from triton.runtime.interpreter import InterpreterBuilder

    for name in ("create_exp2", "create_log2", "unary_op"):  # Triton's private API: loudly
        if not hasattr(InterpreterBuilder, name):
            raise RuntimeError(f"Triton's interpreter has no {name}: leaders_triton."
                               "_torch_libm needs updating for this Triton")

    def lib(fn: Any) -> Any:
        return lambda self, arg: self.unary_op(
            arg, lambda a: fn(torch.from_numpy(np.array(a, copy=True))).numpy())

    saved = InterpreterBuilder.create_exp2, InterpreterBuilder.create_log2
    InterpreterBuilder.create_exp2 = lib(torch.exp2)
    InterpreterBuilder.create_log2 = lib(torch.log2)
    try:
        yield
    finally:
        InterpreterBuilder.create_exp2, InterpreterBuilder.create_log2 = saved


def light_bits(lt: Lighting) -> int:
    """``Lighting.light_flags`` as the kernel's FLAGS: 4 bits a light (lit, positional,
    ranged, spot), the same tests ``shade.shade_points`` branches on."""
    bits = 0
    for i, (on, positional, rng, cut) in enumerate(lt.light_flags[:MAX_LIGHTS]):
        nib = int(bool(on)) | int(bool(positional)) << 1 | int(rng > 0.0) << 2 \
            | int(cut > 0.001) << 3
        bits |= (nib if on else 0) << (4 * i)
    return bits


class LeaderKernel:
    """Shades leader samples into a radiance buffer; built once per scene (its tables)."""

    def __init__(self, geo: Any, lut: torch.Tensor, interpret: bool = False,
                 maxnreg: int | None = None, strict: str | None = None):
        # maxnreg: ptxas's register cap (render.compute_leaders triton:<n>); strict: the
        # setting that asked for the kernel (triton, triton:<n>): a compile failure then
        # raises, naming it, instead of falling back to the torch graph (auto)
        if MAX_LIGHTS != KERNEL_LIGHTS:
            raise ValueError(f"leaders kernel: written for {KERNEL_LIGHTS} lights, "
                             f"pbr.MAX_LIGHTS is {MAX_LIGHTS}")
        self.geo, self.lut, self.interpret = geo, lut, interpret
        dev = lut.device
        tt = geo.textures
        self.has_tex = tt.levels.numel() > 0
        i32, i64 = torch.int32, torch.int64
        if self.has_tex:
            self.texels = tt.texels.contiguous().view(i32).view(-1)
            self.offset = tt.offset.to(i64).contiguous()
            self.size = tt.size.to(i64).contiguous()
            self.levels = tt.levels.to(i64).contiguous()
            self.srgb = tt.srgb.to(i32).contiguous()
            self.wrap = tt.wrap.to(i64).contiguous()
            self.L = int(tt.offset.shape[1])
        else:  # no textures: the kernel never reads these
            z = torch.zeros(1, dtype=i64, device=dev)
            self.texels, self.offset, self.size, self.levels = z.int(), z, z, z
            self.srgb, self.wrap, self.L = z.int(), z, 1
        self.all_repeat = bool(tt.all_repeat)
        m = geo.materials
        self.mats = (m.base_color.float().contiguous(), m.metallic.float().contiguous(),
                     m.roughness.float().contiguous(), m.emission.float().contiguous(),
                     m.tex.to(i64).contiguous())
        self.taps = torch.tensor(PCF_TAPS, dtype=torch.float32, device=dev).contiguous()
        self.failed: str | None = None  # the compile error, once one happened
        self.maxnreg = None if interpret else maxnreg
        self.strict = strict
        self._edges: tuple[tuple[float, ...], torch.Tensor] | None = None

    def __call__(self, out: torch.Tensor, flat: torch.Tensor, tri: torch.Tensor,
                 bary: torch.Tensor, depth: torch.Tensor, H: int, W: int, fr: Any,
                 cams: Cameras, inv: torch.Tensor, sun: Sun | None, smap: torch.Tensor | None,
                 lt: Lighting) -> bool:
        """Write the R11G11B10 radiance of leaders ``flat`` (GL rows) that see triangles
        ``tri`` at ``bary`` into ``out`` [V*N*H*W, 3]. False (nothing written) once the
        kernel failed to compile here: the caller then takes the torch path."""
        n = len(flat)
        if n == 0:
            return True
        if self.failed is not None:
            return False
        dev = out.device
        lt = lt.to(dev)
        f32 = torch.float32
        if sun is not None and smap is not None:
            sun_vp, smap_, size, ntaps, has_sun = (sun.view_proj.to(f32).contiguous(),
                                                   smap.to(f32).contiguous(), int(sun.size),
                                                   int(sun.pcf_taps), True)
        else:
            sun_vp, smap_, size, ntaps, has_sun = self.taps, self.taps, 1, 1, False
        if ntaps not in (1, 2, 4, 8):  # the kernel reads taps[0 .. ntaps - 1]
            raise ValueError(f"leaders kernel: {ntaps} PCF taps; expected 1, 2, 4 or 8")
        sky = torch.cat([lt.sky_zenith, lt.sky_horizon, lt.sky_ground]).to(f32).contiguous()
        # each spot's smoothstep edge and width as shade._smoothstep takes them (float64
        # from the flags, then float32)
        cuts = tuple(float(f[3]) for f in lt.light_flags[:MAX_LIGHTS])
        if self._edges is None or self._edges[0] != cuts:  # uploaded when the spots change
            edge = [[0.0, 1.0] for _ in range(MAX_LIGHTS)]
            for i, cut in enumerate(cuts):
                edge[i] = [cut - 0.02, (cut + 0.02) - (cut - 0.02)]
            self._edges = (cuts, upload(edge, dev, f32))
        l_edge = self._edges[1]
        block = INTERPRET_BLOCK if self.interpret else BLOCK
        args = (out, flat.contiguous(), tri.contiguous(), bary.to(f32).contiguous(),
                depth.to(f32).contiguous(), n, int(H), int(W),
                fr.pos.contiguous(), fr.nrm.contiguous(), fr.tan.contiguous(),
                fr.uv.contiguous(), fr.col.contiguous(), fr.mat.contiguous(),
                *self.mats, self.texels, self.lut, self.offset, self.size, self.levels,
                self.srgb, self.wrap, self.L,
                cams.view_proj.to(f32).contiguous(), inv.to(f32).contiguous(),
                cams.eye.to(f32).contiguous(), sun_vp, smap_, self.taps, size, 2.5 / size,
                lt.light_vec.contiguous(), lt.light_color.contiguous(),
                lt.light_att.contiguous(), lt.light_spot.contiguous(),
                lt.light_range.contiguous(), l_edge, sky, lt.sun_dir_world.contiguous(),
                lt.sun_radiance.contiguous(), lt.sh_coeffs.contiguous(),
                float(lt.ibl_strength), float(lt.sky_strength))
        consts = dict(NTAPS=ntaps, FLAGS=light_bits(lt), SHADOW_LIGHT=int(lt.shadow_light),
                      HAS_SUN=has_sun, HAS_TEX=self.has_tex, ALL_REPEAT=self.all_repeat,
                      BLOCK=block)
        if self.maxnreg is not None:
            consts["maxnreg"] = self.maxnreg
        grid = ((n + block - 1) // block,)
        try:
            with _torch_libm() if self.interpret else contextlib.nullcontext():
                _module(self.interpret).leaders[grid](*args, **consts)
        except Exception as e:  # noqa: BLE001 - sorted: only compile failures fall back
            if not _is_compile_failure(e):
                raise
            self.failed = f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"
            if self.strict:
                raise RuntimeError(f"render.compute_leaders={self.strict}: the leaders' Triton "
                                   f"kernel failed to compile ({self.failed}); use auto or "
                                   "torch") from e
            log.warning("compute: the leaders' Triton kernel failed to compile (%s); the "
                        "torch path shades them from now on", self.failed)
            return False
        return True


__all__ = ["BLOCK", "LeaderKernel", "available", "choose", "light_bits", "setting"]
