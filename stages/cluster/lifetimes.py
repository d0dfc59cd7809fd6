"""Process lifetimes (DESIGN §6, paper Table 2): engine processes die with their runner.

Each engine process starts in its own process group (so a stalled one is killed with all it
started) with a parent-death signal (so a runner killed with SIGKILL takes its engines along).
A runner started by ``dvc repro`` also watches its ancestors up to the ``dvc`` process: when one
of them dies (``kill -9`` of dvc) it kills its slots and exits. Slot folders and render
instances are owned through ``flock`` locks, which the kernel releases when the owner dies.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import queue
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import IO

from ..engine.process_tree import is_running, proc_stat

PR_SET_PDEATHSIG = 1


_LIBC = ctypes.CDLL(None, use_errno=True)  # resolved before any fork (no loader in the child)
_PRCTL = _LIBC.prctl


def die_with_parent() -> list[str]:
    """A command prefix that arms the parent-death signal (SIGKILL) in a child after its fork,
    before the exec of its own program: ``setpriv --pdeathsig KILL --`` (util-linux, part of
    every Debian system); empty where there is no setpriv (then nothing is armed).

    Not a ``preexec_fn``: for one, CPython runs Python in the forked child (its at-fork hooks,
    and the deallocation of whatever was pending there), and an object whose C library joins
    its own threads when freed (PyAV's swscale context) waits there forever for threads the
    child does not have; the ``Popen`` waiting for the child's exec then never returns. The
    test suite hit exactly that (a restart of the uploader from its supervisor's thread).
    The one gap: a parent gone in the instant between the fork and setpriv's prctl leaves
    the child running (the runner's ancestor watch and ``cluster down`` find such leftovers).

    The signal fires when the *thread* that forked the child ends, not the process
    (prctl(2)). Start armed children with :func:`spawn_armed`, which forks them from one
    thread that lives as long as the process."""
    exe = shutil.which("setpriv")
    return [exe, "--pdeathsig", "KILL", "--"] if exe else []


class _Spawner:
    """One daemon thread per process that forks every armed child. A child armed with the
    parent-death signal is killed when the thread that forked it ends; forked from a
    short-lived thread (a supervisor's, a pool's, a request handler's) it would die with
    that thread while its owner still runs it (the CI run of 2026-12-07 saw a child spawned
    from a thread that had just returned killed with SIGKILL). This thread ends only with
    the process, so the children die with the process, as their owners expect.

    Spawns are serialized: a child that blocks before its exec (a ``cwd`` on a hung mount)
    holds up every later spawn of the process. A caller interrupted while it waits
    (Ctrl-C) leaves no child behind: one already forked for it is killed and reaped."""

    SETTLE_S = 30.0  # how long an interrupted caller waits for its child's start

    def __init__(self) -> None:
        self._popen = subprocess.Popen  # what forks (a test slows it down)
        self._reset()
        # a forked copy of this process has neither the thread nor, maybe, a free lock
        os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def popen(self, argv: list[str], **kw) -> subprocess.Popen:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, args=(self._jobs,),
                                                name="armed-spawner", daemon=True)
                self._thread.start()
            jobs = self._jobs
        fut: Future[subprocess.Popen] = Future()
        jobs.put((fut, argv, kw))
        try:
            return fut.result()
        except BaseException:
            if not fut.cancel():  # started: its child must not outlive this call
                self._settle(fut, kw)
            raise

    def _settle(self, fut: Future, kw: dict) -> None:
        """Wait for a started job (through further interrupts, up to SETTLE_S: the caller's
        fds stay open meanwhile), then kill and reap its child. A job still starting then is
        left to the spawner thread, which kills its child as it comes."""
        deadline = time.monotonic() + self.SETTLE_S
        while not fut.done() and time.monotonic() < deadline:
            try:
                fut.exception(timeout=max(0.0, deadline - time.monotonic()))
            except BaseException:  # noqa: BLE001 - another interrupt, a timeout: go on
                continue
        fut.add_done_callback(lambda f: _kill_started(f, kw))

    def _run(self, jobs: queue.SimpleQueue) -> None:
        while True:
            fut, argv, kw = jobs.get()
            if not fut.set_running_or_notify_cancel():
                continue  # its caller gave up before it started
            try:
                fut.set_result(self._popen(argv, **kw))
            except BaseException as exc:  # noqa: BLE001 - the caller gets it, as from Popen
                fut.set_exception(exc)


def _kill_started(fut: Future, kw: dict) -> None:
    """Kill and reap the child of a job whose caller is gone (nothing if it failed)."""
    if fut.cancelled() or fut.exception() is not None:
        return
    proc = fut.result()
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if kw.get("start_new_session"):
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)


_SPAWNER = _Spawner()


def spawn_armed(argv: list[str], **popen_kwargs) -> subprocess.Popen:
    """``subprocess.Popen(argv, **popen_kwargs)`` with the child armed to be SIGKILLed when
    this process dies (kill -9 included), whichever thread calls it: see :class:`_Spawner`."""
    return _SPAWNER.popen([*die_with_parent(), *argv], **popen_kwargs)


def exit_with_parent(parent: int) -> None:
    """Arm the current process (a pool worker's initializer) to be SIGKILLed when the thread
    that started it dies, and exit now if ``parent`` (its starter's pid) is already gone: a
    stage killed with kill -9 (``dvc repro`` stopped by hand) leaves no idle workers behind."""
    _PRCTL(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


def spawn_group(argv: list[str], env: dict[str, str], log: Path, cwd: Path | None = None,
                pass_fds: tuple[int, ...] = ()) -> subprocess.Popen:
    """Start ``argv`` in a new session / process group that receives SIGKILL when this
    process dies (:func:`spawn_armed`). stdout and stderr go to ``log``."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        return spawn_armed(argv, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                           start_new_session=True, pass_fds=pass_fds)


def kill_group(proc: subprocess.Popen, timeout_s: float = 10.0) -> None:
    """SIGKILL the whole process group of ``proc`` and reap it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    # a process in uninterruptible sleep (D state) cannot be reaped: nothing more to do here
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=timeout_s)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return is_running(pid)


def ancestors(until: Callable[[int], bool] | None = None) -> list[tuple[int, str]]:
    """(pid, start time) of this process's ancestors, nearest first, stopping after the first
    one for which ``until(pid)`` is true (or at pid 1)."""
    out: list[tuple[int, str]] = []
    pid = os.getppid()
    while pid > 1:
        st = proc_stat(pid)
        if st is None:
            break
        out.append((pid, st[21]))
        if until is not None and until(pid):
            break
        pid = int(st[3])
    return out


def is_dvc(pid: int) -> bool:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return any(Path(c.decode(errors="replace")).name in ("dvc", "dvc.exe") for c in cmd[:2]) or (
        len(cmd) > 2 and cmd[1] == b"-m" and cmd[2] == b"dvc")


def under_dvc() -> list[tuple[int, str]]:
    """The ancestors up to the ``dvc`` process that runs this stage; empty when not under DVC."""
    chain = ancestors(is_dvc)
    return chain if chain and is_dvc(chain[-1][0]) else []


class AncestorWatch:
    """Calls ``on_orphaned`` (from a daemon thread) once any watched ancestor is gone."""

    def __init__(self, chain: list[tuple[int, str]], on_orphaned: Callable[[], None],
                 period_s: float = 0.5):
        self.chain, self.on_orphaned, self.period_s = chain, on_orphaned, period_s
        self.thread = threading.Thread(target=self._run, name="ancestor-watch", daemon=True)

    def start(self) -> AncestorWatch:
        if self.chain:
            self.thread.start()
        return self

    def _gone(self) -> bool:
        for pid, start in self.chain:
            st = proc_stat(pid)
            if st is None or st[21] != start or st[2] in ("Z", "X"):
                return True
        return False

    def _run(self) -> None:
        while True:
            if self._gone():
                self.on_orphaned()
                return
            time.sleep(self.period_s)


def try_lock(path: Path) -> IO[str] | None:
    """An exclusive ``flock`` on ``path`` (created), or None if a live process holds it. The
    returned file keeps the lock until it is closed or its process dies."""
    path.parent.mkdir(parents=True, exist_ok=True)
    f = open(path, "a+")  # noqa: SIM115 - the caller holds it
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.close()
        return None
    f.seek(0)
    f.truncate(0)
    f.write(f"{os.getpid()}\n")
    f.flush()
    return f
