"""Calibration: the model against measured runs, before any 25 × 8 figure.

1. The H200 node-runner column (README Benchmarks): the model, fed the harness throughput and
   the 1-slot fixed cost, predicts the runner's five-view frames/s at 4, 8 and 16 slots (the
   renderer before the look) and at 16 slots with the look (deferred shading).
2. The test cluster (``tests/data/cluster_calibration.json``, written by a benchmark on this
   machine): costs measured there, runs measured there; the model predicts each run's
   throughput (and recovery after a node is removed) from the costs alone.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from .config import SimConfig
from .model import ClusterSim
from .profiles import (
    H200_BENCH_FRAMES,
    H200_NODE_RUNNER_FPS,
    H200_NODE_RUNNER_FPS_LOOK,
    CostProfile,
    embedded_h200,
)

H200_TOLERANCE = 0.06  # relative, per slot count
MEASUREMENT = Path(__file__).resolve().parents[3] / "tests" / "data" / "cluster_calibration.json"


def h200_node_runner() -> dict:
    """Each of n slots renders one 300-frame trajectory of its own level (bench_node.py)."""
    rows = []
    runs = [(False, n, v) for n, v in sorted(H200_NODE_RUNNER_FPS.items())]
    runs += [(True, n, v) for n, v in sorted(H200_NODE_RUNNER_FPS_LOOK.items())]
    for look, n, measured in runs:
        prof = embedded_h200(look).scaled(frames_per_trajectory=H200_BENCH_FRAMES,
                                          trajectories_per_unit=1, stage1_s_per_frame=0.0)
        cfg = SimConfig(profile=prof.name, nodes=1, gpus_per_node=1, slots_per_gpu=n,
                        levels=n, passes=1, finite=True, steady_start=False, horizon_h=10.0,
                        warmup_h=0.0,
                        poll_s=1.0)
        fig = ClusterSim(cfg, prof).run()
        pred = n * H200_BENCH_FRAMES / fig["makespan_s"]
        rows.append({"slots": f"{n}, the look" if look else n, "measured_fps": measured,
                     "predicted_fps": round(pred, 2),
                     "error": round(pred / measured - 1, 4)})
    ok = all(abs(r["error"]) <= H200_TOLERANCE for r in rows)
    return {"what": "H200 node runner, Stage II, one 300-frame trajectory per slot (README "
                    "Benchmarks, bench_node.py, 2026-12-03 before the look and 2026-12-04 with "
                    "it, deferred shading)", "tolerance": H200_TOLERANCE,
            "rows": rows, "ok": ok}


def measured_profile(m: dict) -> CostProfile:
    c = m["costs"]
    return CostProfile(
        name="test-cluster", source=f"measured: {m['source']} on {m['machine']}, {m['date']}",
        gpu_fps={int(k): float(v) for k, v in c["render_fps"].items()},
        frames_per_trajectory=int(c["frames_per_trajectory"]),
        trajectories_per_unit=int(c["trajectories_per_unit"]),
        stage1_s_per_frame=float(c["stage1_s_per_trajectory"]) / int(c["frames_per_trajectory"]),
        # a unit's load: the level load plus the runner's per-unit overhead (engine process
        # starts, staging, the allocator's round trips, the upload check)
        cold_load_s=float(c["load_s"]) + float(c.get("unit_overhead_s", 0.0)),
        warm_load_s=float(c["load_s"]) + float(c.get("unit_overhead_s", 0.0)),
        default_slots_per_gpu=1,
        level_factor={k: float(v) for k, v in c.get("level_factor", {}).items()})


def predict_run(m: dict, run: dict) -> dict:
    prof = measured_profile(m)
    cfg = SimConfig(profile=prof.name, nodes=int(run["nodes"]), gpus_per_node=1,
                    slots_per_gpu=int(run["slots_per_node"]), levels=int(run["levels"]),
                    passes=int(run.get("passes", 1)), finite=True, one_host=True,
                    steady_start=False,
                    barrier=bool(run.get("barrier", True)), horizon_h=100.0, warmup_h=0.0,
                    poll_s=float(run.get("poll_s", 0.5)), lease_s=float(run.get("lease_s", 120)),
                    detection_s=float(run.get("detection_s", 5.0)), node_return_s=-1.0,
                    start_s=float(run.get("start_s", 0.0)),
                    kill=[list(k) for k in run.get("kill", [])],
                    node_names=list(run.get("node_names", [])),
                    level_ids=list(run.get("level_ids", [])))
    fig = ClusterSim(cfg, prof).run()
    # the run's measured shut-down after its last unit (the last uploads' quiet time, the
    # runners' summaries, the actors' teardown) is a boundary input, like its start-up
    makespan = round(fig["makespan_s"] + float(run.get("end_s", 0.0)), 1)
    tph = fig["trajectories_made"] / makespan * 3600
    out = {"name": run["name"], "model_makespan_s": makespan,
           "measured_wall_s": run.get("wall_s"), "measured_trajectories_per_hour":
           run["measured_trajectories_per_hour"], "predicted_trajectories_per_hour":
           round(tph, 1), "error": round(tph / run["measured_trajectories_per_hour"] - 1, 4)}
    if "measured_recovery_s" in run:
        # recovery = detection (measured on the run: an input) + what the model predicts:
        # the moved units leased again, reloaded and rendered again; the error is on that part
        rec = fig["failures"]["recovery_s_mean"]
        det = float(run.get("detection_s", 5.0))
        after = run["measured_recovery_s"] - det
        out.update(measured_recovery_s=run["measured_recovery_s"], predicted_recovery_s=rec,
                   detection_s=det, measured_after_detection_s=round(after, 1),
                   predicted_after_detection_s=round(rec - det, 1),
                   recovery_error=round((rec - det) / after - 1, 4) if after > 0 else 9.99)
    return out


def test_cluster(path: Path = MEASUREMENT) -> dict:
    if not path.exists():
        return {"what": f"test cluster: {path.name} missing", "ok": False, "rows": []}
    m = json.loads(path.read_text())
    tol = float(m["tolerance"])
    rec_tol = float(m.get("recovery_rel_tolerance", 0.0))
    rows = []
    groups: dict[str, list[dict]] = {}
    for run in m["runs"]:
        r = predict_run(m, run)
        # a run marked gate: false is shown with its error and the reason, not gated on
        r["gated"] = bool(run.get("gate", True))
        r["why_not_gated"] = run.get("why", "")
        if run.get("group"):  # a repeat: predicted with its own inputs, gated by its group
            r["gated"] = False
            r["why_not_gated"] = f"a repeat of {run['group']!r}: gated by the group's mean"
            groups.setdefault(run["group"], []).append(r)
        rows.append(r)
    for name, rs in groups.items():  # the group: mean of the predictions, mean of the runs
        def mean(key: str, rs: list[dict] = rs) -> float:
            return sum(float(r[key]) for r in rs) / len(rs)

        meas, pred = mean("measured_trajectories_per_hour"), mean(
            "predicted_trajectories_per_hour")
        g: dict = {"name": f"{name} (mean of {len(rs)})", "gated": True, "why_not_gated": "",
                   "measured_trajectories_per_hour": round(meas, 1),
                   "predicted_trajectories_per_hour": round(pred, 1),
                   "error": round(pred / meas - 1, 4)}
        if all("measured_recovery_s" in r for r in rs):
            after_m, after_p = mean("measured_after_detection_s"), mean(
                "predicted_after_detection_s")
            g.update(measured_recovery_s=round(mean("measured_recovery_s"), 1),
                     predicted_recovery_s=round(mean("predicted_recovery_s"), 1),
                     detection_s=round(mean("detection_s"), 1),
                     measured_after_detection_s=round(after_m, 1),
                     predicted_after_detection_s=round(after_p, 1),
                     recovery_error=round(after_p / after_m - 1, 4) if after_m > 0 else 9.99)
        rows.append(g)
    ok = all(abs(r["error"]) <= tol and (
        "recovery_error" not in r or abs(r["recovery_error"]) <= rec_tol)
        for r in rows if r["gated"])
    return {"what": f"{m['what']} ({m['machine']}, {m['date']})", "source": m["source"],
            "tolerance": tol, "recovery_rel_tolerance": rec_tol, "rows": rows, "ok": ok,
            "costs": m["costs"]}


def calibration(path: Path = MEASUREMENT) -> dict:
    return {"h200_node_runner": h200_node_runner(), "test_cluster": test_cluster(path)}


__all__ = ["calibration", "h200_node_runner", "test_cluster", "replace"]
