"""The /proc reader: a real child with a grandchild, read back by pid, command line,
environment and state."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

from stages.engine.process_tree import (
    all_pids,
    command_line,
    environment,
    is_running,
    proc_stat,
    process_state,
    process_tree,
)


def test_a_child_and_its_grandchild_are_read_back_from_proc():
    marker = f"wmforge-proc-tree-{os.getpid()}"
    code = ("import subprocess, sys, time; "
            "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
            "time.sleep(60)")
    child = subprocess.Popen([sys.executable, "-c", code, marker],
                             env={**os.environ, "WMFORGE_PROC_TEST": marker})
    tree: list[int] = []
    try:
        deadline = time.monotonic() + 20
        tree = process_tree([child.pid])
        while len(tree) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
            tree = process_tree([child.pid])
        assert len(tree) == 2 and child.pid in tree, tree
        grandchild = next(p for p in tree if p != child.pid)
        assert proc_stat(grandchild)[3] == str(child.pid)  # ppid, field 4 of proc(5)
        assert process_tree([child.pid], exclude=grandchild) == [child.pid]
        assert process_tree([child.pid], exclude=child.pid) == []
        assert child.pid in all_pids() and child.pid not in all_pids(exclude=child.pid)
        assert command_line(child.pid).endswith(f" {marker} ")  # NULs become spaces
        assert f"WMFORGE_PROC_TEST={marker}".encode() in environment(child.pid)
        assert is_running(child.pid) and process_state(child.pid) in ("S", "R")
        child.kill()
        deadline = time.monotonic() + 10
        while process_state(child.pid) != "Z" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert process_state(child.pid) == "Z" and not is_running(child.pid)  # not yet reaped
        child.wait()
        assert proc_stat(child.pid) is None and not is_running(child.pid)
    finally:
        for p in tree:  # the grandchild outlives its killed parent
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, signal.SIGKILL)
        child.wait()
