"""The scoring stage's decode workers die with the stage: a kill -9 of the stage (``dvc repro``
stopped by hand) once left its spawn-pool workers idle for an hour."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time

from stages.cluster.lifetimes import pid_alive
from tests.conftest import gone_within


def _stage(q) -> None:  # stands for the score stage's process: its real pool set-up
    from concurrent.futures import ProcessPoolExecutor

    from stages.score import _init_worker

    ex = ProcessPoolExecutor(1, mp_context=mp.get_context("spawn"), initializer=_init_worker,
                             initargs=(None, os.getpid()))
    q.put(ex.submit(os.getpid).result())
    time.sleep(600)


def test_a_kill_9_of_the_scoring_stage_takes_its_decode_workers_along():
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    stage = ctx.Process(target=_stage, args=(q,))
    stage.start()
    try:
        worker = q.get(timeout=120)
        assert pid_alive(worker) and worker != stage.pid
        os.kill(stage.pid, signal.SIGKILL)
        stage.join(timeout=30)
        assert gone_within(worker, 30), f"decode worker {worker} outlived the stage"
    finally:
        if stage.is_alive():
            stage.kill()
