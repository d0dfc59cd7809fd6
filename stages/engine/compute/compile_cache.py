"""A node's persistent ``torch.compile`` cache, and one renderer compiling at a time.

On a GPU the compute backend compiles its graphs (Inductor, Triton) in its first frames: about
45-55 s on a lent H100 (docs/compute-renderer.md). Inductor keeps what it compiled in
``TORCHINDUCTOR_CACHE_DIR`` (FX graphs, AOT autograd, and Triton's kernels beneath it), and a
process that finds a graph there loads it instead of compiling it (on this CPU machine, two
small graphs: 15.6 s cold, 1.3 s warm). Two things are added here:

- **Where**: :func:`use_cache` points that variable at the node's own folder
  (``render.compile_cache_dir``, under the project's base), so it outlives a reboot or a new
  container (Inductor's default is under ``/tmp``), unless the operator already set it; and
  ``TRITON_CACHE_DIR`` (unless set) at its ``triton`` folder, for the project's own Triton
  kernels (the depth pass, the leaders' kernel).
- **Who compiles**: a node starts its renderers together, and each would compile the same
  graphs at once (N times the CPU, on the cores x264 needs). :class:`FirstCompile` lets the
  first renderer of a configuration (the *leader*: it holds an exclusive ``flock``) compile
  during its first frames while the others (*followers*) wait, then load from the warm cache.
  A marker file records a warm configuration, so later renderers do not wait at all. The lock
  is the kernel's: a leader that dies (or whose frames fail) lets go of it without the marker,
  and one follower takes its place while the others wait on; a follower that waited
  ``wait_s`` goes on and compiles itself. A follower's wait calls ``beat`` (the renderer's
  heartbeat), so the node runner does not take the wait for a stall.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

ENV = "TORCHINDUCTOR_CACHE_DIR"
TRITON_ENV = "TRITON_CACHE_DIR"
WAIT_S = 600.0  # a follower waits at most this long for the leader, then compiles itself
POLL_S = 0.25
REPORT_S = 60.0  # a follower says whom it waits for this often


def _write_holder(fd: int) -> None:
    """The lock file names its holder (pid, command), for a follower's report."""
    data = f"{os.getpid()} {_command(os.getpid())}\n".encode()
    try:  # written first, then cut to length: a reader never finds it empty
        os.pwrite(fd, data, 0)
        os.ftruncate(fd, len(data))
    except OSError:  # a full disk: the lock still works, the report says less
        pass


