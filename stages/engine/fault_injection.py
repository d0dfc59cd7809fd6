"""Fault injection for the node runner's tests — named as such, off unless asked for.

``WMFORGE_FAULT_INJECTION`` holds a JSON object; an engine process calls :func:`at` at its
checkpoints and, when an entry matches, really does the fault:

- ``{"crash": {"stage": "render", "level": "Pack/Level"}}``: the process kills itself with
  SIGSEGV when it starts that level (every attempt: a level that crashes every time);
- ``{"stall": {"stage": "stage1", "level": "Pack/Level", "after": 1}}``: after ``after``
  finished trajectories the process stays alive but stops advancing (sleeps), so only the
  runner's stall timeout can end it.

``stage`` is ``stage1`` or ``render``; ``level`` may be ``"*"``.
"""

from __future__ import annotations

import json
import os
import signal
import time


def _entries() -> dict:
    raw = os.environ.get("WMFORGE_FAULT_INJECTION", "")
    if not raw:
        return {}
    try:
        doc = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"WMFORGE_FAULT_INJECTION: not JSON: {exc}") from None
    return doc if isinstance(doc, dict) else {}


def _matches(entry: dict, stage: str, level: str) -> bool:
    return entry.get("stage") == stage and entry.get("level") in ("*", level)


def at(stage: str, level: str, finished: int = 0) -> None:
    """A checkpoint: the process starts ``level`` (finished=0) or has finished ``finished``
    trajectories of it."""
    doc = _entries()
    crash = doc.get("crash")
    if isinstance(crash, dict) and _matches(crash, stage, level) and finished == 0:
        print(f"fault injection: crashing on {level} ({stage})", flush=True)
        os.kill(os.getpid(), signal.SIGSEGV)
    stall = doc.get("stall")
    if (isinstance(stall, dict) and _matches(stall, stage, level)
            and finished >= int(stall.get("after", 0))):
        print(f"fault injection: stalling on {level} ({stage}) after {finished}", flush=True)
        while True:
            time.sleep(3600)
