"""A stand-in for a renderer (named as such), for tests about scheduling alone: the real node
runner runs it as an engine process, it writes the render layout and the progress protocol
exactly as the real renderer does, but its "videos" are seeded bytes, not MP4s.

``python -m tests.fakes.engine_standin <instance dir>`` reads ``instance.json`` (jobs:
name + key, ``frame_s``, ``bytes``) and for each job sleeps ``frames * frame_s``, writes
``<traj>/back.mp4`` and ``<traj>/meta.json``, appends its progress line and one line to the
shared render journal (so a test can count how often each trajectory was made); then COMPLETE.

:class:`FakeEngineUnit` is the unit of work around it (one level and pass of a lease), and
:func:`standin_unit` its factory: the Ray executor's node runners make their units with it when
a job's ``unit_kind`` names it (``STANDIN``, a ``module:function`` path). Production code never
imports this module: each Ray worker imports it by that path, so this checkout must be on the
workers' ``PYTHONPATH`` (the cluster tests start Ray with it; ``wmforge cluster run --standin``
from the repository root has it through Ray, which puts the driver's directory on its workers'
path); the engine processes get it from :func:`engine_env`.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import sys
import time
from pathlib import Path

from stages.cluster.gpus import SlotPlan
from stages.cluster.recovery import level_parts
from stages.cluster.steps import Step, StepResult, python_argv
from stages.config import WmforgeConfig
from stages.core.progress import COMPLETE, PROGRESS, append_progress, read_progress

STANDIN = "tests.fakes.engine_standin:standin_unit"  # NodeJob.unit_kind of a stand-in run
CHECKOUT = Path(__file__).resolve().parents[2]


def engine_env() -> dict[str, str]:
    """The engine process imports this module, and the stages of this checkout, from any
    working directory: the checkout first on its PYTHONPATH."""
    rest = os.environ.get("PYTHONPATH", "")
    return {"PYTHONPATH": os.pathsep.join([str(CHECKOUT), *([rest] if rest else [])])}


def traj_render_key(level_id: str, pass_index: int, traj: str) -> str:
    return hashlib.sha256(f"{level_id}\0{pass_index}\0{traj}".encode()).hexdigest()[:16]


def main(inst_dir: str) -> int:
    inst = Path(inst_dir)
    spec = json.loads((inst / "instance.json").read_text())
    for job in spec["jobs"]:
        time.sleep(spec["frames"] * spec["frame_s"])
        d = inst / job["name"]
        d.mkdir(exist_ok=True)
        rng = random.Random(job["key"])
        (d / "back.mp4").write_bytes(rng.randbytes(int(spec["bytes"])))
        (d / "meta.json").write_text(json.dumps({"key": job["key"], "standin": True}))
        append_progress(inst / PROGRESS, job["name"], spec["frames"], job["key"])
        with open(spec["journal"], "a") as j:  # O_APPEND: one whole line per write
            j.write(f"{spec['level_id']} {job['name']} {job['key']} {inst.name}\n")
    (inst / COMPLETE).write_text("")
    return 0


class FakeEngineUnit:
    """A lease's unit rendered by the stand-in: ``per_level`` trajectories of one level/pass,
    skipping those already delivered (``delivered``: (scene/level, traj, key))."""

    def __init__(self, level_id: str, pass_index: int, per_level: int, render_root: Path,
                 journal: Path, delivered: set[tuple[str, str, str]], frames: int = 24,
                 frame_s: float = 0.02, nbytes: int = 200_000):
        self.level_id, self.pass_index = level_id, pass_index
        self.unit_id = f"{level_id}#pass{pass_index}"
        self.root, self.journal, self.delivered = render_root, journal, delivered
        self.frames, self.frame_s, self.nbytes = frames, frame_s, nbytes
        first = pass_index * per_level
        self.names = [f"traj_{i:04d}" for i in range(first, first + per_level)]
        self.finished: set[str] = set()
        self.done = False

    def stage(self, slot_dir: Path) -> None:
        return None

    def cleanup(self, slot_dir: Path) -> None:
        return None

    def jobs(self) -> list[dict]:
        scene, level = level_parts(self.level_id)
        out = []
        for n in self.names:
            key = traj_render_key(self.level_id, self.pass_index, n)
            if n in self.finished or (f"{scene}/{level}", n, key) in self.delivered:
                continue
            out.append({"name": n, "key": key})
        return out

    def next_step(self, slot: SlotPlan, slot_dir: Path, instance: str) -> Step | None:
        jobs = self.jobs()
        if self.done or not jobs:
            return None
        scene, level = level_parts(self.level_id)
        inst = self.root / scene / level / instance
        inst.mkdir(parents=True)
        (inst / "instance.json").write_text(json.dumps({
            "level_id": self.level_id, "jobs": jobs, "frames": self.frames,
            "frame_s": self.frame_s, "bytes": self.nbytes, "journal": str(self.journal)}))
        return Step("render", instance, python_argv("tests.fakes.engine_standin", str(inst)),
                    inst, inst / PROGRESS, inst / "renderer.log", [inst], 0.0, len(jobs), "",
                    self.level_id, env=engine_env())

    def step_ended(self, result: StepResult) -> None:
        self.finished |= set(read_progress(result.step.folder))
        if result.ok or result.final:
            self.done = True

    def recover(self, step: Step) -> None:
        """Keep the trajectories with a progress line; remove the rest (as recovery does)."""
        done = read_progress(step.folder)
        for child in step.folder.iterdir():
            if child.is_dir() and child.name not in done:
                shutil.rmtree(child)
        if not done:
            shutil.rmtree(step.folder)
        else:
            (step.folder / "RECOVERED").write_text("")


def standin_unit(lease: dict, cfg: WmforgeConfig, renders: Path,
                 delivered: set[tuple[str, str, str]], journal: str,
                 frame_s: float = 0.02, nbytes: int = 200_000) -> FakeEngineUnit:
    """The unit of a lease (``level_id``, ``pass_index``) rendered by the stand-in: the node's
    ``cfg.trajectories.per_level`` trajectories into ``renders`` (a "video" of ``nbytes``
    each), a journal line for each."""
    return FakeEngineUnit(lease["level_id"], int(lease["pass_index"]), cfg.trajectories.per_level,
                          renders, Path(journal), delivered, frame_s=frame_s, nbytes=nbytes)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main(sys.argv[1]))
