"""The node runner (DESIGN §6, paper §5.3, §8.2–8.3): every slot of this machine busy.

A slot is one engine process at a time, in its own process group, bound to one GPU (or a CPU
slot), with its own folder ``<work>/slots/<slot>/`` held by an ``flock`` for as long as the
runner or any of the slot's engine processes lives. Units of work (one level each, see
:mod:`stages.cluster.lifecycle`) are taken in order by free slots; a unit runs its steps —
Stage I, then Stage II for what Stage I produced — each in a fresh engine process.

The runner reads only progress logs and output sizes. A step whose progress log, outputs and
heartbeat have not changed for ``stall_timeout_s`` is killed as a group (reason ``stalled``);
one past its time limit likewise (``timeout``). A failed step leaves a snapshot, its partial
outputs are recovered, and it is retried in a fresh process up to ``retries`` times; then the
unit records a failure row and is not retried again in this run. An engine that runs out of
device memory is retried once fewer slots share its device (:mod:`.slot_limits`).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from ..config import NodeConfig
from ..core.device_faults import OOM_REASONS
from ..core.progress import COMPLETE, parse_progress
from .board import SlotBoard, SlotView
from .cgroup_memory import AT_SLOT_CAP, SlotCgroups, oom_kill_reason
from .gpus import SlotPlan, plan_slots, slot_env
from .lifetimes import AncestorWatch, kill_group, spawn_group, try_lock
from .slot_limits import SlotLimits, group_of, oom_group
from .snapshots import write_snapshot
from .step_end import classify, signal_name
from .steps import StagingError, Step, StepResult, Unit, UnitFailure, step_signature

POLL_S = 0.2


@dataclass
class _Running:
    unit: Unit
    step: Step
    proc: subprocess.Popen
    attempt: int
    started: float
    last_sig: tuple
    last_advance: float
    killed: str = ""
    wall_start: float = 0.0
    mem0: tuple[int, int] = (0, 0)  # the slot cgroup's (OOM kills, cap hits) at its start


@dataclass
class _Slot:
    plan: SlotPlan
    folder: Path
    lock: IO[str]
    unit: Unit | None = None
    run: _Running | None = None
    attempts: dict[str, int] = field(default_factory=dict)
    oom_retries: dict[str, int] = field(default_factory=dict)  # not counted as retries
    waiting: bool = False  # its next step waits for its device's limit


class NodeRunner:
    """Runs units on every slot of this machine until all are done."""

    def __init__(self, cfg: NodeConfig, node_id: str = "local", log: Callable[[str], Any] = print,
                 slots: list[SlotPlan] | None = None, watch_ancestors: list | None = None,
                 limits: SlotLimits | None = None):
        self.cfg, self.node_id, self.log = cfg, node_id, log
        self.work = Path(cfg.work_dir)
        self.snapshot_root = Path(cfg.snapshot_dir)
        self.plans = plans = plan_slots(cfg) if slots is None else slots
        self.slots: list[_Slot] = []
        self.failures: list[UnitFailure] = []
        self.results: list[StepResult] = []
        self._seq = 0
        self._slots_written = 0.0
        self._stop = ""
        self._watch = AncestorWatch(watch_ancestors or [], self._orphaned)
        self._claim_slots(plans)
        # running limits per device (slot_limits): a caller that runs several runners in turn
        # (the Ray service, one per lease batch) passes one, so a lowered limit stays lowered
        self.limits = limits if limits is not None else SlotLimits()
        self.limits.add([s.plan for s in self.slots])
        gib = 1 << 30
        self.cgroups = SlotCgroups([s.plan.slot for s in self.slots],
                                   int(cfg.slot_memory_gb * gib), int(cfg.memory_gb * gib))
        if not self.cgroups.available and (cfg.memory_gb or cfg.slot_memory_gb):
            self.log(f"node: memory caps off (node.memory_gb, node.slot_memory_gb): "
                     f"{self.cgroups.why}")

    # ------------------------------------------------------------------ slots

    def _claim_slots(self, plans: list[SlotPlan]) -> None:
        """Lock each slot folder; clean what an interrupted run left in it (Table 2, storage).
        A slot folder locked by a live process is neither cleaned nor used."""
        root = self.work / "slots"
        root.mkdir(parents=True, exist_ok=True)
        for p in plans:
            folder = root / p.slot
            lock = try_lock(root / f"{p.slot}.lock")
            if lock is None:
                self.log(f"node: slot {p.slot}: in use by a live process, skipped")
                continue
            if folder.exists():
                leftovers = sorted(x.name for x in folder.iterdir())
                if leftovers:
                    self.log(f"node: slot {p.slot}: cleaning leftovers of an interrupted run "
                             f"{leftovers[:4]}{'…' if len(leftovers) > 4 else ''}")
                shutil.rmtree(folder)
            folder.mkdir(parents=True)
            self.slots.append(_Slot(p, folder, lock))
        if not self.slots:
            raise RuntimeError(f"node: every slot under {root} is in use by a live process")

    def instance_id(self) -> str:
        """node id + UTC time + sequence number (paper §8.1): never the same twice."""
        import datetime as _dt

        stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%SZ")
        self._seq += 1
        return f"{self.node_id}-{stamp}-{os.getpid() % 100000:05d}{self._seq:04d}"

    # ------------------------------------------------------------------ the loop

    def run(self, units: list[Unit]) -> list[UnitFailure]:
        queue: deque[Unit] = deque(units)
        board = SlotBoard(self.cfg.display, self.log)
        old = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
        for s in old:
            signal.signal(s, self._on_signal)
        self._watch.start()
        try:
            while True:
                if self._stop:
                    raise SystemExit(f"node: {self._stop}: engine processes killed")
                for slot in self.slots:  # steps waiting for a device's lowered limit first
                    if slot.waiting:
                        self._next(slot)
                for slot in self.slots:  # then new units, only where a process may start now
                    if slot.unit is None and queue and self.limits.may_start(slot.plan):
                        self._assign(slot, queue.popleft())
                    if slot.run is not None:
                        self._poll(slot)
                views = [self._view(s) for s in self.slots]
                board.update(views, len(queue))
                self._write_slots(views, len(queue))
                if not queue and all(s.unit is None for s in self.slots):
                    break
                time.sleep(POLL_S)
        finally:
            self._kill_all()
            for s, h in old.items():
                signal.signal(s, h)
            board.close()
            self._write_slots([], 0, force=True)
            self.release()
        return self.failures

    def _write_slots(self, views: list[SlotView], queued: int, force: bool = False) -> None:
        """``<work>/slots.json``: each slot busy or idle and the queue (``cluster health``)."""
        now = time.time()
        if not force and now - self._slots_written < 1.0:
            return
        self._slots_written = now
        busy = {v.slot: v for v in views}
        rows = [{"slot": s.plan.slot, "level": busy[s.plan.slot].level if s.plan.slot in busy
                 else "", "stage": busy[s.plan.slot].stage if s.plan.slot in busy else "idle"}
                for s in self.slots]
        f = self.work / "slots.json"
        tmp = f.with_name(f".slots.json.{os.getpid()}")
        try:
            tmp.write_text(json.dumps({"updated": now, "pid": os.getpid(), "queued": queued,
                                       "slots": rows, "running_limits": self.limits.limit,
                                       "limits_lowered": self.limits.lowered()}))
            tmp.replace(f)
        except OSError:
            return  # a full disk must not stop the runner; health says the file is old

    def step_table(self) -> list[dict]:
        """One row per engine process this runner started (for reports and benchmarks)."""
        return [{"level_id": r.step.level_id, "stage": r.step.kind, "instance": r.step.instance,
                 "slot": r.slot, "attempt": r.attempt, "ok": r.ok, "reason": r.reason,
                 "trajectories": r.done, "started": r.started, "ended": r.ended}
                for r in self.results]

    def release(self) -> None:
        """Give the slot folders back (their locks); the runner cannot run again after."""
        for slot in self.slots:
            slot.lock.close()
        self.slots = []
        self.cgroups.close()

    def _on_signal(self, signum: int, _frame: Any) -> None:
        self._stop = signal.Signals(signum).name
        self._kill_all()

    def _orphaned(self) -> None:
        # dvc (or another watched ancestor) is gone: take the engines down and leave now
        self._kill_all()
        os._exit(3)

    def _kill_all(self) -> None:
        for slot in self.slots:
            if slot.run is not None and slot.run.proc.poll() is None:
                kill_group(slot.run.proc)

    def _assign(self, slot: _Slot, unit: Unit) -> None:
        slot.unit, slot.attempts, slot.oom_retries = unit, {}, {}
        try:
            unit.stage(slot.folder)
        except OSError as exc:
            self._unit_failed(slot, "stage_assets", "staging_failed", f"{exc}", 1, "")
            self._finish_unit(slot)
            return
        self._next(slot)

    def _next(self, slot: _Slot) -> None:
        assert slot.unit is not None
        slot.waiting = not self.limits.may_start(slot.plan)
        if slot.waiting:  # its device is at its limit after an out-of-memory (slot_limits)
            return
        try:
            step = slot.unit.next_step(slot.plan, slot.folder, self.instance_id())
        except StagingError as exc:  # staging again (the library changed) failed
            self._unit_failed(slot, exc.stage, "staging_failed", exc.detail, 1, "")
            self._finish_unit(slot)
            return
        if step is None:
            self._finish_unit(slot)
            return
        attempt = slot.attempts.get(step.kind, 0) + 1  # a unit never repeats a final step
        slot.attempts[step.kind] = attempt
        env = slot_env(slot.plan, {**os.environ, **step.env})
        fds: tuple[int, ...] = (slot.lock.fileno(),)
        if step.owner is not None:
            fds += (step.owner.fileno(),)
            env["WMFORGE_OWNER_LOCK_FD"] = str(step.owner.fileno())
        try:
            proc = spawn_group(step.argv, env, step.log, pass_fds=fds)
        finally:
            if step.owner is not None:
                step.owner.close()  # the engine process holds it now, for as long as it lives
        self.limits.started(slot.plan)
        self.cgroups.enter(slot.plan.slot, proc.pid)
        now = time.monotonic()
        slot.run = _Running(slot.unit, step, proc, attempt, now, step_signature(step), now,
                            wall_start=time.time(), mem0=self.cgroups.counters(slot.plan.slot))

    def _finish_unit(self, slot: _Slot) -> None:
        assert slot.unit is not None
        try:
            slot.unit.cleanup(slot.folder)
        finally:
            for child in list(slot.folder.iterdir()):
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child, ignore_errors=True)
                else:
                    child.unlink(missing_ok=True)
            slot.unit, slot.run = None, None

    # ------------------------------------------------------------------ watching a step

    def _poll(self, slot: _Slot) -> None:
        run = slot.run
        assert run is not None
        now = time.monotonic()
        rc = run.proc.poll()
        if rc is None:
            sig = step_signature(run.step)
            if sig != run.last_sig:
                run.last_sig, run.last_advance = sig, now
            elif now - run.last_advance > self.cfg.stall_timeout_s:
                run.killed = "stalled"
                kill_group(run.proc)
                rc = run.proc.returncode
            if rc is None and run.step.timeout_s and now - run.started > run.step.timeout_s:
                run.killed = "timeout"
                kill_group(run.proc)
                rc = run.proc.returncode
            if rc is None:
                return
        self._ended(slot, run, rc if rc is not None else -9)

    def _ended(self, slot: _Slot, run: _Running, rc: int) -> None:
        step = run.step
        peaks = self.limits.ended(slot.plan)
        done = len(self._progress(step))
        sig_name = signal_name(rc)
        reason, detail = classify(
            step, rc, run.killed, (step.folder / COMPLETE).exists(), self.cfg.stall_timeout_s,
            lambda sig: oom_kill_reason(self.cgroups, slot.plan.slot, run.mem0, sig, self.cfg))
        res = StepResult(step, not reason, reason, rc if rc >= 0 else None, sig_name, detail,
                         run.attempt, done, slot=slot.plan.slot, started=run.wall_start,
                         ended=time.time())
        slot.run = None
        oom = None
        if reason in OOM_REASONS:  # at its slot's own cap, fewer slots cannot help either
            oom = ("final" if AT_SLOT_CAP in detail else
                   self._oom_rule(slot, step.kind, reason, peaks))
        if oom == "final" and AT_SLOT_CAP not in detail:
            res.detail = detail = (f"{detail} (it ran alone on {oom_group(slot.plan, reason)}: "
                                   "fewer slots cannot help)")
        counted = run.attempt - slot.oom_retries.get(step.kind, 0)
        res.final = oom == "final" or (bool(reason) and oom is None
                                       and counted > self.cfg.retries)
        if reason:
            res.snapshot = str(write_snapshot(
                self.snapshot_root / self.node_id / step.instance, step=step, result=res,
                slot=slot.plan, log_path=step.log, progress_lines=self._progress_text(step)))
            self.log(f"node: {slot.plan.slot}: {run.unit.level_id}: {step.kind} attempt "
                     f"{run.attempt} failed ({reason}: {detail}); snapshot {res.snapshot}")
        self.results.append(res)
        run.unit.step_ended(res)  # its failure rows first: recovery may remove the folder
        if reason:
            run.unit.recover(step)
        if res.final:
            self._unit_failed(slot, step.kind, reason, detail, run.attempt, res.snapshot)
        self._next(slot)

    def _oom_rule(self, slot: _Slot, kind: str, reason: str, peaks: dict[str, int]) -> str:
        """``retry`` (the device's limit fell; the retry is not counted) or ``final``."""
        line = self.limits.on_oom(slot.plan, reason, peaks)
        if not line:
            return "final"
        assert slot.unit is not None
        slot.oom_retries[kind] = slot.oom_retries.get(kind, 0) + 1
        self.log(f"node: {slot.plan.slot}: {slot.unit.level_id}: {kind}: {reason}: {line}")
        return "retry"

    def _unit_failed(self, slot: _Slot, stage: str, reason: str, detail: str, attempts: int,
                     snapshot: str) -> None:
        assert slot.unit is not None
        self.failures.append(UnitFailure(slot.unit.unit_id, slot.unit.level_id, stage, reason,
                                         detail, attempts, snapshot))
        self.log(f"node: {slot.unit.level_id}: {stage} failed after {attempts} attempt(s): "
                 f"{reason}")

    @staticmethod
    def _progress_text(step: Step) -> str:
        try:
            return step.progress.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def _progress(self, step: Step) -> dict[str, tuple[int, str]]:
        return parse_progress(self._progress_text(step))

    def _view(self, slot: _Slot) -> SlotView:
        run = slot.run
        if run is None:
            state = ("idle" if slot.unit is None else
                     f"waiting for {group_of(slot.plan)}" if slot.waiting else "staging")
            return SlotView(slot.plan.slot, slot.plan.gpu.index if slot.plan.gpu else None,
                            slot.unit.level_id if slot.unit else "", state, 0, 0, 0, 0.0)
        prog = self._progress(run.step)
        frames = sum(f for f, _ in prog.values())
        return SlotView(slot.plan.slot, slot.plan.gpu.index if slot.plan.gpu else None,
                        run.unit.level_id, run.step.kind + (f" (try {run.attempt})"
                                                            if run.attempt > 1 else ""),
                        len(prog), run.step.total, frames, time.monotonic() - run.started)

