"""Asynchronous read-back of Stage II's resolve strip and mask through pixel-pack buffers.

``render.readback: pbo``. Panda3D 1.10's ``RTM_copy_ram`` reads a buffer with a synchronous
``glReadPixels`` at the end of the frame: the thread waits there until the GPU has drawn it (on
an NVIDIA H200, 38 % of a slot's main thread spinning in the driver, issue #30). Here each
buffer read (the colour strip or, with ``render.yuv`` device, the packed yuv420p planes of
``gl_yuv``; and the mask) gets one more display region, drawn last, whose draw callback
(Panda3D's context current and the buffer's framebuffer bound) issues ``glReadPixels`` into a
pixel-pack buffer (PBO) of a small ring and, once the frame's reads are issued, a fence. The
frame's bytes are taken later (:meth:`PboReadback.collect`, typically after the next frame was
submitted): the fence is polled without blocking and the thread sleeps between polls (no
spin in any driver), then the PBO is mapped and copied once into a fresh array.
"""

from __future__ import annotations

import ctypes
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core.trajectory import VIEWS
from . import gl_calls as g

READBACK_SORT = 1 << 20  # the read-back region is drawn after every other region of a buffer
FENCE_TIMEOUT_S = 120.0  # a fence not signalled by then is a dead GPU, not a slow frame
FIRST_NAP_S, MAX_NAP_S = 50e-6, 1e-3  # the sleeping fence poll's back-off


@dataclass
class _Frame:
    slot: int
    want: frozenset[str]  # the buffers this frame reads: colour or yuv, and mask
    read: set[str] = field(default_factory=set)
    fence: Any = None


@dataclass
class ReadbackTimes:
    """Wall seconds spent, summed over frames: issuing reads (inside the draw callbacks),
    waiting on fences (sleeping), mapping and copying PBOs."""

    frames: int = 0
    issue_s: float = 0.0
    wait_s: float = 0.0
    copy_s: float = 0.0
    waits: int = 0  # collects whose fence was not yet signalled at the first poll


