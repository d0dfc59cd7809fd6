"""The typed settings of one Stage II render (DESIGN §4): what every Stage II engine reads, and
the part of a render's key and ``meta.json`` that says how it was made.

``RenderSettings`` is built once from the config (``stages.cluster.keys.render_settings``),
travels in ``instance.json`` as :meth:`RenderSettings.as_dict` (the same bytes as the untyped
dict it replaces: same keys, same order, same values) and is read back with
:meth:`RenderSettings.from_dict`, which names any missing or unknown key.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

BACKENDS = ("gl", "compute", "auto")  # render.backend's values
COMPUTE_SHADING = ("pixel", "sample")  # render.compute_shading's values
YUV = ("auto", "device", "encoder")  # render.yuv's values
LEADERS_EXPECTED = "auto, triton, torch or triton:<registers a lane, 64 to 255>"


def leaders_mode(raw: str, where: str = "render.compute_leaders") -> tuple[str, int | None]:
    """``render.compute_leaders`` parsed: how the compute backend shades its surface leaders
    on a GPU (engine.compute.leaders_triton): auto (the Triton kernel where it can run, else
    the compiled torch graph), triton (the kernel, or an error where it cannot run or
    compile), torch (the graph), or triton:<registers> (the kernel with ptxas held to that
    many registers a lane: fewer registers, more warps per SM, some spilled to local memory;
    a tuning knob for measurements). A bad value is a ValueError naming ``where``."""
    mode, sep, regs = str(raw).partition(":")
    if mode in ("auto", "triton", "torch") and not sep:
        return mode, None
    if mode == "triton" and regs.isdigit() and 64 <= int(regs) <= 255:
        return mode, int(regs)
    raise ValueError(f"{where} is {raw!r}; expected {LEADERS_EXPECTED}")


def leaders_value(raw: str, where: str = "render.compute_leaders") -> str:
    """``raw`` checked and normalised (``triton:0168`` is ``triton:168``)."""
    mode, regs = leaders_mode(raw, where)
    return mode if regs is None else f"{mode}:{regs}"
# render.limits' defaults (stages.config.RenderLimitsConfig takes them from here, where its
# comments say why these numbers): settings at these values leave as_dict, and so render keys,
# as they were before the limits existed
MAX_TRIANGLES = 5_000_000
MAX_TEXTURE_PX = 8192
LIMITS = {"max_triangles": MAX_TRIANGLES, "max_texture_px": MAX_TEXTURE_PX}


class RenderSettingsError(ValueError):
    """An ``instance.json`` ``settings`` object that is not a RenderSettings."""


@dataclass(frozen=True)
class RenderSettings:
    """One render's settings; the defaults live in ``stages.config.RenderConfig`` only."""

    width: int  # output frame width, px
    height: int  # output frame height, px
    spatial_samples: int  # sub-pixel jittered samples per output pixel
    temporal_samples: int  # sub-frame samples per output frame
    shutter: float  # fraction of a frame the temporal samples span
    warmup_frames: int  # frames rendered and discarded before the first kept one
    x264_preset: str
    crf: int
    encoder_threads: int
    x264_mbtree: bool
    gop: int  # keyframe interval, frames
    preview: bool  # write the tiled five-view preview.mp4
    preview_x264_preset: str
    preview_encoder_threads: int
    mask_scale: int  # the character mask's downscale for the alignment gate
    align_radius_px: float
    align_min: float  # the aligned fraction below which a render fails as misaligned
    shadow_map_size: int
    shadow_extent_m: float
    meter_frames: int
    shadow_pcf_taps: int
    exposure_key: float
    tone_map: str
    ibl_strength: float
    shading: str  # "auto", "forward" or "deferred"
    # ground-truth layers (stages.media.layers.LAYERS) in canonical order; () = off. The one
    # field with a default here: off leaves as_dict (and so render keys) as it was before
    # the layers existed, and instance.json files without the key read back as off
    ground_truth: tuple[str, ...] = ()
    # the Stage II renderer: "gl" or "compute" (a node resolves render.backend auto per slot
    # before it keys a render: compute.backend.node_backend); "auto" only where a renderer
    # was started with it by hand (meta.json's ``backend`` records the one used). Like
    # ground_truth: gl leaves as_dict, and so render keys, as
    # they were before the compute renderer existed
    backend: str = "gl"
    # render.limits: a level with more triangles fails as scene_over_limit; a texture with a
    # longer side is halved at load until it fits (stages.engine.scene_limits). Like backend:
    # at the defaults they are left out of as_dict
    max_triangles: int = MAX_TRIANGLES
    max_texture_px: int = MAX_TEXTURE_PX
    # the compute backend's shading rate, "pixel" or "sample" (stages/engine/compute/merged.py).
    # Like backend: left out of as_dict at its default and wherever the backend is gl (which
    # ignores it)
    compute_shading: str = "pixel"
    # where each view's RGB becomes the encoders' yuv420p: "device" (the renderer's GPU: a GL
    # pass, gl_yuv, or compute/yuv.py), "encoder" (swscale in the encoding thread) or "auto"
    # (device on a GPU, encoder on a software rasterizer or the CPU). The two differ by up to
    # 1 code, so it is part of the render key; meta.json's ``yuv`` records the one used. Left
    # out of as_dict at auto
    yuv: str = "auto"
    # how the compute backend shades its surface leaders on a GPU: auto, triton, torch or
    # triton:<registers> (leaders_mode). The kernel and the torch graph may differ by a step
    # of a stored code on a GPU, so it is part of the render key; meta.json's compute_leaders
    # records the path that ran. Left out of as_dict at auto and wherever the backend is gl
    compute_leaders: str = "auto"

    def as_dict(self) -> dict[str, Any]:
        """The ``instance.json`` / ``meta.json`` form (field order = the historical key order;
        ``ground_truth`` only when on, ``backend`` only when not gl, each limit only when not
        its default, ``compute_shading`` only when not pixel on a backend other than gl,
        ``yuv`` only when not auto, ``compute_leaders`` only when not auto on a backend other
        than gl)."""
        d: dict[str, Any] = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        if d["ground_truth"]:
            d["ground_truth"] = list(d["ground_truth"])
        else:
            del d["ground_truth"]
        if d["compute_shading"] == "pixel" or d["backend"] == "gl":
            del d["compute_shading"]
        if d["compute_leaders"] == "auto" or d["backend"] == "gl":
            del d["compute_leaders"]
        if d["backend"] == "gl":
            del d["backend"]
        if d["yuv"] == "auto":
            del d["yuv"]
        for k, default in LIMITS.items():
            if d[k] == default:
                del d[k]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any] | RenderSettings,
                  where: str = "settings") -> RenderSettings:
        if isinstance(d, RenderSettings):
            return d
        if not isinstance(d, dict):
            raise RenderSettingsError(f"{where}: expected an object of render settings, "
                                      f"got {type(d).__name__}")
        names = [f.name for f in dataclasses.fields(cls)]
        optional = {"ground_truth", "backend", "compute_shading", "yuv", "compute_leaders",
                    *LIMITS}
        missing = [n for n in names if n not in d and n not in optional]
        unknown = sorted(set(d) - set(names))
        if missing or unknown:
            raise RenderSettingsError(
                f"{where}: " + "; ".join(
                    ([f"missing key(s) {', '.join(missing)}"] if missing else [])
                    + ([f"unknown key(s) {', '.join(unknown)}"] if unknown else []))
                + " (written by another wmforge version? re-run the render stage)")
        kw = {n: d[n] for n in names if n in d}
        if "ground_truth" in kw:
            from ..media.layers import validate_layers

            try:
                kw["ground_truth"] = validate_layers(kw["ground_truth"], f"{where}: ground_truth")
            except ValueError as exc:
                raise RenderSettingsError(str(exc)) from None
        if kw.get("backend", "gl") not in BACKENDS:
            raise RenderSettingsError(f"{where}: backend {kw['backend']!r}; expected one of "
                                      f"{', '.join(BACKENDS)}")
        if kw.get("compute_shading", "pixel") not in COMPUTE_SHADING:
            raise RenderSettingsError(f"{where}: compute_shading {kw['compute_shading']!r}; "
                                      f"expected one of {', '.join(COMPUTE_SHADING)}")
        try:
            if "compute_leaders" in kw:
                kw["compute_leaders"] = leaders_value(kw["compute_leaders"],
                                                      f"{where}: compute_leaders")
        except ValueError as exc:
            raise RenderSettingsError(str(exc)) from None
        if kw.get("yuv", "auto") not in YUV:
            raise RenderSettingsError(f"{where}: yuv {kw['yuv']!r}; expected one of "
                                      f"{', '.join(YUV)}")
        for k in LIMITS:
            v = kw.get(k, LIMITS[k])
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise RenderSettingsError(f"{where}: {k} {v!r}; expected a whole number >= 1 "
                                          f"(render.limits.{k})")
        return cls(**kw)

    def replace(self, **changes: Any) -> RenderSettings:
        return dataclasses.replace(self, **changes)

    def encode(self) -> Any:
        """The per-view video encoder settings."""
        from ..media.video import EncodeSettings

        return EncodeSettings(preset=self.x264_preset, crf=self.crf, gop=self.gop,
                              threads=self.encoder_threads, mbtree=bool(self.x264_mbtree))

    def preview_encode(self) -> Any:
        """The tiled preview's encoder settings (its own preset and threads)."""
        return dataclasses.replace(self.encode(), preset=self.preview_x264_preset,
                                   threads=self.preview_encoder_threads)