def _command(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()[:200]
    except OSError:
        return "?"


def holder(fd: int) -> str:
    """Who holds the lock of ``fd``'s file, as its leader wrote it, and whether that process
    is alive (a live lock whose writer is gone is held by another open of the file: a child
    that inherited it, say)."""
    try:
        text = os.pread(fd, 400, 0).decode(errors="replace").strip()
        pid = int(text.split()[0])
    except (OSError, ValueError, IndexError):
        return "holder unknown"
    alive = os.path.exists(f"/proc/{pid}")
    state = "this process" if pid == os.getpid() else "alive" if alive else "gone"
    return f"held by pid {pid}, {state}: {text[len(str(pid)):].strip()}"


def use_cache(path: str | os.PathLike[str] | None) -> Path | None:
    """Point Inductor's cache at ``path`` (made if missing) unless ``TORCHINDUCTOR_CACHE_DIR``
    is set already (the operator's choice wins), and Triton's (``TRITON_CACHE_DIR``, unless
    set) at its ``triton`` folder. Returns the folder in effect, or None where neither says
    one. Call before the first compile."""
    if os.environ.get(ENV):
        p = Path(os.environ[ENV])
    elif not path:
        return None
    else:
        p = Path(path)
        try:
            p.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OSError(f"render.compile_cache_dir {str(p)!r}: cannot make the folder "
                          f"({exc})") from None
        os.environ[ENV] = str(p)
    # Triton's own kernels (the depth pass, the leaders' kernel) in the same folder: Inductor
    # points Triton there only once it loads a kernel of its own
    os.environ.setdefault(TRITON_ENV, str(p / "triton"))
    return p


def config_key(*parts: Any) -> str:
    """A short digest naming one configuration of compiled graphs (torch version, device,
    sizes, the compute package's sources...)."""
    h = hashlib.sha256()
    for p in parts:
        h.update(repr(p).encode())
        h.update(b"\0")
    return h.hexdigest()[:16]


@functools.cache
def sources_digest() -> str:
    """The compute package's source files, hashed: new code means new graphs to compile
    (once a process: the gate's key is taken at construction and again at entry)."""
    h = hashlib.sha256()
    for f in sorted(Path(__file__).parent.glob("*.py")):
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


class FirstCompile:
    """One configuration's first frames, compiled by one renderer of the node at a time (see
    the module docstring). :meth:`enter` before the first frame, :meth:`leave` after the
    frames that compile; ``role`` says what this renderer was: ``warm`` (the marker was
    there), ``leader`` (first, or in the place of a leader gone without finishing),
    ``follower`` (waited for a leader that finished) or ``alone`` (waited ``wait_s``
    in vain, or could not take the lock)."""

    def __init__(self, cache_dir: Path, key: str, *, wait_s: float = WAIT_S,
                 beat: Callable[[], Any] | None = None):
        self.dir = Path(cache_dir) / "wmforge"
        self.key = key
        self.wait_s = float(wait_s)
        self.beat = beat
        self.role = ""
        self.waited_s = 0.0
        self._fd: int | None = None

    @property
    def marker(self) -> Path:
        return self.dir / f"warm-{self.key}"

    @property
    def entered(self) -> bool:
        return bool(self.role)

    def enter(self) -> str:
        """Take this renderer's part; blocks a follower until the leader is done."""
        self.dir.mkdir(parents=True, exist_ok=True)
        if self.marker.exists():
            self.role = "warm"
            return self.role
        fd = os.open(self.dir / f"lock-{self.key}", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pass
        else:
            if self.marker.exists():  # a leader finished between the check and the lock
                os.close(fd)
                self.role = "warm"
                return self.role
            self._fd = fd
            self.role = "leader"
            _write_holder(fd)
            return self.role
        # a follower: wait for the lock. The leader done (the marker there), go on warm; a
        # leader gone without the marker (killed, or its frames failed), lead in its place
        # (the other followers then wait for this one)
        t0 = time.monotonic()
        told = t0
        self.role = "alone"
        try:
            while time.monotonic() - t0 < self.wait_s:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    if self.marker.exists():  # done, though the lock is still held (by an
                        self.role = "follower"  # inherited open of the file, say): go warm
                        break
                    if self.beat is not None:
                        self.beat()
                    if time.monotonic() - told >= REPORT_S:  # who the wait is for
                        told = time.monotonic()
                        log.warning("compile cache: waited %.0f s for the leader of %s (%s)",
                                    told - t0, self.key, holder(fd))
                    time.sleep(POLL_S)
                    continue
                if self.marker.exists():
                    self.role = "follower"
                else:
                    self._fd, self.role = fd, "leader"
                    _write_holder(fd)
                break
        finally:
            self.waited_s = time.monotonic() - t0
            if self._fd is None:
                os.close(fd)  # the lock, if taken, goes with it
        return self.role

    def leave(self, ok: bool = True) -> None:
        """The compiling frames are done (``ok``: they rendered): a leader marks the
        configuration warm and lets the followers go."""
        if self._fd is None:
            return
        try:
            if ok:
                tmp = self.marker.with_suffix(".part")
                try:
                    tmp.write_text(f"{os.getpid()} {time.time():.0f}\n")
                    os.replace(tmp, self.marker)
                except OSError as exc:  # a full or read-only disk: the frames stand; the
                    # next renderer leads in turn and loads what the cache did keep
                    log.warning("compile cache: cannot mark %s warm (%s)", self.key, exc)
        finally:
            # the holder's name goes (a later leader writes its own; a follower of nobody
            # reads "holder unknown", not this pid as gone), then unlocked before the close:
            # a child that inherited this open of the file (a fork) would otherwise hold the
            # lock on after it
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


__all__ = ["ENV", "TRITON_ENV", "FirstCompile", "config_key", "sources_digest", "use_cache"]
