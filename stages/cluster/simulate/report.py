"""The 25 × 8 report: calibration first, then the runs, the answers, plots and a JSON."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from .answers import answers
from .calibrate import MEASUREMENT, calibration
from .profiles import embedded_h200, unreal_paper
from .runs import run_all
from .scenarios import EMB, UE, scenarios


class CalibrationError(RuntimeError):
    pass


def build(seed: int = 0, quick: bool = False, jobs: int = 0, measurement: Path = MEASUREMENT,
          require_calibration: bool = True, log: Callable[[str], object] = print) -> dict:
    cal = calibration(measurement)
    for name, c in cal.items():
        log(f"calibration {name}: {'ok' if c['ok'] else 'NOT within tolerance'}: {c['what']}")
    if require_calibration and not all(c["ok"] for c in cal.values()):
        raise CalibrationError("the model does not reproduce the measured runs within "
                               "tolerance: no 25 x 8 figure is reported (see calibration)")
    cfgs = scenarios(seed, quick)
    log(f"{len(cfgs)} simulated runs ({'quick' if quick else '25 nodes x 8 GPUs'})")
    runs = run_all(cfgs, jobs, log)
    return {"what": "wmforge cluster simulation: predictions, not measurements",
            "seed": seed, "quick": quick, "calibration": cal,
            "profiles": {EMB: embedded_h200().to_dict(), UE: unreal_paper().to_dict()},
            "answers": answers(runs), "runs": runs}


def _pct(x: float) -> str:
    return f"{100 * x:+.1f} %"


def markdown(rep: dict) -> str:
    a, cal = rep["answers"], rep["calibration"]
    L = ["# Cluster simulation (predictions)", "",
         "Every figure below is a **prediction** of the SimPy model "
         "(`stages/cluster/simulate/`) with the real allocator policy; inputs in "
         "`figures.json` (`runs.<key>.inputs`). Seed " + str(rep["seed"]) +
         (" — quick report (small cluster)" if rep["quick"] else "") + ".", "",
         "## Calibration (before any figure)", ""]
    h = cal["h200_node_runner"]
    L += [f"{h['what']}; tolerance ±{100 * h['tolerance']:.0f} %: "
          f"{'within' if h['ok'] else 'NOT within'}.", "",
          "| slots | measured frames/s | model | error |", "|---|---|---|---|"]
    L += [f"| {r['slots']} | {r['measured_fps']} | {r['predicted_fps']} | {_pct(r['error'])} |"
          for r in h["rows"]]
    t = cal["test_cluster"]
    L += ["", f"Test cluster: {t['what']}; tolerance ±{100 * t.get('tolerance', 0):.0f} %: "
          f"{'within' if t['ok'] else 'NOT within'}.", ""]
    if t["rows"]:
        L += ["| run | measured traj/h | model | error |", "|---|---|---|---|"]
        L += [f"| {r['name']}{'' if r.get('gated', True) else ' (not gated: see below)'} | "
              f"{r['measured_trajectories_per_hour']} | "
              f"{r['predicted_trajectories_per_hour']} | {_pct(r['error'])} |"
              for r in t["rows"]]
        L += [f"\nRecovery after a node is removed, {r['name']}: measured "
              f"{r['measured_recovery_s']} s, model {r['predicted_recovery_s']} s; of which "
              f"detection {r['detection_s']} s (measured, an input), then re-lease, reload "
              f"and re-render: measured {r['measured_after_detection_s']} s, model "
              f"{r['predicted_after_detection_s']} s ({_pct(r['recovery_error'])}, tolerance "
              f"±{100 * t.get('recovery_rel_tolerance', 0):.0f} %)"
              for r in t["rows"] if "measured_recovery_s" in r]
        L += ["\nInputs of each run, measured on it, not predicted: when its nodes leased their "
              "first unit (Ray start-up), its wrap-up after the last unit, and (removal run) "
              "how long the driver took to see the node die; costs per unit from the node "
              "runner outside Ray; the runner's per-unit overhead inside Ray fitted on the "
              "1-node run alone."]
        L += [f"\nNot gated, {r['name']}: {r['why_not_gated']}" for r in t["rows"]
              if not r.get("gated", True)]
    L += ["", "## 1. Pool scheduling against uniform", "",
          "| profile | pool, five-view min/node-h | uniform | gain | cold loads pool / "
          "uniform |", "|---|---|---|---|---|"]
    for prof in (EMB, UE):
        g = a["pool_gain"][prof]
        L.append(f"| {prof} | {g['pool']} | {g['uniform']} | {_pct(g['gain'])} | "
                 f"{100 * g['cold_load_share_pool']:.0f} % / "
                 f"{100 * g['cold_load_share_uniform']:.0f} % |")
    L += ["", f"{UE}, varied (warm load = 0.4 × cold):", "",
          "| set-up | pool | uniform | gain |", "|---|---|---|---|"]
    for what, d in a["pool_gain"][f"{UE}/sweeps"].items():
        L.append(f"| {what} | {d['pool']} | {d['uniform']} | {_pct(d['gain'])} |")
    L += ["", "## 2. Slots per GPU (pool)", ""]
    for prof in (EMB, UE):
        b = a["best_slots_per_gpu"][prof]
        cells = ", ".join(f"{s}: {v}" for s, v in b["per_slots"].items())
        L.append(f"- **{prof}**: best {b['best']} slots per GPU (memory ceiling "
                 f"{b['memory_ceiling']}); five-view min/node-h by slots: {cells}")
    L += ["", "## 3. Node losses", "",
          "| profile | per loss: in flight | undelivered | down until replaced | total "
          "(five-view min) | at 1 per node-week | recovery of in-flight units |",
          "|---|---|---|---|---|---|---|"]
    for prof in (EMB, UE):
        c = a["node_loss_cost"][prof]
        p = c["per_loss_five_view_min"]
        rec = (f"{c['recovery_s_mean']} s" if c["recovery_s_mean"] >= 0
               else "none within the horizon")
        L.append(f"| {prof} | {p['in_flight']} | {p['undelivered_backlog']} | "
                 f"{p['node_down_until_replaced']} | {p['total']} | "
                 f"{100 * c['throughput_cost_share']:.2f} % of throughput | "
                 f"{rec} ({c['losses_simulated']} losses simulated) |")
    L += ["", f"Lease timeout and node-death detection ({UE}, elevated losses):", "",
          "| lease_s / detection_s | five-view min/node-h | recovery s (recovered) | "
          "duplicates |", "|---|---|---|---|"]
    for k, d in a["lease_timeout"].items():
        L.append(f"| {k} | {d['five_view_min_per_node_hour']} | {d['recovery_s_mean']} "
                 f"({d['recovered']}/{d['losses']}) | {d['duplicate_units']} |")
    L += ["", "## Runs", "", "| run | five-view min/node-h | GPU busy | slot time: render / "
          "load / stage I / stalled / down / idle | cold loads | backlog high GB (max) |",
          "|---|---|---|---|---|---|"]
    for key, f in rep["runs"].items():
        s = f["slot_time_share"]
        L.append(f"| {key} | {f['five_view_min_per_node_hour']} | "
                 f"{100 * f['gpu_busy_share']:.0f} % | " + " / ".join(
                     f"{100 * s[k]:.1f}" for k in ("render", "load", "stage1", "stalled",
                                                     "down", "idle")) +
                 f" | {100 * f['cold_load_share']:.0f} % | "
                 f"{f['upload_backlog_gb_high_per_node']['max']} |")
    L += ["", "## Profiles", ""]
    for name, p in rep["profiles"].items():
        L += [f"- **{name}** — {p['source']}."] + [f"  - {n}" for n in p["notes"]]
    return "\n".join(L) + "\n"


def plots(rep: dict, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    a = rep["answers"]
    paths = []
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    for ax, prof in zip(axes, (EMB, UE), strict=True):
        b = a["best_slots_per_gpu"][prof]["per_slots"]
        ax.plot(list(b), list(b.values()), "o-")
        ax.set_xscale("log", base=2)
        ax.set_title(f"{prof} (pool)")
        ax.set_xlabel("slots per GPU")
        ax.set_ylabel("five-view min per node-hour")
    fig.suptitle("Prediction: throughput against slots per GPU")
    fig.tight_layout()
    paths.append(out / "slots_per_gpu.png")
    fig.savefig(paths[-1], dpi=90, metadata={"Software": None})
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 3.4))
    sw = a["pool_gain"][f"{UE}/sweeps"]
    keys = [k for k in sw if k.startswith("cold=")]
    xs = [float(k.split("=")[1]) for k in keys]
    main = a["pool_gain"][UE]
    pts = sorted([*zip(xs, [sw[k]["gain"] for k in keys], strict=True),
                  (600.0, main["gain"])])
    ax.plot([p[0] for p in pts], [100 * p[1] for p in pts], "o-")
    ax.set_xlabel("cold load, s (warm = 0.4 x cold)")
    ax.set_ylabel("pool gain over uniform, %")
    ax.set_title(f"Prediction: pool vs uniform, {UE}")
    fig.tight_layout()
    paths.append(out / "pool_gain_vs_cold_load.png")
    fig.savefig(paths[-1], dpi=90, metadata={"Software": None})
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 3.4))
    keys = [k for k in rep["runs"] if k.endswith("/main/pool") or k.endswith("/main/uniform")]
    shares = ["render", "load", "stage1", "stalled", "down", "idle"]
    bottom = [0.0] * len(keys)
    for sh in shares:
        vals = [100 * rep["runs"][k]["slot_time_share"][sh] for k in keys]
        ax.bar(range(len(keys)), vals, bottom=bottom, label=sh)
        bottom = [b + v for b, v in zip(bottom, vals, strict=True)]
    ax.set_xticks(range(len(keys)), [k.replace("/main/", "\n") for k in keys], fontsize=7)
    ax.set_ylabel("% of slot time")
    ax.legend(fontsize=7, ncol=3)
    ax.set_title("Prediction: where slot time goes")
    fig.tight_layout()
    paths.append(out / "slot_time.png")
    fig.savefig(paths[-1], dpi=90, metadata={"Software": None})
    plt.close(fig)
    return paths


def write(rep: dict, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    (out / "figures.json").write_text(json.dumps(rep, indent=1, sort_keys=True) + "\n")
    (out / "report.md").write_text(markdown(rep))
    return [out / "figures.json", out / "report.md", *plots(rep, out)]


def make_report(out: Path, seed: int = 0, quick: bool = False, jobs: int = 0,
                measurement: Path = MEASUREMENT, require_calibration: bool = True,
                log: Callable[[str], object] = print) -> dict:
    t = time.perf_counter()
    rep = build(seed, quick, jobs, measurement, require_calibration, log)
    files = write(rep, out)
    log(f"wrote {', '.join(str(f) for f in files)} in {time.perf_counter() - t:.1f} s")
    return rep
