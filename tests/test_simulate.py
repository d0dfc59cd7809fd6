"""The cluster simulation (issue 16): the real allocator policy inside a SimPy model, calibrated
on measured runs; pools against uniform; node losses; determinism; the report."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from stages.cluster.allocator_policy import AllocatorPolicy
from stages.cluster.pool_plan import assign
from stages.cluster.simulate.calibrate import H200_TOLERANCE, MEASUREMENT, h200_node_runner
from stages.cluster.simulate.calibrate import test_cluster as cluster_calibration
from stages.cluster.simulate.config import SimConfig, apply_sets
from stages.cluster.simulate.model import ClusterSim
from stages.cluster.simulate.profiles import (
    H200_HARNESS_FPS,
    H200_HARNESS_FPS_LOOK,
    H200_NODE_RUNNER_FPS,
    H200_NODE_RUNNER_FPS_LOOK,
    PAPER_MIN_PER_NODE_HOUR,
    unreal_paper,
)
from stages.cluster.simulate.scenarios import UE, base

ROOT = Path(__file__).resolve().parents[1]


def small(**kw: object) -> SimConfig:
    """4 nodes x 2 GPUs of the Unreal profile, one trajectory per lease (loads weigh); a
    node caches 12 levels: its pool (10) fits, the whole list (40) does not."""
    c = SimConfig(profile=UE, nodes=4, gpus_per_node=2, levels=40, horizon_h=10.0,
                  warmup_h=2.0, trajectories_per_unit=1, cache_levels=12)
    return replace(c, **kw)  # type: ignore[arg-type]


def test_profile_numbers_are_the_documented_benchmarks():
    """The embedded H200 profile carries the measured node-runner table of docs/benchmarks.md
    as is."""
    text = (ROOT / "docs" / "benchmarks.md").read_text()
    rows = re.findall(r"^\| (\d+) \| ([\d.]+) \| (?:\*\*)?([\d.]+)(?:\*\*)?[^|]*\| ([\d.]+) \|",
                      text, re.M)
    table = {int(s): (float(runner), float(harness)) for s, runner, _, harness in rows}
    assert {s: table[s][0] for s in H200_NODE_RUNNER_FPS} == H200_NODE_RUNNER_FPS
    assert {s: table[s][1] for s in H200_HARNESS_FPS} == H200_HARNESS_FPS
    # with the look (deferred shading): the harness curve and the 16-slot runner
    look = dict(re.findall(r"^\| (\d+), the look, deferred shading \| ([\d.]+) \|", text, re.M))
    assert {int(k): float(v) for k, v in look.items()} == H200_HARNESS_FPS_LOOK
    runner = re.search(r"^\| 16, PBR look, \*\*deferred shading\*\*[^|]*\| ([\d.]+) \|", text, re.M)
    assert runner and {16: float(runner.group(1))} == H200_NODE_RUNNER_FPS_LOOK


def test_model_reproduces_the_h200_node_runner():
    """Fed the harness throughput and the 1-slot fixed cost, the model predicts the runner's
    five-view frames/s at 4, 8 and 16 slots within the stated tolerance."""
    cal = h200_node_runner()
    assert cal["ok"], cal
    assert all(abs(r["error"]) <= H200_TOLERANCE for r in cal["rows"])
    assert {r["slots"] for r in cal["rows"]} == {1, 4, 8, 16, "16, the look"}


def test_model_reproduces_the_measured_test_cluster():
    """The committed measurement (bench_cluster.py's Ray runs, one with a node removed; costs
    from the node runner at its settings, this machine): the model predicts each gated run's
    throughput from the costs within the file's tolerance, and the removal run's recovery time
    within its recovery tolerance; a run not gated (the fit run) carries its reason."""
    m = json.loads(MEASUREMENT.read_text())
    assert m["machine"] and m["date"] and 0 < m["tolerance"] <= 0.2
    cal = cluster_calibration()
    groups = {r["group"] for r in m["runs"] if r.get("group")}
    assert len(cal["rows"]) == len(m["runs"]) + len(groups) >= 2  # + one row per group
    gated = [r for r in cal["rows"] if r["gated"]]
    assert gated and all(abs(r["error"]) <= m["tolerance"] for r in gated), cal["rows"]
    assert all(r["why_not_gated"] for r in cal["rows"] if not r["gated"])
    # a gated run with a node removed: its recovery time (removal → the node's leased units
    # completed elsewhere) minus the measured detection delay, within the file's relative
    # recovery tolerance too
    removed = [r for r in gated if "measured_recovery_s" in r]
    assert removed and 0 < m["recovery_rel_tolerance"] <= 0.3, cal["rows"]
    assert all(abs(r["recovery_error"]) <= m["recovery_rel_tolerance"] for r in removed)
    assert all(r["measured_after_detection_s"] > 0 and r["predicted_after_detection_s"] > 0
               for r in removed)
    assert cal["ok"]


def test_unreal_profile_reproduces_the_paper():
    cfg = replace(base(UE, 0, quick=False), scheduler="pool")
    got = ClusterSim(cfg).run()["five_view_min_per_node_hour"]
    assert got == pytest.approx(PAPER_MIN_PER_NODE_HOUR, rel=0.03)


def test_the_policy_is_the_real_one():
    sim = ClusterSim(small(horizon_h=3.0, warmup_h=1.0))
    sim.run()
    pol = sim.sched.policy  # type: ignore[union-attr]
    assert type(pol) is AllocatorPolicy
    assert pol.owner == assign(pol.levels, [n.name for n in sim.nodes])
    per_node = {n: c.completed for n, c in pol.counts.items()}
    assert sum(per_node.values()) == len(pol.done) > 0


def test_pool_beats_uniform_when_cold_loads_cost_and_ties_when_free():
    cold = {s: ClusterSim(small(scheduler=s, cold_load_s=1200, warm_load_s=480)).run()
            for s in ("pool", "uniform")}
    gain = (cold["pool"]["five_view_min_per_node_hour"]
            / cold["uniform"]["five_view_min_per_node_hour"] - 1)
    assert gain > 0.10, gain
    assert cold["pool"]["cold_load_share"] < 0.05 < 0.5 < cold["uniform"]["cold_load_share"]
    free = {s: ClusterSim(small(scheduler=s, cold_load_s=0, warm_load_s=0)).run()
            for s in ("pool", "uniform")}
    assert free["pool"]["five_view_min_per_node_hour"] == pytest.approx(
        free["uniform"]["five_view_min_per_node_hour"], rel=0.01)


def test_a_node_loss_costs_at_most_one_lease_of_work_plus_a_reload():
    """Node 1 is lost at 4 h (never replaced): each of its slots loses at most one lease of
    work; its levels move by the policy's leave() and cost one reload each at their new owner
    (caches hold the grown pools); every unit it held is made again elsewhere."""
    prof = unreal_paper().scaled(trajectories_per_unit=1)
    runs = {}
    for kill in ([[1, 4 * 3600.0]], []):
        cfg = small(kill=kill, detection_s=60.0, node_return_s=-1.0, cache_levels=16)
        sim = ClusterSim(cfg, prof)
        runs[bool(kill)] = (sim, sim.run())
    sim, fig = runs[True]
    (f,) = sim.failures
    assert f.node == "node01" and f.units_in_flight == sim.slots
    # one lease per slot: each slot lost at most the time one unit takes on a full GPU
    slowest = prof.frames_per_trajectory / (prof.fps(sim.slots_per_gpu) / sim.slots_per_gpu)
    one_lease = (prof.cold_load_s + prof.stage1_s_per_frame * prof.frames_per_trajectory
                 + slowest)
    assert 0 < f.slot_s_lost <= sim.slots * one_lease
    # its levels moved (the real policy's leave) ...
    pol = sim.sched.policy  # type: ignore[union-attr]
    names = [n.name for n in sim.nodes]
    mine = [lv for lv in pol.levels if assign(pol.levels, names)[lv] == "node01"]
    assert f.levels_moved == len(mine) > 0
    assert "node01" not in pol.owner.values()
    # ... and cost a cold reload each (two slots may load one level at once), no more
    extra_cold = fig["cold_loads"] - runs[False][1]["cold_loads"]
    assert len(mine) <= extra_cold <= 2 * len(mine)
    # every unit it held was made again elsewhere
    assert f.recovered_at_s > f.at_s + cfg.detection_s
    assert fig["failures"]["count"]["node_loss"] == 1 and fig["duplicate_units"] == 0


def _quick_profile(**kw: object):
    """Units of seconds (30-frame trajectories, 5 s loads): timings easy to check."""
    return unreal_paper().scaled(trajectories_per_unit=1, frames_per_trajectory=30,
                                 cold_load_s=5.0, warm_load_s=5.0, stage1_s_per_frame=0.0,
                                 **kw)


def test_nodes_lease_nothing_before_the_cluster_start_delay():
    """start_s (the measured start of a Ray run: runner actors scheduled and started) delays
    every node's first lease by that long; a finite run then ends that much later."""
    spans, firsts = [], []
    for start in (0.0, 250.0):
        cfg = small(finite=True, passes=1, levels=8, steady_start=False, start_s=start)
        sim = ClusterSim(cfg, _quick_profile())
        fig = sim.run()
        firsts.append(min(t for t, _, _ in sim.stats.completions))
        spans.append(fig["makespan_s"])
    assert firsts[0] < 250.0 < firsts[1]  # without the delay units finish within it
    assert firsts[1] == pytest.approx(firsts[0] + 250.0, abs=1.0)
    assert spans[1] == pytest.approx(spans[0] + 250.0, abs=1.0)


