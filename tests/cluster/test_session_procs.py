"""`cluster down`'s process search without Ray: a process found by its session marker is
stopped with the child it started, none survives."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

from stages.cluster.session_procs import SESSION_ENV, stop_session
from stages.engine.process_tree import is_running, process_tree


def test_stop_session_stops_the_marked_process_with_its_child():
    marker = f"test-session-{os.getpid()}-{time.monotonic_ns()}"
    code = ("import subprocess, sys, time; "
            "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], env={}); "
            "time.sleep(60)")
    child = subprocess.Popen([sys.executable, "-c", code],
                             env={**os.environ, SESSION_ENV: marker})
    tree: list[int] = []
    try:
        deadline = time.monotonic() + 20
        while len(tree) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
            tree = process_tree([child.pid])
        assert len(tree) == 2, tree  # the grandchild's environment lacks the marker
        stopped, survivors = stop_session("", marker)
        assert stopped == set(tree) and survivors == []
        assert child.wait(timeout=10) == -signal.SIGTERM
        assert not any(is_running(p) for p in tree)
        assert stop_session("", f"{marker}-other") == (set(), [])
    finally:
        for p in tree:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, signal.SIGKILL)
        child.wait()
