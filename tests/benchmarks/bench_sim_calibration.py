"""Measured costs and runs for the cluster simulation's calibration, on this machine, through
the real node runner (Stage I and II engine processes, slots, progress logs).

Costs (the model's inputs): Stage I per trajectory; Stage II's fixed cost per level and its
render speed with 1, 2, 3 renderers at once. Runs (what the model must predict): the whole
slot lifecycle (Stage I then II per level) over LEVELS levels x PER_LEVEL trajectories with 1
and with 2 slots, as trajectories per hour.

Run: .venv/bin/python tests/benchmarks/bench_sim_calibration.py \
         [--json tests/data/cluster_calibration.json]

With ``--cluster-json OUT`` (the JSON of tests/benchmarks/bench_cluster.py, run just before on
the same machine) the costs are measured at that benchmark's settings (its library, its three
levels, 48 frames at 192x108 with 2x2 samples, two trajectories a level) and the runs to predict
are its Ray runs through 1 and 3 nodes.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from stages.config import load_params  # noqa: E402

SIZE, FRAMES, SPATIAL, TEMPORAL = "320x180", 90, 1, 1
LEVELS, PER_LEVEL = 4, 2
EXTRA: list[str] = []


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default="")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--cluster-json", default="")
    args = ap.parse_args()
    global SIZE, FRAMES, SPATIAL, TEMPORAL, LEVELS, PER_LEVEL, EXTRA
    cluster = json.loads(Path(args.cluster_json).read_text()) if args.cluster_json else None
    if cluster:  # bench_cluster.py's settings (tests.conftest.small_render_cfg)
        SIZE, FRAMES, SPATIAL, TEMPORAL = "192x108", cluster["runs"][0]["frames"], 2, 2
        LEVELS, PER_LEVEL = 3, 2
        EXTRA = ["render.mask_scale=1", "render.warmup_frames=2"]
    from stages.cluster.lifecycle import make_trajectories, render_trajectories, run_levels
    from stages.inventory import run_inventory
    from stages.sample_library import build_sample_library

    load0 = os.getloadavg()[0]  # other jobs on the machine make every figure noisy
    tmp = Path(tempfile.mkdtemp(prefix="wmforge-bench-simcal-"))
    w, h = SIZE.split("x")

    def cfg_for(slots: int, levels: list[str], per_level: int):
        return load_params(overrides=[
            "sample_library.include_wheel_assets=false", f"trajectories.per_level={per_level}",
            f"trajectories.frames={FRAMES}", f"trajectories.levels=[{','.join(levels)}]",
            "trajectories.characters=[CharacterPack/Alex]", f"render.width={w}",
            f"render.height={h}", f"render.spatial_samples={SPATIAL}",
            f"render.temporal_samples={TEMPORAL}", f"node.work_dir={tmp}/work",
            f"node.snapshot_dir={tmp}/work/snapshots", "node.display=plain",
            f"node.cpu_slots={slots}", *EXTRA])

    lib = tmp / "lib"
    cfg0 = cfg_for(1, ["UrbanBlocks/Downtown"], 1)
    if cluster:
        from stages.config import SampleLibraryConfig

        build_sample_library(lib, SampleLibraryConfig())
    else:
        build_sample_library(lib, cfg0.sample_library)
    inv = run_inventory(lib, cfg0.inventory, "overrides.yaml")
    quiet = lambda m: None  # noqa: E731
    # the first LEVELS levels that make trajectories (the sample library has broken ones on
    # purpose: they are screened out before production)
    trajs = tmp / "probe"
    enabled = inv.levels[inv.levels["enabled"].astype(bool)]
    cands = sorted(enabled["level_id"].astype(str))[:LEVELS + (0 if cluster else 3)]
    make_trajectories(cfg_for(2, cands, 1), inv.levels, inv.characters, lib, trajs, log=quiet)
    levels = [lv for lv in cands if (trajs / lv.replace("/", "__") / "traj_0000").exists()]
    levels = levels[:LEVELS]
    if len(levels) < LEVELS:
        raise SystemExit(f"only {levels} of {cands} make trajectories")
    print(f"levels: {levels}", flush=True)

    # Stage I: 3 trajectories of every level, one slot
    trajs = tmp / "traj"
    c = cfg_for(1, levels, 3)
    t0 = time.perf_counter()
    fails = make_trajectories(c, inv.levels, inv.characters, lib, trajs, log=quiet)
    s1 = (time.perf_counter() - t0) / (3 * len(levels))
    if not fails.empty:
        raise SystemExit(f"stage I failed: {fails.to_dict('records')}")
    print(f"stage I: {s1:.2f} s per trajectory (1 slot)", flush=True)

    def render(slots: int, lv: list[str], k: int) -> float:
        sub = tmp / f"sub_{slots}_{len(lv)}_{k}_{time.monotonic_ns()}"
        for level in lv:
            d = level.replace("/", "__")
            for i in range(k):
                shutil.copytree(trajs / d / f"traj_{i:04d}", sub / d / f"traj_{i:04d}")
        cc = cfg_for(slots, lv, k)
        t = time.perf_counter()
        index, rf = render_trajectories(cc, sub, sub.with_name(sub.name + "_r"), cc.render,
                                        log=quiet, library=lib)
        wall = time.perf_counter() - t
        if len(index) != len(lv) * k or not rf.empty:
            raise SystemExit(f"render {slots} slots: {len(index)} of {len(lv) * k}")
        return wall

    # Stage II, one slot: every level with 1 and with 3 trajectories → fixed cost and speed
    # alone, over the same levels the runs use (levels render at different speeds)
    walls_a = {lv: render(1, [lv], 1) for lv in levels}
    walls_b = {lv: render(1, [lv], 3) for lv in levels}
    t_a = sum(walls_a.values()) / len(levels)
    t_b = sum(walls_b.values()) / len(levels)
    per_traj = (t_b - t_a) / 2
    # each level's render time against the average (levels differ: a run of one unit per node
    # ends with its slowest level)
    per_level = {lv: (walls_b[lv] - walls_a[lv]) / 2 for lv in levels}
    level_factor = {lv: round(v / per_traj, 3) for lv, v in per_level.items()}
    fixed = max(0.0, t_a - per_traj)  # a difference of two walls: noise can make it < 0
    fps = {1: round(FRAMES / per_traj, 3)}
    # n renderers at once: n levels x 3 trajectories on n slots
    for n in (2, 3):
        wall = render(n, levels[:n], 3)
        # at the average level's speed: these n levels' mean render cost is taken out (the
        # model applies each level's factor itself)
        mean_factor = sum(level_factor[lv] for lv in levels[:n]) / n
        fps[n] = round(3 * n * FRAMES * mean_factor / (wall - fixed), 3)
    print(f"stage II: fixed {fixed:.2f} s per level, five-view frames/s by renderers {fps}, "
          f"render time by level against the average {level_factor}", flush=True)

    runs = []
    # repeated runs of one set-up (bench_cluster.py --repeat) are compared by their mean; the
    # spread is kept with them
    groups: dict[tuple[int, bool], list[dict]] = {}
    for r in (cluster or {}).get("runs", []):
        groups.setdefault((int(r["nodes"]), "kill" in r), []).append(r)

    def mean(rs: list[dict], key: str) -> float:
        return round(sum(float(r[key]) for r in rs) / len(rs), 2)

    def add_run(n: int, killed: bool, rs: list[dict], group: str) -> None:
        at = mean([{"a": r["kill"][0][1]} for r in rs], "a") if killed else 0.0
        walls = [r["wall_s"] for r in rs]
        runs.append({"name": f"Ray, {n} node(s) x 1 CPU slot, {LEVELS} levels x {PER_LEVEL} "
                     "(bench_cluster.py)" + (f", n1 removed at {at} s" if killed else "")
                     + (f", mean of {len(rs)}" if len(rs) > 1 else ""),
                     "nodes": n, "slots_per_node": 1, "levels": LEVELS,
                     "level_ids": levels, "node_names": [f"n{i + 1}" for i in range(n)],
                     "passes": 1, "barrier": True, "repeats": len(rs),
                     "wall_s": mean(rs, "wall_s"), "wall_s_each": walls,
                     # each run's start-up (first leases) and wrap-up after its last unit
                     "start_s": mean(rs, "start_s"),
                     "end_s": round(sum(max(0.0, r["wall_s"] - max(
                         (w[1] for w in r.get("unit_lease_s", {}).values()),
                         default=r["wall_s"])) for r in rs) / len(rs), 2),
                     "measured_trajectories_per_hour": round(
                         sum(r["trajectories"] for r in rs) / sum(walls) * 3600, 1)})
        if group:
            runs[-1]["group"] = group
        if killed:  # recovery: removal → the units n1 had leased completed elsewhere
            # the detection delay is measured (the allocator let the node go), an input
            runs[-1].update(kill=[[0, at]], measured_recovery_s=mean(rs, "recovery_s"),
                            detection_s=mean(rs, "detection_s"),
                            units_in_flight=rs[0]["units_in_flight"],
                            delivered_at_kill=[r.get("delivered_at_kill", -1) for r in rs])

    for (n, killed), rs_all in sorted(groups.items()):
        if killed:
            # removal runs one by one: each run's detection delay and removal time are its
            # own inputs (a late detection lets the others finish first: averaging the inputs
            # would blur that); calibrate.py gates on the group's mean
            for r in rs_all:
                add_run(n, True, [r], f"Ray, {n} nodes, n1 removed" if len(rs_all) > 1 else "")
        else:
            add_run(n, False, rs_all, "")
    for slots in (() if cluster else (1, 2)):
        c = cfg_for(slots, levels, PER_LEVEL)
        out = tmp / f"run_{slots}"
        t = time.perf_counter()
        res = run_levels(c, inv.levels, inv.characters, lib, out / "traj", out / "renders",
                         log=quiet)
        wall = time.perf_counter() - t
        made = len(res["index"])
        if made != LEVELS * PER_LEVEL:
            raise SystemExit(f"run {slots} slots: {made} of {LEVELS * PER_LEVEL} rendered")
        runs.append({"name": f"1 node, {slots} slot(s), {LEVELS} levels x {PER_LEVEL}",
                     "nodes": 1, "slots_per_node": slots, "levels": LEVELS, "passes": 1,
                     "barrier": False, "wall_s": round(wall, 2),
                     "measured_trajectories_per_hour": round(made / wall * 3600, 1)})
        print(f"run {slots} slot(s): {made} trajectories in {wall:.1f} s = "
              f"{runs[-1]['measured_trajectories_per_hour']} per hour", flush=True)
    # the runner's per-unit overhead inside the cluster (engine process starts, staging, the
    # allocator's round trips, the upload check) is fitted on the 1-node run alone: its wall
    # minus what the model makes of it without the overhead, over its units. The 3-node and
    # node-removal runs are then predictions (gated); the 1-node run is the fit (not gated).
    costs = {"frames_per_trajectory": FRAMES, "trajectories_per_unit": PER_LEVEL,
             "stage1_s_per_trajectory": round(s1, 3), "load_s": round(fixed, 3),
             "render_fps": {str(k): v for k, v in fps.items()}, "unit_overhead_s": 0.0,
             "level_factor": level_factor}
    fit = next((r for r in runs if r["nodes"] == 1 and "kill" not in r), None)
    if fit is not None:
        from stages.cluster.simulate.calibrate import predict_run

        made = predict_run({"costs": costs, "source": "", "machine": "", "date": ""}, fit)
        units = int(fit["levels"]) * int(fit.get("passes", 1))
        costs["unit_overhead_s"] = round(max(0.0, (fit["wall_s"] - made["model_makespan_s"])
                                             / units), 2)  # model_makespan_s has end_s
        fit.update(gate=False, why="the fit run: the per-unit overhead (costs.unit_overhead_s) "
                   "is fitted on it")
        print(f"per-unit overhead in the cluster: {costs['unit_overhead_s']} s (1-node run "
              f"{fit['wall_s']} s, model without it {made['model_makespan_s']} s, {units} "
              "units)", flush=True)
    rec = {
        "what": ("the 3-node Ray test cluster on one machine (runs: bench_cluster.py; costs: "
                 "the node runner at its settings)" if cluster else
                 "the node runner on one machine (no cluster benchmark)"),
        "source": "tests/benchmarks/bench_sim_calibration.py" + (
            " --cluster-json (bench_cluster.py)" if cluster else ""), "machine":
        f"{platform.node() or 'dev'}: {os.cpu_count()} cores, {platform.machine()}, "
        f"llvmpipe (no GPU); load average {load0:.1f} when this bench started",
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "tolerance": 0.15,
        # recovery = detection (measured, an input) + what the model predicts: re-lease,
        # reload and re-render of the dead node's units; that part within 30 %
        "recovery_rel_tolerance": 0.3,
        "settings": {"size": SIZE, "frames": FRAMES, "spatial": SPATIAL, "temporal": TEMPORAL,
                     "levels": levels},
        "costs": costs,
        "runs": runs}
    print(json.dumps(rec, indent=1))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(rec, indent=1) + "\n")
    if not args.keep:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
