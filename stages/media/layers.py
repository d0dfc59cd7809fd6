"""Ground-truth layers (depth, normals, ids, mask, flow) → lossless fixed-point FFV1 files.

One file per view and layer, ``<view>.<layer>.mkv`` beside the view's MP4: FFV1 (intra-only,
lossless) in Matroska through PyAV, streamed frame by frame. Every layer is stored at a fixed
scale written in ``meta.json`` (no per-clip min/max): a value on the scale's grid comes back
exactly, any other value to within half a step. Multi-channel and 32-bit values are stored as
16-bit planes stacked vertically in one ``gray16le`` picture (FFV1 codes planes of one picture
with the same adaptive contexts; stacking keeps one pixel format for every layer):

- depth: uint32 = round(z / 1 mm), planes (high 16 bits, low 16 bits); 0xFFFFFFFF = no
  surface (``inf``); range 0 … 4 294 967.294 m.
- normals: 3 planes uint16 = round(n * 1023) + 32768 (x, y, z; 10-bit precision, < 0.06°);
  no surface = (0, 0, 0).
- ids: uint32 split into (high, low) planes: any id up to 4 294 967 295.
- mask: one ``gray`` (8-bit) plane, 0 / 1.
- flow_fwd, flow_bwd: planes (dx, dy, valid); dx, dy uint16 = round(d * 16) + 32768 (1/16 px,
  range −2048 … +2047.94 px); valid 0 / 1. A displacement outside the range is clipped and
  marked not valid (counted in the view's meta as ``clipped``).

The scales were chosen on rendered 540p planes (docs/ground-truth.md): the finer ones tried
(0.1 mm, 1/32767, 1/32 px) cost 1.26–1.66× the bytes for precision that no user of the layers
needs (1 mm is 0.01 % of 10 m; 1/1023 of a unit normal is under 0.06°).
The codec by measured size and decode speed (docs/ground-truth.md): on 960×540 planes FFV1 was
the smallest or close to it for depth and ids (the large layers), 2–3× faster to encode than
16-bit PNG, and keeps the files per view (one file, random access per frame: every frame is a
key frame). Files are written to ``<name>.part`` and renamed only after they decode to the
expected frame count, as the videos are. Same frames → same bytes (``+bitexact`` muxing).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

LAYERS = ("depth", "normals", "ids", "mask", "flow_fwd", "flow_bwd")
EXT = "mkv"
SAMPLING = ("one un-jittered sample at each pixel centre, rendered in its own pass; never "
            "averaged over spatial or temporal samples (the RGB's anti-aliasing samples do "
            "not touch the layers)")

DEPTH_SCALE_M = 1e-3          # metres per depth step
DEPTH_NONE = 0xFFFFFFFF       # stored value for "no surface" (decoded as inf)
NORMAL_SCALE = 1023           # steps per unit
FLOW_SCALE = 16               # steps per pixel
U16_OFFSET = 32768

# The ``units`` block of meta.json's "ground_truth" (per layer: what a decoded value means).
UNITS: dict[str, dict[str, Any]] = {
    "depth": {"units": "m", "dtype": "float32", "shape": "T,H,W",
              "meaning": "z-depth along the camera's forward axis (OpenCV +z), not ray length",
              "scale": DEPTH_SCALE_M, "stored": "uint32 = round(z / scale)",
              "no_surface": "inf", "range": [0.0, (DEPTH_NONE - 1) * DEPTH_SCALE_M]},
    "normals": {"units": "unit vector", "dtype": "float32", "shape": "T,H,W,3",
                "axes": "camera space, OpenCV: x right, y down, z forward",
                "scale": 1 / NORMAL_SCALE, "stored": "uint16 = round(n * 1023) + 32768",
                "no_surface": [0.0, 0.0, 0.0]},
    "ids": {"units": "instance id", "dtype": "uint32", "shape": "T,H,W",
            "table": "instances.parquet (id, kind, name, source)", "no_surface": 0},
    "mask": {"units": "bool", "dtype": "bool", "shape": "T,H,W",
             "meaning": "the character's pixels", "no_surface": False},
    "flow_fwd": {"units": "px", "dtype": "float32", "shape": "T,H,W,3",
                 "axes": "dx right, dy down, valid (1 = valid)",
                 "meaning": "where this pixel's surface point is in the next frame, minus here",
                 "scale": 1 / FLOW_SCALE, "stored": "uint16 = round(d * 16) + 32768",
                 "range": [-U16_OFFSET / FLOW_SCALE, (65535 - U16_OFFSET) / FLOW_SCALE],
                 "no_surface": [0.0, 0.0, 0.0],
                 "not_valid": "occluded, out of frame, no surface, out of range or last frame"},
    "flow_bwd": {"units": "px", "dtype": "float32", "shape": "T,H,W,3",
                 "axes": "dx right, dy down, valid (1 = valid)",
                 "meaning": "where this pixel's surface point was in the previous frame, minus "
                            "here",
                 "scale": 1 / FLOW_SCALE, "stored": "uint16 = round(d * 16) + 32768",
                 "range": [-U16_OFFSET / FLOW_SCALE, (65535 - U16_OFFSET) / FLOW_SCALE],
                 "no_surface": [0.0, 0.0, 0.0],
                 "not_valid": "occluded, out of frame, no surface, out of range or first frame"},
}


@dataclass(frozen=True)
class LayerCodec:
    """How one layer becomes a picture: stacked planes, their pixel format."""
    planes: int          # 16-bit (or 8-bit for the mask) planes stacked vertically
    pix_fmt: str         # gray16le | gray


CODECS = {"depth": LayerCodec(2, "gray16le"), "normals": LayerCodec(3, "gray16le"),
          "ids": LayerCodec(2, "gray16le"), "mask": LayerCodec(1, "gray"),
          "flow_fwd": LayerCodec(3, "gray16le"), "flow_bwd": LayerCodec(3, "gray16le")}
# Intra-only FFV1 version 3 with 4 slices (CRCs per slice), the larger context model, one
# thread: measured smallest at equal speed among the options tried (docs/ground-truth.md).
FFV1_OPTIONS = {"level": "3", "slices": "4", "context": "1", "slicecrc": "1", "g": "1",
                "threads": "1"}


def validate_layers(layers: Sequence[str], where: str = "render.ground_truth") -> tuple[str, ...]:
    """The layer names in canonical order; a clear error for an unknown or repeated one."""
    if isinstance(layers, str):
        raise ValueError(f"{where}: expected a list of layer names, got the string {layers!r}")
    bad = [x for x in layers if x not in LAYERS]
    if bad:
        raise ValueError(f"{where}: unknown ground-truth layer(s) {bad}; expected a list of "
                         f"names from {list(LAYERS)} (empty list = off)")
    dup = sorted({x for x in layers if list(layers).count(x) > 1})
    if dup:
        raise ValueError(f"{where}: layer(s) {dup} listed more than once")
    return tuple(x for x in LAYERS if x in layers)


def layer_path(traj_dir: Path, view: str, layer: str) -> Path:
    """The file of one view's layer: ``<traj_dir>/<view>.<layer>.mkv``."""
    validate_layers([layer], where="layer")
    return Path(traj_dir) / f"{view}.{layer}.{EXT}"


