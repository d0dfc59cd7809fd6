"""Frames → H.264 MP4 through PyAV with pinned settings, streamed (memory stays flat), and the
checks that decide whether a video is complete.

Pinned for byte-identical output: libx264 with a fixed preset, CRF, thread count and GOP,
yuv420p, no scene-cut keyframes, no MB-tree by default (with it, identical frames encoded to
different files), bitexact muxing (no encoder version string or creation time).
A closed GOP of ``gop`` frames (default 1 s) keeps seeking cheap. Videos are written to
``<name>.part`` and renamed only after they decode to the expected frame count, so a crash or a
full disk never leaves a truncated video looking complete.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np


@dataclass(frozen=True)
class EncodeSettings:
    codec: str = "libx264"
    preset: str = "veryfast"
    crf: int = 20
    gop: int = 30
    threads: int = 2
    pix_fmt: str = "yuv420p"
    # x264's macroblock-tree rate control is off by default: with it, encoding the same frames
    # again gave a different file (8 encodes each: 3–7 distinct files at 160×90 … 960×540, one
    # at 1280×720; threads=1 too); with mbtree=0, one. It costs bitrate (sample renders: 1.57×
    # the bytes at the same CRF); render.x264_mbtree turns it back on where bytes matter more
    # than byte-identical re-runs.
    mbtree: bool = False

    def options(self) -> dict[str, str]:
        return {"preset": self.preset, "crf": str(self.crf), "g": str(self.gop),
                "keyint_min": str(self.gop), "sc_threshold": "0", "threads": str(self.threads),
                "flags": "+bitexact+cgop",
                "x264-params": f"open-gop=0:mbtree={int(self.mbtree)}"}

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Yuv420:
    """One picture already in the stream's yuv420p — BT.601 limited range, chroma sited as
    swscale's rgb24 conversion makes it (``stages.engine.compute.yuv`` converts on the GPU) —
    so the encoder thread converts nothing and runs x264 alone."""

    y: np.ndarray  # [H, W] uint8
    u: np.ndarray  # [H/2, W/2] uint8
    v: np.ndarray  # [H/2, W/2] uint8


def yuv420_frame(y: np.ndarray, u: np.ndarray, v: np.ndarray) -> Any:
    """A PyAV yuv420p VideoFrame holding these (host) planes, for ``stream.encode``: no
    conversion is left for the encoder to make."""
    import av

    h, w = y.shape
    frame = av.VideoFrame(w, h, "yuv420p")
    for plane, data in zip(frame.planes, (y, u, v), strict=True):
        rows, cols = data.shape
        dst = np.frombuffer(memoryview(plane), np.uint8).reshape(-1, plane.line_size)
        if dst.shape[0] < rows or plane.line_size < cols:
            raise ValueError(f"yuv420 frame: a {cols}x{rows} plane does not fit PyAV's "
                             f"{plane.line_size}x{dst.shape[0]}")
        dst[:rows, :cols] = data
    return frame


class VideoWriter:
    """One MP4, frames pushed one at a time (RGB, or :class:`Yuv420` planes)."""

    def __init__(self, path: Path, width: int, height: int, fps: int, settings: EncodeSettings):
        import av

        self.path = Path(path)
        self.part = self.path.with_name(self.path.name + ".part")
        self.frames = 0
        self.container = av.open(str(self.part), "w", format="mp4",
                                 options={"fflags": "+bitexact"})
        st: Any = self.container.add_stream(settings.codec, rate=fps,
                                            options=settings.options())
        st.width, st.height, st.pix_fmt = width, height, settings.pix_fmt
        self.stream = st

    def write(self, rgb: np.ndarray | Yuv420) -> None:
        import av

        if isinstance(rgb, Yuv420):
            if rgb.y.shape != (self.stream.height, self.stream.width):
                raise ValueError(f"{self.path}: a {rgb.y.shape[1]}x{rgb.y.shape[0]} yuv420 "
                                 f"picture for a {self.stream.width}x{self.stream.height} "
                                 "stream")
            frame = yuv420_frame(rgb.y, rgb.u, rgb.v)
        else:
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb), format="rgb24")
        # the RGB→YUV conversion stays inside encode(): an explicit frame.reformat() here made
        # the kill -9 recovery test's cross-process byte comparison fail 4 times in 7 runs
        # (with or without threads=1), the implicit one 0 in 4
        frame.pts = self.frames
        for pkt in self.stream.encode(frame):
            self.container.mux(pkt)
        self.frames += 1

    def close(self, expected_frames: int) -> Path:
        """Flush, verify that it decodes to ``expected_frames``, then publish it."""
        for pkt in self.stream.encode():
            self.container.mux(pkt)
        self.container.close()
        n = count_frames(self.part)
        if n != expected_frames:
            self.part.unlink(missing_ok=True)
            raise OSError(f"{self.path}: decodes to {n} frames, expected {expected_frames}")
        os.replace(self.part, self.path)
        return self.path

    def abort(self) -> None:
        with contextlib.suppress(Exception):  # the file is being thrown away
            self.container.close()
        self.part.unlink(missing_ok=True)


def count_frames(path: Path) -> int:
    """Frames that really decode (not the header's claim); 0 for an unreadable file."""
    import av

    try:
        with av.open(str(path)) as c:
            return sum(1 for _ in c.decode(video=0))
    except (av.error.FFmpegError, OSError, IndexError):
        return 0


def read_frames(path: Path) -> list[np.ndarray]:
    import av

    with av.open(str(path)) as c:
        return [f.to_ndarray(format="rgb24") for f in c.decode(video=0)]


class AsyncEncoder:
    """One encoder thread per stream, each behind its own bounded queue, so the renderer never
    waits on an encoder and the streams encode in parallel (x264 and swscale release the GIL).
    Memory is bounded by ``depth`` frames per stream.

    ``derived`` maps a stream name to a function of the frame's images that makes its picture
    (the tiled preview), so that work also runs off the render thread."""

    def __init__(self, writers: dict[str, Any], depth: int = 4,
                 derived: dict[str, Any] | None = None):
        self.writers = writers
        self.derived = derived or {}
        self.error: BaseException | None = None
        self.busy_s: dict[str, float] = {name: 0.0 for name in writers}
        self.wait_s = 0.0  # time the render thread spent blocked on a full queue
        self.queues: dict[str, queue.Queue] = {n: queue.Queue(maxsize=depth) for n in writers}
        self.threads = [threading.Thread(target=self._run, args=(n,), daemon=True,
                                         name=f"encode-{n}") for n in writers]
        for t in self.threads:
            t.start()

    def _run(self, name: str) -> None:
        import time

        q, w, fn = self.queues[name], self.writers[name], self.derived.get(name)
        while True:
            item = q.get()
            if item is None:
                return
            if self.error is not None:
                continue
            t0 = time.perf_counter()
            try:
                w.write(fn(item) if fn is not None else item[name])
            except BaseException as exc:  # noqa: BLE001 - re-raised in the caller
                self.error = exc
            self.busy_s[name] += time.perf_counter() - t0

    def put(self, images: dict[str, np.ndarray]) -> None:
        import time

        if self.error is not None:
            raise self.error
        t0 = time.perf_counter()
        for q in self.queues.values():
            q.put(images)
        self.wait_s += time.perf_counter() - t0

    def finish(self) -> None:
        for q in self.queues.values():
            q.put(None)
        for t in self.threads:
            t.join()
        if self.error is not None:
            raise self.error


_LABEL_CACHE: dict[tuple[str, int], np.ndarray] = {}


def label_bitmap(text: str, height: int) -> np.ndarray:
    """White text on a dark box (uint8 RGB), drawn with Pillow's built-in font."""
    key = (text, height)
    if key not in _LABEL_CACHE:
        from PIL import Image, ImageDraw, ImageFont

        size = max(10, height)
        font = ImageFont.load_default(size=size)
        box = font.getbbox(text)
        w, h = int(box[2] - box[0]) + 8, int(box[3] - box[1]) + 8
        im = Image.new("RGB", (w, h), (20, 20, 20))
        ImageDraw.Draw(im).text((4 - box[0], 4 - box[1]), text, fill=(255, 255, 255), font=font)
        _LABEL_CACHE[key] = np.asarray(im)
    return _LABEL_CACHE[key]


def tile_preview(views: dict[str, np.ndarray], order: tuple[str, ...]) -> np.ndarray:
    """3 x 2 grid of half-resolution views with labels; the sixth cell stays dark."""
    from PIL import Image

    h, w = views[order[0]].shape[:2]
    hh, hw = h // 2 // 2 * 2, w // 2 // 2 * 2
    out = np.zeros((2 * hh, 3 * hw, 3), np.uint8)
    for i, name in enumerate(order):
        img = views[name]
        # 2x2 box filter in Pillow's C code (releases the GIL, unlike four numpy slices)
        small = np.asarray(Image.fromarray(np.ascontiguousarray(img[: hh * 2, : hw * 2]))
                           .reduce(2))
        r, c = divmod(i, 3)
        cell = out[r * hh:(r + 1) * hh, c * hw:(c + 1) * hw]
        cell[:] = small
        lab = label_bitmap(name, max(10, hh // 12))
        lh, lw = min(lab.shape[0], hh), min(lab.shape[1], hw)
        cell[:lh, :lw] = lab[:lh, :lw]
    return out


def copy_clip(src: Path, dst: Path, start: int, count: int, fps: int) -> Path:
    """Frames [start, start+count) of ``src`` into ``dst`` without re-encoding: packets are
    copied and re-timed. ``start`` must be a keyframe (a GOP boundary: closed GOPs make the cut
    exact). Verified to decode to ``count`` frames, written through a ``.part`` file."""
    import av

    dst = Path(dst)
    part = dst.with_name(dst.name + ".part")
    with av.open(str(src)) as inp:
        ist = inp.streams.video[0]
        tb = ist.time_base
        assert tb is not None
        per_frame = round(1 / (fps * tb))  # ticks per frame
        off = start * per_frame
        first = True
        with av.open(str(part), "w", format="mp4", options={"fflags": "+bitexact"}) as out:
            ost = out.add_stream_from_template(ist)
            for pkt in inp.demux(ist):
                if pkt.pts is None:
                    continue
                f = round(pkt.pts / per_frame)
                if not start <= f < start + count:
                    continue
                if first and not pkt.is_keyframe:
                    raise ValueError(f"{src}: frame {start} is not a keyframe; cut clips at "
                                     "GOP boundaries")
                first = False
                pkt.pts -= off
                if pkt.dts is not None:
                    pkt.dts -= off
                pkt.stream = ost
                out.mux(pkt)
    n = count_frames(part)
    if n != count:
        part.unlink(missing_ok=True)
        raise OSError(f"{dst}: clip decodes to {n} frames, expected {count}")
    os.replace(part, dst)
    return dst
