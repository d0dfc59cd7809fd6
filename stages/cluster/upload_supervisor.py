"""The uploader's supervisor: a node's uploader process that dies is started again.

A crash (a signal, an unexpected exit code) is restarted after a back-off that doubles from
``backoff_s`` up to ``backoff_max_s``; ``poison_after`` crashes in a row (a process that ran for
``stable_s`` resets the count) mean a crash it cannot get past: it is not started again and its
state says so (``poisoned``, with the last line of its log). An exit that restarting cannot fix
(2: bad configuration, 3: credentials refused, 4: the store refused a request) is ``failed`` at
once. The state is written to a JSON file on every change (``wmforge cluster health`` reads it)
and the pid in it is checked for liveness there. Nothing here ever stops the run: the node
runner decides what to do with a supervisor that gave up.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# exit codes of `python -m stages.cluster.uploader` that a restart cannot fix
FATAL_EXITS = {2: "bad configuration", 3: "credentials refused", 4: "the store refused a request"}


def last_line(log: Path, limit: int = 300) -> str:
    try:
        with open(log, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - 8192))
            lines = f.read().decode(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1][:limit] if lines else ""


class Supervisor:
    """Keeps one process (``argv``) running; see the module docstring."""

    def __init__(self, argv: list[str], env: dict[str, str], log: Path, state_path: Path, *,
                 backoff_s: float, backoff_max_s: float, poison_after: int, stable_s: float,
                 spawn: Callable[..., subprocess.Popen] | None = None,
                 note: Callable[[str], Any] = lambda m: None):
        """The limits come from ``upload.*`` (``restart_backoff_s``, ``backoff_max_s``,
        ``poison_after``, ``stable_s``)."""
        from .lifetimes import spawn_group

        self.argv, self.env, self.log, self.state_path = argv, env, log, state_path
        self.backoff_s, self.backoff_max_s = backoff_s, backoff_max_s
        self.poison_after, self.stable_s = poison_after, stable_s
        self.spawn = spawn or spawn_group
        self.note = note
        self.proc: subprocess.Popen | None = None
        self.restarts = 0  # starts after the first
        self.crashes_in_a_row = 0
        self.status = "starting"
        self.last_exit: int | None = None
        self.error = ""
        self._started = 0.0
        self._start_failed = ""  # why the last start was refused ('' once one succeeds)
        self._stop = threading.Event()
        # held while a change is set and written: what gave_up / state() say is on disk
        self._lock = threading.RLock()
        self._thread = threading.Thread(target=self._watch, name="upload-supervisor",
                                        daemon=True)

    # -------------------------------------------------------------- state

    def state(self) -> dict:
        with self._lock:
            return {"status": self.status, "pid": self.proc.pid if self.proc else None,
                    "restarts": self.restarts, "crashes_in_a_row": self.crashes_in_a_row,
                    "last_exit": self.last_exit, "error": self.error, "log": str(self.log),
                    "updated": time.time()}

    def _write(self) -> None:
        st = self.state()
        self.state_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.state_path.with_name(f".{self.state_path.name}.{os.getpid()}")
        tmp.write_text(json.dumps(st, sort_keys=True))
        tmp.replace(self.state_path)

    def _set(self, **kw: Any) -> None:
        with self._lock:
            for k, v in kw.items():
                setattr(self, k, v)
            self._write()

    @property
    def gave_up(self) -> bool:
        with self._lock:
            return self.status in ("poisoned", "failed")

    # -------------------------------------------------------------- life

    def start(self) -> Supervisor:
        self._spawn()
        self._thread.start()
        return self

    def _spawn(self) -> None:
        proc = self.spawn(self.argv, self.env, self.log)
        self._set(proc=proc, status="running")
        self._started = time.monotonic()

    def _watch(self) -> None:
        delay = self.backoff_s
        while not self._stop.is_set():
            proc = self.proc
            if proc is None or proc.poll() is None:
                self._stop.wait(0.2)
                continue
            rc = proc.returncode
            if self._stop.is_set():
                break
            ran = time.monotonic() - self._started
            if rc in FATAL_EXITS:
                self._set(status="failed", last_exit=rc,
                          error=f"{FATAL_EXITS[rc]}: {last_line(self.log)}")
                self.note(f"uploader exited {rc} ({FATAL_EXITS[rc]}): not restarted")
                break
            crashes = 1 if ran >= self.stable_s else self.crashes_in_a_row + 1
            if ran >= self.stable_s:
                delay = self.backoff_s
            what = self._start_failed or (f"signal {-rc}" if rc < 0 else f"exit {rc}")
            if crashes >= self.poison_after:
                self._set(status="poisoned", last_exit=rc, crashes_in_a_row=crashes,
                          error=f"{crashes} crashes in a row ({what}): {last_line(self.log)}")
                self.note(f"uploader crashed {crashes} times in a row ({what}): poisoned, "
                          "not restarted")
                break
            self._set(status="restarting", last_exit=rc, crashes_in_a_row=crashes,
                      error=f"{what}: {last_line(self.log)}")
            self.note(f"uploader died ({what}); restarting in {delay:.1f} s")
            if self._stop.wait(delay):
                break
            delay = min(delay * 2, self.backoff_max_s)
            self.restarts += 1
            try:
                self._spawn()
                self._start_failed = ""
            except Exception as exc:  # noqa: BLE001 - fork or exec refused (no memory, no
                # pids, a full disk for the log), or the child failed before its exec
                # (SubprocessError): a crash (the dead process stays self.proc, so the loop
                # sees it again), never the silent end of this thread and of supervision
                self._start_failed = f"start refused: {exc}"
                self._set(status="restarting", error=self._start_failed)
                self.note(f"uploader could not be started ({exc}); trying again")
                self._started = time.monotonic()  # starts that keep failing: poisoned

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop supervising, then the process (SIGTERM to its group, SIGKILL after)."""
        self._stop.set()
        proc = self.proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        self._thread.join(timeout=5)
        if not self.gave_up:
            self._set(status="stopped", last_exit=proc.returncode if proc else None)
