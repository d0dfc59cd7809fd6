"""Where a profiled frame's device time goes, by the project function that launched it
(issue #30): reads a torch.profiler Chrome trace recorded with ``with_stack=True``
(``bench_compute_frame.py --trace``) and sums every GPU kernel's, copy's and fill's duration by
the innermost and the outermost ``stages/`` Python frame around its launch.

    python tests/benchmarks/trace_split.py trace.json[.gz] [--top 40] [--cpu-ops]

``--cpu-ops`` sums CPU operators instead of kernels (a trace made on a machine without a GPU:
the same attribution, to check the script). Prints two tables and one JSON line.
"""

from __future__ import annotations

import argparse
import gzip
import json
from collections import defaultdict
from pathlib import Path

DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def load(path: Path) -> list[dict]:
    if path.suffix == ".gz":
        with gzip.open(path, "rt") as f:
            return json.load(f)["traceEvents"]
    with path.open() as f:
        return json.load(f)["traceEvents"]


def short(name: str) -> str:
    """``…/stages/engine/compute/merged.py(87): radiance`` → ``compute/merged.py: radiance``."""
    path, _, fn = name.partition(": ")
    path = path.split("stages/", 1)[-1].split("(", 1)[0]
    return f"{path.removeprefix('engine/')}: {fn}"


def split(events: list[dict], cpu_ops: bool = False) -> tuple[dict, dict, float]:
    """(device µs by innermost stages frame, by outermost stages frame, total µs)."""
    py: dict[int, list[tuple[float, float, str]]] = defaultdict(list)
    launches: dict[int, tuple[int, float]] = {}
    work: list[tuple[int | None, float, float, int]] = []  # (correlation, dur, ts, tid)
    for e in events:
        cat = e.get("cat", "")
        if e.get("ph") != "X":
            continue
        if cat == "python_function":
            py[e["tid"]].append((e["ts"], e["ts"] + e["dur"], e["name"]))
        # kernels launched through the runtime (aten's cudaLaunchKernel) or the driver API
        # (Triton's and Inductor's cuLaunchKernel: the compiled graphs)
        elif cat in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {}):
            launches[e["args"]["correlation"]] = (e["tid"], e["ts"])
        elif (cat in DEVICE_CATS and not cpu_ops) or (cat == "cpu_op" and cpu_ops):
            corr = e.get("args", {}).get("correlation")
            work.append((corr, float(e["dur"]), e["ts"], e["tid"]))
    # (launching thread, launch time, duration) of each piece of work
    items: list[tuple[int, float, float]] = []
    for corr, dur, ts, tid in work:
        if cpu_ops:
            items.append((tid, ts, dur))
        elif corr in launches:
            items.append((*launches[corr], dur))
        else:
            items.append((-1, ts, dur))
    inner: dict[str, float] = defaultdict(float)
    outer: dict[str, float] = defaultdict(float)
    total = 0.0
    for dur, around in _enclosing(py, items):
        total += dur
        ours = [f for f in around if "stages/" in f[2]]
        if not ours:
            inner["(outside stages/)"] += dur
            outer["(outside stages/)"] += dur
            continue
        ours.sort(key=lambda f: (f[0], -f[1]))
        names = [short(f[2]) for f in ours]
        top = [i for i, n in enumerate(names) if n.endswith(": draw")]
        below = names[top[0] + 1:] if top else names
        inner[names[-1]] += dur
        outer[" > ".join(below[:2]) or names[-1]] += dur
    return inner, outer, total


def _enclosing(py: dict[int, list[tuple[float, float, str]]],
               items: list[tuple[int, float, float]]
               ) -> list[tuple[float, list[tuple[float, float, str]]]]:
    """Each item's (thread, time, duration) duration and its thread's Python frames open at
    its time: one sweep per thread over the frames in start order, keeping the open ones on a
    stack (frames nest), however long ago the outer ones opened."""
    by_tid: dict[int, list[tuple[float, int]]] = defaultdict(list)
    for k, (tid, at, _) in enumerate(items):
        by_tid[tid].append((at, k))
    found: dict[int, list[tuple[float, float, str]]] = {}
    for tid, queries in by_tid.items():
        frames = sorted(py.get(tid, []), key=lambda f: (f[0], -f[1]))
        stack: list[tuple[float, float, str]] = []
        j = 0
        for at, k in sorted(queries):
            while j < len(frames) and frames[j][0] <= at:
                while stack and stack[-1][1] < frames[j][0]:
                    stack.pop()
                stack.append(frames[j])
                j += 1
            while stack and stack[-1][1] < at:
                stack.pop()
            found[k] = [f for f in stack if f[0] <= at <= f[1]]
    return [(dur, found[k]) for k, (_, _, dur) in enumerate(items)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("trace", type=Path)
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--cpu-ops", action="store_true")
    a = ap.parse_args()
    inner, outer, total = split(load(a.trace), a.cpu_ops)
    for title, d in (("the two stages/ frames under draw()", outer),
                     ("innermost stages/ frame", inner)):
        print(f"\n{title}: ms (share of {total / 1000:.1f} ms)")
        for k, v in sorted(d.items(), key=lambda kv: -kv[1])[:a.top]:
            print(f"{v / 1000:9.2f}  {100 * v / max(total, 1e-9):5.1f} %  {k}")
    print(json.dumps({"total_ms": round(total / 1000, 2),
                      "outer_ms": {k: round(v / 1000, 2) for k, v in outer.items()},
                      "inner_ms": {k: round(v / 1000, 2) for k, v in inner.items()}}))


if __name__ == "__main__":
    main()
