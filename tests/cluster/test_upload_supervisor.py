"""The uploader's supervisor with real processes: a process killed with SIGKILL is started
again, a crash it cannot get past is given up on (poisoned), a fatal exit is not retried."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time

from stages.cluster.lifetimes import pid_alive
from stages.cluster.upload_supervisor import Supervisor


def _wait(cond, timeout_s: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return False


def test_a_killed_process_is_started_again_and_its_state_is_on_disk(tmp_path):
    argv = [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(600)"]
    sup = Supervisor(argv, dict(os.environ), tmp_path / "up.log", tmp_path / "uploader.json",
                     backoff_s=0.1, backoff_max_s=0.5, poison_after=3,
                     stable_s=60.0).start()
    try:
        first = sup.proc.pid
        os.killpg(first, signal.SIGKILL)
        assert _wait(lambda: sup.proc.pid != first and sup.alive()), sup.state()
        st = json.loads((tmp_path / "uploader.json").read_text())
        assert st["status"] == "running" and st["restarts"] == 1 and st["pid"] == sup.proc.pid
        assert st["last_exit"] == -signal.SIGKILL and not pid_alive(first)
    finally:
        sup.stop(timeout_s=5)
    assert not sup.alive() and json.loads((tmp_path / "uploader.json").read_text())[
        "status"] == "stopped"


def test_a_crash_it_cannot_get_past_is_poisoned_and_a_fatal_exit_is_not_retried(tmp_path):
    crash = [sys.executable, "-c", "import os; print('boom: cannot read x', flush=True); "
             "os.kill(os.getpid(), 9)"]
    sup = Supervisor(crash, dict(os.environ), tmp_path / "c.log", tmp_path / "c.json",
                     backoff_s=0.05, backoff_max_s=0.2, poison_after=3,
                     stable_s=60.0).start()
    try:
        assert _wait(lambda: sup.gave_up), sup.state()
        st = json.loads((tmp_path / "c.json").read_text())
        assert st["status"] == "poisoned" and st["restarts"] == 2, st
        assert "3 crashes in a row (signal 9): boom: cannot read x" in st["error"]
        time.sleep(0.5)
        assert sup.restarts == 2  # never started again
    finally:
        sup.stop(timeout_s=5)
    auth = [sys.executable, "-c", "import sys; print('upload: error: refused key id K'); "
            "sys.exit(3)"]
    sup2 = Supervisor(auth, dict(os.environ), tmp_path / "a.log", tmp_path / "a.json",
                      backoff_s=0.05, backoff_max_s=60.0, poison_after=3,
                      stable_s=60.0).start()
    try:
        assert _wait(lambda: sup2.gave_up)
        st = json.loads((tmp_path / "a.json").read_text())
        assert st["status"] == "failed" and st["restarts"] == 0
        assert st["error"] == "credentials refused: upload: error: refused key id K"
    finally:
        sup2.stop(timeout_s=5)


def test_a_restart_that_cannot_start_is_tried_again_and_supervision_goes_on(tmp_path):
    """A start that fails (fork or exec refused: no memory, no pids) never ends supervision
    in silence: it counts as a crash and is tried again; starts that keep failing end as
    poisoned, with the reason on disk."""
    from stages.cluster.lifetimes import spawn_group

    argv = [sys.executable, "-c", "import time; time.sleep(600)"]
    import subprocess

    refusals = {"left": 1}
    why: list[Exception] = [BlockingIOError(11, "Resource temporarily unavailable")]

    def spawn(*a, **k):
        if refusals["left"] and sup.proc is not None:  # restarts refused
            refusals["left"] -= 1
            raise why[0]
        return spawn_group(*a, **k)

    sup = Supervisor(argv, dict(os.environ), tmp_path / "r.log", tmp_path / "r.json",
                     backoff_s=0.05, backoff_max_s=0.2, poison_after=4, stable_s=60.0,
                     spawn=spawn)
    sup.start()
    try:
        first = sup.proc.pid
        os.killpg(first, signal.SIGKILL)
        assert _wait(lambda: sup.proc.pid != first and sup.alive()), sup.state()
        assert refusals["left"] == 0 and sup.restarts == 2, sup.state()
    finally:
        sup.stop(timeout_s=5)
    refusals["left"] = 99  # every restart refused from now on, the child failing before exec
    why[0] = subprocess.SubprocessError("Exception occurred in preexec_fn.")
    sup = Supervisor(argv, dict(os.environ), tmp_path / "p.log", tmp_path / "p.json",
                     backoff_s=0.05, backoff_max_s=0.2, poison_after=3, stable_s=60.0,
                     spawn=spawn)
    sup.start()
    try:
        os.killpg(sup.proc.pid, signal.SIGKILL)
        assert _wait(lambda: sup.gave_up), sup.state()
        st = json.loads((tmp_path / "p.json").read_text())
        assert st["status"] == "poisoned" and "preexec_fn" in st["error"], st
    finally:
        sup.stop(timeout_s=5)


_IN_CHILD = {"mark": ""}


def _python_ran_in_a_child() -> None:  # an at-fork hook: Python code in a forked child
    if _IN_CHILD["mark"]:
        with open(_IN_CHILD["mark"], "a") as f:
            f.write(f"{os.getpid()}\n")


os.register_at_fork(after_in_child=_python_ran_in_a_child)


def test_a_child_runs_no_python_between_its_fork_and_its_exec(tmp_path):
    """spawn_group (engines, the uploader) and the S3 store arm the parent-death signal with
    setpriv, not a preexec_fn: with one, CPython runs Python in the forked child (at-fork
    hooks, deallocations), and a PyAV swscale context freed there hung the child before its
    exec and the Popen with it (the fresh-clone test run of 2026-12-07)."""
    from stages.cluster.lifetimes import spawn_group

    procs = []

    def spawn() -> None:  # from a thread, as the supervisor restarts its uploader
        procs.append(spawn_group(["true"], dict(os.environ), tmp_path / "t.log"))

    _IN_CHILD["mark"] = str(tmp_path / "ran")
    try:
        spawn()
        th = threading.Thread(target=spawn)
        th.start()
        th.join(30)
    finally:
        _IN_CHILD["mark"] = ""
    assert [p.wait(timeout=30) for p in procs] == [0, 0]
    assert not (tmp_path / "ran").exists(), "Python ran in a forked child before its exec"