def test_a_level_twice_as_costly_renders_twice_as_long():
    """level_factor (each level's measured render cost against the average) scales its
    Stage II time; the output it is credited with stays one trajectory's."""
    spans, minutes = [], []
    for fac in (1.0, 2.0):
        prof = _quick_profile(level_factor={"A/a": fac})
        cfg = SimConfig(profile=prof.name, nodes=1, gpus_per_node=1, slots_per_gpu=1, levels=1,
                        passes=1, finite=True, steady_start=False, horizon_h=10.0,
                        warmup_h=0.0, level_ids=["A/a"], poll_s=1.0)
        fig = ClusterSim(cfg, prof).run()
        spans.append(fig["makespan_s"] - prof.cold_load_s)
        minutes.append(fig["trajectories_made"])
    assert spans[1] == pytest.approx(2 * spans[0], rel=0.01)
    assert minutes == [1, 1]
    with pytest.raises(ValueError, match="level_factor.*A/a"):
        _quick_profile(level_factor={"A/a": 0.0})


def test_disk_back_pressure_when_uploads_lag():
    """A store too slow for the output: nodes fill their disks and are drained (no new lease;
    what their slots hold still lands), and resume once uploads catch up."""
    fast = ClusterSim(small()).run()
    cfg = small(store_mb_s=0.2, disk_gb=2.0, drain_free_gb=0.5)
    sim = ClusterSim(cfg)
    slow = sim.run()
    assert fast["disk_drains"] == 0 and slow["disk_drains"] > 1
    unit_gb = sim.prof.five_view_min_per_trajectory * sim.prof.output_mb_per_five_view_min / 1e3
    high = slow["upload_backlog_gb_high_per_node"]["max"]
    assert cfg.disk_gb - cfg.drain_free_gb <= high <= cfg.disk_gb - cfg.drain_free_gb + \
        sim.slots * unit_gb
    assert slow["five_view_min_per_node_hour"] < 0.9 * fast["five_view_min_per_node_hour"]