def encoding_meta(layer: str) -> dict[str, Any]:
    c = CODECS[layer]
    return {"container": "matroska", "codec": "ffv1", "pix_fmt": c.pix_fmt,
            "planes_stacked_vertically": c.planes, "options": dict(FFV1_OPTIONS),
            "lossless": True}


def ground_truth_meta(layers: Sequence[str], views: dict[str, dict]) -> dict[str, Any]:
    """meta.json's top-level ``"ground_truth"`` block."""
    names = validate_layers(layers)
    return {"layers": list(names), "sampling": SAMPLING,
            "units": {n: UNITS[n] for n in names}, "views": views}


# -- quantisation -------------------------------------------------------------------------

def _check(layer: str, a: Any, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    if not isinstance(a, np.ndarray):
        raise TypeError(f"layer {layer!r}: expected a numpy array, got {type(a).__name__}")
    if a.shape != shape:
        raise ValueError(f"layer {layer!r}: expected shape {shape}, got {a.shape}")
    if a.dtype != np.dtype(dtype):
        raise ValueError(f"layer {layer!r}: expected dtype {np.dtype(dtype)}, got {a.dtype}")
    return a


def _split32(q: np.ndarray) -> np.ndarray:
    return np.concatenate([(q >> 16).astype(np.uint16), (q & 0xFFFF).astype(np.uint16)])


def _join32(p: np.ndarray, h: int) -> np.ndarray:
    return (p[:h].astype(np.uint32) << 16) | p[h:2 * h].astype(np.uint32)


def _u16(x: np.ndarray, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """Offset-binary uint16 at ``scale`` steps per unit and a mask of clipped values."""
    q = np.rint(x.astype(np.float32, copy=False) * np.float32(scale))  # float32: 3x faster
    q += np.float32(U16_OFFSET)  # than float64, exact for |q| < 2^24
    out = (q < 0) | (q > 65535)
    np.clip(q, 0, 65535, out=q)
    return q.astype(np.uint16), out


def encode_plane(layer: str, a: np.ndarray, h: int, w: int) -> tuple[np.ndarray, int]:
    """One frame of ``layer`` → its stacked picture and the number of clipped pixels."""
    if layer == "depth":
        _check(layer, a, (h, w), np.float32)
        if np.isnan(a).any() or (a < 0).any():
            raise ValueError("layer 'depth': NaN or negative values; expected metres >= 0 "
                             "or inf for no surface")
        d = a.astype(np.float64)
        fin = np.isfinite(d)
        q = np.full((h, w), DEPTH_NONE, np.uint64)
        q[fin] = np.minimum(np.rint(d[fin] / DEPTH_SCALE_M), DEPTH_NONE - 1).astype(np.uint64)
        return _split32(q.astype(np.uint32)), int((d[fin] / DEPTH_SCALE_M > DEPTH_NONE - 1).sum())
    if layer == "normals":
        _check(layer, a, (h, w, 3), np.float32)
        if np.isnan(a).any():
            raise ValueError("layer 'normals': NaN values; expected unit vectors or zeros")
        q, _ = _u16(np.clip(a, -1.0, 1.0), NORMAL_SCALE)
        return np.ascontiguousarray(q.transpose(2, 0, 1).reshape(3 * h, w)), 0
    if layer == "ids":
        _check(layer, a, (h, w), np.uint32)
        return _split32(a), 0
    if layer == "mask":
        _check(layer, a, (h, w), np.bool_)
        return a.astype(np.uint8), 0
    if layer in ("flow_fwd", "flow_bwd"):
        _check(layer, a, (h, w, 3), np.float32)
        if np.isnan(a).any():
            raise ValueError(f"layer {layer!r}: NaN values; expected pixels (0 where no surface)")
        dx, ox = _u16(a[..., 0], FLOW_SCALE)
        dy, oy = _u16(a[..., 1], FLOW_SCALE)
        valid = a[..., 2] > 0.5
        clipped = valid & (ox | oy)
        v = (valid & ~clipped).astype(np.uint16)
        return np.concatenate([dx, dy, v]), int(clipped.sum())
    raise ValueError(f"unknown ground-truth layer {layer!r}; expected one of {list(LAYERS)}")


def decode_plane(layer: str, p: np.ndarray, h: int) -> np.ndarray:
    """One stacked picture → the layer's values (the inverse of ``encode_plane``)."""
    if layer == "depth":
        q = _join32(p, h)
        d = q.astype(np.float64) * DEPTH_SCALE_M
        d[q == DEPTH_NONE] = np.inf
        return d.astype(np.float32)
    if layer == "normals":
        q = p[:3 * h].reshape(3, h, -1).transpose(1, 2, 0).astype(np.float64)
        return ((q - U16_OFFSET) / NORMAL_SCALE).astype(np.float32)
    if layer == "ids":
        return _join32(p, h)
    if layer == "mask":
        return p[:h] != 0
    q = p[:3 * h].reshape(3, h, -1).astype(np.float64)
    out = np.empty((h, p.shape[1], 3), np.float32)
    out[..., 0] = (q[0] - U16_OFFSET) / FLOW_SCALE
    out[..., 1] = (q[1] - U16_OFFSET) / FLOW_SCALE
    out[..., 2] = q[2]
    return out


# -- files --------------------------------------------------------------------------------

class _LayerFile:
    """One FFV1 stream of stacked planes, written to ``.part`` until verified."""

    def __init__(self, path: Path, layer: str, width: int, height: int, fps: int):
        import av

        self.path, self.layer = path, layer
        self.part = path.with_name(path.name + ".part")
        self.codec = CODECS[layer]
        self.frames = self.clipped = 0
        self.container = av.open(str(self.part), "w", format="matroska",
                                 options={"fflags": "+bitexact"})
        st: Any = self.container.add_stream("ffv1", rate=fps, options=dict(FFV1_OPTIONS))
        st.width, st.height, st.pix_fmt = width, height * self.codec.planes, self.codec.pix_fmt
        self.stream = st

    def write(self, picture: np.ndarray, clipped: int) -> None:
        import av

        frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(picture),
                                           format=self.codec.pix_fmt)
        frame.pts = self.frames
        for pkt in self.stream.encode(frame):
            self.container.mux(pkt)
        self.frames += 1
        self.clipped += clipped

    def close(self) -> dict[str, Any]:
        if self.frames == 0:
            self.abort()
            raise OSError(f"{self.path}: no frames were added; refusing to write an empty layer")
        for pkt in self.stream.encode():
            self.container.mux(pkt)
        self.container.close()
        from stages.media.video import count_frames

        n = count_frames(self.part)
        if n != self.frames:
            self.part.unlink(missing_ok=True)
            raise OSError(f"{self.path}: decodes to {n} frames, expected {self.frames}")
        os.replace(self.part, self.path)
        h = hashlib.sha256(self.path.read_bytes()).hexdigest()
        entry = {"file": self.path.name, "sha256": h, "bytes": self.path.stat().st_size,
                 "frames": self.frames, "encoding": encoding_meta(self.layer)}
        if self.layer.startswith("flow"):
            entry["clipped"] = self.clipped
        return entry

    def abort(self) -> None:
        with contextlib.suppress(Exception):  # the file is being thrown away
            self.container.close()
        self.part.unlink(missing_ok=True)


class LayerWriter:
    """One view's ground-truth layers, one frame at a time (never holds past frames).

    ``add(frame)`` takes a dict with every requested layer (dtypes in the module docstring);
    ``close()`` verifies and publishes the files and returns this view's entry for meta.json.
    ``write`` is ``add``, so an ``AsyncEncoder`` can drive a writer off the render thread."""

    def __init__(self, traj_dir: Path, view: str, layers: Sequence[str], width: int,
                 height: int, fps: int):
        self.layers = validate_layers(layers)
        if not self.layers:
            raise ValueError(f"view {view!r}: LayerWriter needs at least one layer")
        self.view, self.width, self.height = view, int(width), int(height)
        self.files: dict[str, _LayerFile] = {}
        try:
            for name in self.layers:
                self.files[name] = _LayerFile(layer_path(traj_dir, view, name), name,
                                              self.width, self.height, fps)
        except BaseException:
            self.abort()
            raise

    def add(self, frame: dict[str, np.ndarray]) -> None:
        missing = [n for n in self.layers if n not in frame]
        if missing:
            raise ValueError(f"view {self.view!r}: frame lacks layer(s) {missing}; this writer "
                             f"needs {list(self.layers)}")
        for name in self.layers:
            pic, clipped = encode_plane(name, frame[name], self.height, self.width)
            self.files[name].write(pic, clipped)

    write = add

    def close(self) -> dict[str, dict[str, Any]]:
        """Per layer: file name, sha256, bytes, frames, encoding (and ``clipped`` for flow)."""
        try:
            return {name: f.close() for name, f in self.files.items()}
        except BaseException:
            self.abort()
            raise

    def abort(self) -> None:
        for f in self.files.values():
            f.abort()


def read_layer(traj_dir: Path, view: str, layer: str) -> np.ndarray:
    """Decode one view's layer: depth (T,H,W) float32 m (inf = none), normals (T,H,W,3)
    float32, ids (T,H,W) uint32, mask (T,H,W) bool, flow (T,H,W,3) float32."""
    import av

    path = layer_path(traj_dir, view, layer)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no {layer!r} layer for view {view!r}")
    codec = CODECS[layer]
    out = []
    with av.open(str(path)) as c:
        for f in c.decode(video=0):
            p = f.to_ndarray(format=codec.pix_fmt)
            out.append(decode_plane(layer, p, p.shape[0] // codec.planes))
    if not out:
        raise OSError(f"{path}: decodes to no frames")
    return np.stack(out)
