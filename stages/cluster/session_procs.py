"""Stopping one Ray session's processes on this machine (``wmforge cluster down``): found by the
session's marker or folder, with everything below them; SIGTERM, then SIGKILL; none may survive."""

from __future__ import annotations

import contextlib
import os
import signal
import time

from ..engine.process_tree import all_pids, command_line, environment, is_running, process_tree

SESSION_ENV = "WMFORGE_RAY_SESSION"  # set by `up` for every process of its Ray session


def stop_session(session_dir: str, marker: str) -> tuple[set[int], list[int]]:
    """Stop every process of the session; (the pids stopped, those that survived)."""
    stopped: set[int] = set()
    for _ in range(3):  # a raylet may start a worker while we stop: look again
        pids = [p for p in _with_descendants(_session_pids(session_dir, marker))
                if p not in stopped]
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and any(is_running(p) for p in pids):
            time.sleep(0.3)
        for pid in pids:
            if is_running(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        stopped |= set(pids)
        time.sleep(0.5)
    survivors = [p for p in stopped | set(_with_descendants(_session_pids(session_dir,
                                                                        marker)))
                 if is_running(p)]
    return stopped, survivors


def _with_descendants(pids: list[int]) -> list[int]:
    """``pids`` and every process below them (this process left out). Ray's agents retitle
    themselves and their title overwrites the memory /proc shows as their command line *and*
    environment, so they are found as children of their raylet (collected before anything is
    stopped)."""
    return process_tree(pids, exclude=os.getpid())


def _session_pids(session_dir: str, marker: str = "") -> list[int]:
    """Processes of this Ray session: their environment carries the session's marker (set by
    `up`, inherited by every Ray process) or their command line names its folder. A process
    that retitled itself may show neither: :func:`_with_descendants` adds those."""
    if not session_dir and not marker:
        return []
    mark = f"{SESSION_ENV}={marker}".encode()
    out = []
    for pid in all_pids(exclude=os.getpid()):
        try:
            cmd = command_line(pid)
            env = environment(pid) if marker else []
        except OSError:
            continue
        if (session_dir and session_dir in cmd) or (marker and mark in env):
            out.append(pid)
    return out