def test_same_seed_same_report(tmp_path):
    from stages.cluster.simulate.cli import main

    outs = []
    for i, seed in enumerate((3, 3, 4)):
        out = tmp_path / f"r{i}"
        assert main(["--quick", "--seed", str(seed), "--out", str(out), "--jobs", "1"]) == 0
        outs.append(out)
    names = {"figures.json", "report.md", "slots_per_gpu.png", "pool_gain_vs_cold_load.png",
             "slot_time.png"}
    assert {p.name for p in outs[0].iterdir()} == names
    for n in names:
        assert (outs[0] / n).read_bytes() == (outs[1] / n).read_bytes(), n
    assert (outs[0] / "figures.json").read_bytes() != (outs[2] / "figures.json").read_bytes()
    rep = json.loads((outs[0] / "figures.json").read_text())
    assert rep["calibration"]["h200_node_runner"]["ok"]
    assert all(r["prediction"] and r["inputs"]["config"] for r in rep["runs"].values())
    md = (outs[0] / "report.md").read_text()
    assert "prediction" in md.lower() and "## Calibration" in md.split("## 1.")[0]


def test_bad_settings_name_the_key(capsys):
    from stages.cluster.simulate.cli import main

    assert main(["--one", "nodez=3"]) == 2
    assert "setting 'nodez=3': expected key=value with key one of" in capsys.readouterr().err
    with pytest.raises(ValueError, match="nodez"):
        apply_sets(SimConfig(), ["nodez=3"])
    with pytest.raises(ValueError, match="nodes='three'"):
        apply_sets(SimConfig(), ["nodes=three"])
    with pytest.raises(ValueError, match="scheduler 'fifo'"):
        SimConfig(scheduler="fifo")
    with pytest.raises(ValueError, match="slots_per_gpu 8: profile unreal-paper fits at most 3"):
        ClusterSim(SimConfig(profile=UE, slots_per_gpu=8))