class PboReadback:
    """A ring of ``slots`` PBO sets (colour strip RGBA8, mask red channel, and with the yuv
    pass its packed planes, RGBA8) for one
    :class:`~stages.engine.render_targets.RenderTargets`: :meth:`submit` draws a frame and
    queues its reads, :meth:`collect` returns the oldest queued frame's bytes (bottom-up rows,
    as GL stores them), :meth:`discard` forgets every queued frame."""

    def __init__(self, targets: Any, slots: int = 3):
        if slots < 1:
            raise ValueError(f"render: readback slots is {slots}; expected at least 1")
        self.t = targets
        self.slots = slots
        self.gl = g.GLCalls()
        self.ctx: g.CurrentContext | None = None
        self.times = ReadbackTimes()
        mw, mh = targets.mask_size
        # (width, height, GL format, channels) of each buffer's read: the strips of all views
        self.shape = {"colour": (targets.W * len(VIEWS), targets.H, g.GL_RGBA, 4),
                      "mask": (mw * len(VIEWS), mh, g.GL_RED, 1)}
        yuv = getattr(targets, "yuv_pass", None)
        if yuv is not None:  # the packed yuv420p planes (gl_yuv), read instead of the colour
            self.shape["yuv"] = (*yuv.size, g.GL_RGBA, 4)
        self.pbos: dict[str, list[int]] = {}
        self._free: deque[int] = deque(range(slots))
        self._pending: deque[_Frame] = deque()
        self._armed: _Frame | None = None
        self._error: BaseException | None = None
        self._checked: set[str] = set()  # buffers whose framebuffer binding was checked
        self._roots = [self._add_region(targets.resolve, "colour"),
                       self._add_region(targets.mask_buf, "mask")]
        if yuv is not None:
            self._roots.append(self._add_region(yuv.buf, "yuv"))

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    @property
    def free_slots(self) -> int:
        return len(self._free)

    def _add_region(self, buf: Any, which: str) -> Any:
        """A display region over the whole buffer, drawn last, whose camera sees an empty
        scene: its draw callback only issues the read."""
        from panda3d.core import Camera, NodePath, OrthographicLens

        root = NodePath(f"readback_{which}")
        cam = root.attachNewNode(Camera(f"readback_{which}", OrthographicLens()))
        dr = buf.makeDisplayRegion()
        dr.setSort(READBACK_SORT)
        dr.setClearColorActive(False)
        dr.setClearDepthActive(False)
        dr.setCamera(cam)
        dr.setDrawCallback(lambda cbdata: self._on_draw(cbdata, which))
        return root

    def _on_draw(self, cbdata: Any, which: str) -> None:
        cbdata.upcall()
        f = self._armed
        if f is None or which not in f.want or which in f.read or self._error is not None:
            return
        try:
            self._issue(f, which)
        except BaseException as exc:  # noqa: BLE001 - raised again by submit()
            self._error = exc

    def _issue(self, f: _Frame, which: str) -> None:
        gl = self.gl
        t0 = time.perf_counter()
        if self.ctx is None:
            self.ctx = g.CurrentContext(gl)
            self._make_pbos()
        if which not in self._checked:  # once: no glGet round trip per frame
            if gl.integer(g.GL_READ_FRAMEBUFFER_BINDING) == 0:  # Panda3D's FBO is bound
                raise RuntimeError(f"render.readback=pbo: the {which} buffer is not a "
                                   "framebuffer object (the read-back reads its colour "
                                   "attachment 0)")
            self._checked.add(which)
        w, h, fmt, _ = self.shape[which]
        # pack alignment 1 is what Panda3D itself sets before each of its reads (it reads
        # the value nowhere else), so it is left so
        gl.glPixelStorei(g.GL_PACK_ALIGNMENT, 1)
        gl.glReadBuffer(g.GL_COLOR_ATTACHMENT0)
        gl.glBindBuffer(g.GL_PIXEL_PACK_BUFFER, self.pbos[which][f.slot])
        gl.glReadPixels(0, 0, w, h, fmt, g.GL_UNSIGNED_BYTE, None)
        gl.glBindBuffer(g.GL_PIXEL_PACK_BUFFER, 0)
        f.read.add(which)
        if f.read == f.want:
            f.fence = gl.glFenceSync(g.GL_SYNC_GPU_COMMANDS_COMPLETE, 0)
            gl.glFlush()  # start the work now: the fence is polled, never waited on blocking
            if not f.fence:
                raise RuntimeError(f"render.readback=pbo: glFenceSync failed (GL error "
                                   f"{gl.glGetError():#x})")
        self.times.issue_s += time.perf_counter() - t0

    def _make_pbos(self) -> None:
        gl = self.gl
        while gl.glGetError() != g.GL_NO_ERROR:  # errors left by others are not ours
            pass
        for which, (w, h, _, c) in self.shape.items():
            ids = gl.gen_buffers(self.slots)
            for pbo in ids:
                gl.glBindBuffer(g.GL_PIXEL_PACK_BUFFER, pbo)
                gl.glBufferData(g.GL_PIXEL_PACK_BUFFER, w * h * c, None, g.GL_STREAM_READ)
            gl.glBindBuffer(g.GL_PIXEL_PACK_BUFFER, 0)
            self.pbos[which] = ids
        err = gl.glGetError()
        if err != g.GL_NO_ERROR:
            raise RuntimeError(f"render.readback=pbo: could not make {self.slots} pixel-pack "
                               f"buffers (GL error {err:#x})")

    def submit(self, want: tuple[str, ...] = ("colour", "mask")) -> None:
        """Draw one frame (``renderFrame``) with the reads of the buffers ``want`` names
        queued behind a fence."""
        unknown = set(want) - set(self.shape)
        if unknown:
            raise ValueError(f"render.readback=pbo: no read-back of {sorted(unknown)}; this "
                             f"renderer reads {sorted(self.shape)}")
        if not self._free:
            raise RuntimeError(f"render.readback=pbo: all {self.slots} read-back slots hold "
                               "frames not collected yet; collect() before submitting more")
        f = _Frame(self._free.popleft(), frozenset(want))
        self._armed, self._error = f, None
        try:
            self.t.engine.renderFrame()
        finally:
            self._armed = None
        if self._error is not None or f.fence is None:
            if f.fence is not None:
                self._delete_fence(f)
            self._free.appendleft(f.slot)
            if self._error is not None:
                err, self._error = self._error, None
                raise err
            raise RuntimeError("render.readback=pbo: the read-back draw callbacks did not run "
                               f"(read {sorted(f.read)}; is a buffer inactive?)")
        self._pending.append(f)

    def collect(self) -> dict[str, np.ndarray]:
        """The oldest submitted frame's reads by buffer: colour (H, 5W, 4), mask (h, 5w, 1)
        and yuv (the packed planes' texels, gl_yuv) uint8, rows bottom-up. Sleeps (never
        spins) until its fence is signalled."""
        if not self._pending:
            raise RuntimeError("render.readback=pbo: collect() with no frame submitted")
        f = self._pending.popleft()
        try:
            assert self.ctx is not None
            self.ctx.ensure()
            self._wait(f.fence)
            t0 = time.perf_counter()
            out = {which: self._copy(which, f.slot) for which in sorted(f.want)}
            self.times.copy_s += time.perf_counter() - t0
            self.times.frames += 1
            return out
        finally:
            self._delete_fence(f)
            self._free.append(f.slot)

    def _wait(self, fence: Any) -> None:
        gl = self.gl
        t0 = time.perf_counter()
        nap = FIRST_NAP_S
        first = True
        while True:
            r = gl.glClientWaitSync(fence, g.GL_SYNC_FLUSH_COMMANDS_BIT if first else 0, 0)
            if r in (g.GL_ALREADY_SIGNALED, g.GL_CONDITION_SATISFIED):
                break
            if r != g.GL_TIMEOUT_EXPIRED:
                raise RuntimeError(f"render.readback=pbo: glClientWaitSync failed ({r:#x}, GL "
                                   f"error {gl.glGetError():#x})")
            if first:
                self.times.waits += 1
                first = False
            if time.perf_counter() - t0 > FENCE_TIMEOUT_S:
                raise RuntimeError(f"render.readback=pbo: a frame's fence was not signalled "
                                   f"within {FENCE_TIMEOUT_S:.0f} s (GPU hung?)")
            time.sleep(nap)
            nap = min(2 * nap, MAX_NAP_S)
        self.times.wait_s += time.perf_counter() - t0

    def _copy(self, which: str, slot: int) -> np.ndarray:
        gl = self.gl
        w, h, _, c = self.shape[which]
        n = w * h * c
        gl.glBindBuffer(g.GL_PIXEL_PACK_BUFFER, self.pbos[which][slot])
        try:
            ptr = gl.glMapBufferRange(g.GL_PIXEL_PACK_BUFFER, 0, n, g.GL_MAP_READ_BIT)
            if not ptr:
                raise RuntimeError(f"render.readback=pbo: glMapBufferRange of the {which} "
                                   f"PBO failed (GL error {gl.glGetError():#x})")
            out = np.empty((h, w, c), np.uint8)
            ctypes.memmove(out.ctypes.data, ptr, n)
            gl.glUnmapBuffer(g.GL_PIXEL_PACK_BUFFER)
        finally:
            gl.glBindBuffer(g.GL_PIXEL_PACK_BUFFER, 0)
        return out

    def _delete_fence(self, f: _Frame) -> None:
        if f.fence is not None:
            if self.ctx is not None:
                self.ctx.ensure()
            self.gl.glDeleteSync(f.fence)
            f.fence = None

    def discard(self) -> None:
        """Forget every submitted frame not collected (after an error mid-clip): their fences
        are deleted and their slots free again."""
        while self._pending:
            f = self._pending.popleft()
            self._delete_fence(f)
            self._free.append(f.slot)

    def close(self) -> None:
        """Delete the PBOs (before the GL context goes)."""
        self.discard()
        if self.ctx is not None and self.pbos:
            self.ctx.ensure()
            for ids in self.pbos.values():
                self.gl.delete_buffers(ids)
        self.pbos = {}
        for root in self._roots:
            root.removeNode()
        self._roots = []
