"""What the node runner and its units exchange: a step (one engine process to run and what to
watch), its result, a unit of work (protocol) and a unit's final failure."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Protocol

from .gpus import SlotPlan
from .lifetimes import pid_alive


@dataclass
class Step:
    """One engine process of a unit: what to run and what to watch."""

    kind: str  # "stage1" | "render"
    instance: str  # node id + UTC time + sequence: names the snapshot too
    argv: list[str]
    folder: Path  # the instance folder: progress log, COMPLETE marker
    progress: Path
    log: Path  # the engine log
    watch: list[Path]  # outputs whose growth counts as progress (with the progress log)
    timeout_s: float
    total: int  # trajectories this process is to finish (for the display)
    config_hash: str = ""
    level_id: str = ""
    env: dict[str, str] = field(default_factory=dict)
    owner: IO[str] | None = None  # a lock the engine process inherits (its instance's owner)


@dataclass
class StepResult:
    step: Step
    ok: bool
    reason: str  # "" when ok; stalled, timeout, engine_crashed, engine_error, no_completion,
    # gpu_oom, host_oom, gpu_error (core.device_faults)
    exit_code: int | None
    signal_name: str
    detail: str
    attempt: int
    done: int  # progress lines at the end
    snapshot: str = ""
    slot: str = ""
    started: float = 0.0  # wall-clock time (time.time) the engine process started and ended
    ended: float = 0.0
    final: bool = False  # a failure after the last retry: the unit moves on without this step


class StagingError(Exception):
    """A unit's assets could not be staged again before a step (``next_step``): the runner
    fails the unit with reason ``staging_failed`` and this message (library paths only)."""

    def __init__(self, stage: str, detail: str):
        super().__init__(detail)
        self.stage, self.detail = stage, detail


class Unit(Protocol):
    """A unit of work for one slot (a level's lifecycle)."""

    unit_id: str
    level_id: str

    def stage(self, slot_dir: Path) -> None: ...

    def next_step(self, slot: SlotPlan, slot_dir: Path, instance: str) -> Step | None: ...

    def step_ended(self, result: StepResult) -> None: ...

    def recover(self, step: Step) -> None: ...

    def cleanup(self, slot_dir: Path) -> None: ...


@dataclass
class UnitFailure:
    unit_id: str
    level_id: str
    stage: str
    reason: str
    detail: str
    attempts: int
    snapshot: str


def stale_tmp_dirs(root: Path) -> list[Path]:
    """Stage I's private ``.<traj>.tmp-<pid>`` folders whose writer is dead."""
    out = []
    for p in root.glob("*/.*.tmp-*"):
        try:
            pid = int(p.name.rsplit("-", 1)[1])
        except ValueError:
            continue
        if not pid_alive(pid):
            out.append(p)
    return out


def python_argv(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", module, *args]


def step_signature(step: Step) -> tuple:
    """What the runner compares to see a step advance: its progress log's and outputs' names,
    sizes and modification times (an engine that only writes its log is not advancing)."""
    sig: list = []
    for p in [step.progress, *step.watch]:
        try:
            if p.is_dir():
                for q in sorted(p.rglob("*")):
                    if q.suffix == ".log" and q != step.progress:
                        continue  # an engine that only writes its log is not advancing
                    try:
                        st = q.stat()
                        sig.append((q.name, st.st_size, st.st_mtime_ns))
                    except FileNotFoundError:
                        continue
            else:
                st = p.stat()
                sig.append((p.name, st.st_size, st.st_mtime_ns))
        except FileNotFoundError:
            sig.append((p.name, -1))
    return tuple(sig)
