"""trace_split.py (issue #30: a profiled frame's device time by the stages/ function that
launched each kernel) on synthetic Chrome traces: kernels launched through the driver API
(Triton's and Inductor's cuLaunchKernel, category ``cuda_driver``) count where they were
launched, and an outer frame opened thousands of Python calls before a launch still counts."""

from __future__ import annotations

from tests.benchmarks.trace_split import split

DRAW = "/r/stages/engine/compute/targets.py(200): draw"
RAD = "/r/stages/engine/compute/merged.py(100): radiance"


def _py(ts: float, dur: float, name: str) -> dict:
    return {"ph": "X", "cat": "python_function", "tid": 1, "ts": ts, "dur": dur, "name": name}


def _launch(cat: str, ts: float, corr: int) -> dict:
    return {"ph": "X", "cat": cat, "tid": 1, "ts": ts, "dur": 1, "name": "launch",
            "args": {"correlation": corr}}


def _kernel(ts: float, dur: float, corr: int) -> dict:
    return {"ph": "X", "cat": "kernel", "tid": 7, "ts": ts, "dur": dur, "name": "k",
            "args": {"correlation": corr}}


def test_driver_api_launches_count_where_they_were_made() -> None:
    ev = [_py(0, 100, DRAW), _py(10, 50, RAD),
          _launch("cuda_runtime", 20, 1), _kernel(30, 5, 1),   # cudaLaunchKernel (aten)
          _launch("cuda_driver", 40, 2), _kernel(45, 7, 2)]    # cuLaunchKernel (Triton)
    inner, outer, total = split(ev)
    assert total == 12
    assert inner == {"compute/merged.py: radiance": 12}, inner
    assert outer == {"compute/merged.py: radiance": 12}, outer


def test_an_outer_frame_opened_long_before_the_launch_still_counts() -> None:
    # draw > radiance, then 5000 short Python calls (a compiled graph's launcher, say)
    ev = [_py(0, 10_000_000, DRAW), _py(1, 9_000_000, RAD)]
    ev += [_py(10 + 2 * i, 1, "/r/torch/x.py(1): f") for i in range(5000)]
    ev += [_launch("cuda_runtime", 20_000, 1), _kernel(20_010, 3, 1)]
    inner, outer, _ = split(ev)
    assert inner == {"compute/merged.py: radiance": 3}, inner
    assert outer == {"compute/merged.py: radiance": 3}, outer
