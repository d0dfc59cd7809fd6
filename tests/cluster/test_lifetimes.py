"""Armed children (engines, the uploader, the local S3 store) die with the process that
started them, not with the thread: the parent-death signal fires when the forking *thread*
ends (prctl(2)), so ``spawn_armed`` forks from one thread that lives as long as the process."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

from stages.engine.process_tree import is_running

from .conftest import kill_owner_drill

OWNER = """
import json, sys, threading, time
from pathlib import Path
from stages.cluster.lifetimes import spawn_group
from tests.cluster.test_lifetimes import wait_for_exec
out = []
def spawn():
    out.append(spawn_group(["sleep", "600"], {"PATH": "/usr/bin:/bin"}, Path(sys.argv[1])))
    wait_for_exec(out[0].pid)
th = threading.Thread(target=spawn)
th.start(); th.join()
print(json.dumps({"pid": out[0].pid}), flush=True)
time.sleep(600)
"""


def wait_for_exec(pid: int, program: bytes = b"sleep") -> None:
    """Until ``pid`` runs ``program``: setpriv has armed it by then. A thread that returns
    before that leaves the child unarmed (the race that let the old code pass here)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(program):
                return
        except OSError:
            return
        time.sleep(0.01)


def _spawn_from_a_thread_that_ends(log) -> subprocess.Popen:
    from stages.cluster.lifetimes import spawn_group

    out: list[subprocess.Popen] = []

    def spawn() -> None:
        out.append(spawn_group(["sleep", "600"], dict(os.environ), log))
        wait_for_exec(out[0].pid)

    th = threading.Thread(target=spawn)
    th.start()
    th.join(30)
    assert not th.is_alive() and out
    return out[0]


def test_a_child_started_from_a_thread_that_ended_lives_on_with_its_process(tmp_path):
    """On the old code (fork from the calling thread) the child got SIGKILL as the thread
    returned: the CI run of 2026-12-07."""
    procs = [_spawn_from_a_thread_that_ends(tmp_path / f"{i}.log") for i in range(3)]
    try:
        time.sleep(1.0)
        assert [p.poll() for p in procs] == [None, None, None]
    finally:
        for p in procs:
            p.kill()
            p.wait(10)
    assert [p.returncode for p in procs] == [-signal.SIGKILL] * 3


def test_a_child_started_from_a_thread_dies_when_its_process_is_killed(tmp_path):
    def alive(child: int) -> None:
        time.sleep(0.5)
        assert is_running(child), "the child died with the thread that asked for it"

    kill_owner_drill(OWNER, str(tmp_path / "c.log"), alive, "child")


def test_a_refused_start_reaches_the_caller_and_the_spawner_goes_on(tmp_path):
    from stages.cluster.lifetimes import spawn_armed

    try:
        spawn_armed(["true"], cwd=str(tmp_path / "no-such-dir"))
        raise AssertionError("a missing cwd must raise in the caller")
    except FileNotFoundError as exc:
        assert "no-such-dir" in str(exc)
    assert spawn_armed(["true"]).wait(10) == 0


def test_a_forked_copy_of_the_process_spawns_though_the_lock_was_held(tmp_path):
    """os.fork while another thread holds the spawner's lock: the child gets its own lock,
    queue and thread (an at-fork reset), and its spawns work."""
    from stages.cluster import lifetimes

    assert lifetimes.spawn_armed(["true"]).wait(10) == 0  # the parent's thread runs
    with lifetimes._SPAWNER._lock:
        pid = os.fork()
        if pid == 0:  # the child: never back into pytest
            code = 1
            try:
                code = lifetimes.spawn_armed(["true"]).wait(10)
            finally:
                os._exit(code)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    raise AssertionError("a forked child's spawn hung on the lock it inherited held")


def test_a_caller_interrupted_while_its_child_starts_leaves_no_child(monkeypatch):
    """Ctrl-C while the spawner thread forks the caller's child (a second Ctrl-C too): the
    child is killed and reaped, and the first interrupt reaches the caller."""
    from stages.cluster import lifetimes

    real = subprocess.Popen
    started: list[subprocess.Popen] = []
    forking = threading.Event()
    interrupts: list[int] = []

    def slow_popen(*a, **k):  # the fork lands after the caller was interrupted
        forking.set()
        time.sleep(0.8)
        p = real(*a, **k)
        started.append(p)
        return p

    def interrupt(*_):
        if not forking.is_set():  # not picked up yet: interrupt once it is
            signal.setitimer(signal.ITIMER_REAL, 0.05)
            return
        interrupts.append(1)
        if len(interrupts) == 1:
            signal.setitimer(signal.ITIMER_REAL, 0.2)  # a second Ctrl-C while it settles
        raise KeyboardInterrupt(len(interrupts))

    monkeypatch.setattr(lifetimes._SPAWNER, "_popen", slow_popen)
    old = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.1)
        try:
            lifetimes.spawn_armed(["sleep", "600"], start_new_session=True)
            raise AssertionError("the interrupt must reach the caller")
        except KeyboardInterrupt as exc:
            assert exc.args == (1,)  # the first one
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert len(started) == 1 and len(interrupts) == 2
    assert started[0].returncode == -signal.SIGKILL  # killed and reaped before the raise
    assert not is_running(started[0].pid)


def test_a_caller_that_gives_up_before_its_job_starts_forks_nothing(monkeypatch):
    """A job still queued behind a slow one when its caller is interrupted is cancelled."""
    from stages.cluster import lifetimes

    real = subprocess.Popen
    forked: list[list[str]] = []
    busy = threading.Event()

    def slow_popen(argv, **k):
        forked.append(list(argv))
        busy.set()
        time.sleep(1.0)
        return real(argv, **k)

    monkeypatch.setattr(lifetimes._SPAWNER, "_popen", slow_popen)
    first: list[subprocess.Popen] = []
    th = threading.Thread(target=lambda: first.append(lifetimes.spawn_armed(["true"])))
    th.start()
    assert busy.wait(10)

    def interrupt(*_):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.2)
        try:
            lifetimes.spawn_armed(["sleep", "600"])
            raise AssertionError("the interrupt must reach the caller")
        except KeyboardInterrupt:
            pass
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    th.join(10)
    assert first[0].wait(10) == 0
    time.sleep(0.3)  # the spawner thread is free again: the cancelled job stays unforked
    assert [a[-1] for a in forked] == ["true"], forked
