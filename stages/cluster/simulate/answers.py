"""The issue's three questions, answered from the runs' figures (predictions)."""

from __future__ import annotations

from .profiles import profile
from .scenarios import EMB, UE


def _t(runs: dict, key: str) -> float:
    return float(runs[key]["five_view_min_per_node_hour"])


def pool_gain(runs: dict) -> dict:
    out = {}
    for prof in (EMB, UE):
        p, u = _t(runs, f"{prof}/main/pool"), _t(runs, f"{prof}/main/uniform")
        out[prof] = {"pool": p, "uniform": u, "gain": round(p / u - 1, 4),
                     "cold_load_share_pool": runs[f"{prof}/main/pool"]["cold_load_share"],
                     "cold_load_share_uniform": runs[f"{prof}/main/uniform"]["cold_load_share"]}
    sweep: dict[str, dict[str, float]] = {}
    for key in sorted(runs):
        if key.startswith(f"{UE}/cold=") or key.startswith(f"{UE}/traj_per_lease="):
            what = key.split("/")[1]
            sweep.setdefault(what, {})[key.split("/")[2]] = _t(runs, key)
    for d in sweep.values():
        d["gain"] = round(d["pool"] / d["uniform"] - 1, 4)
    out[f"{UE}/sweeps"] = sweep
    return out


def best_slots(runs: dict) -> dict:
    out = {}
    for prof in (EMB, UE):
        p = profile(prof)
        rows = {}
        for key, fig in runs.items():
            parts = key.split("/")
            if parts[0] != prof or parts[-1] != "pool":
                continue
            if parts[1] == "main" or parts[1].startswith("slots="):
                rows[int(fig["slots_per_gpu"])] = float(fig["five_view_min_per_node_hour"])
        best = max(rows, key=lambda s: (rows[s], -s))
        out[prof] = {"per_slots": dict(sorted(rows.items())), "best": best,
                     "memory_ceiling": min(p.max_slots_per_gpu, 1 << 10)}
    return out


def node_loss_cost(runs: dict, per_week: float = 1.0) -> dict:
    out = {}
    for prof in (EMB, UE):
        main, loss = runs[f"{prof}/main/pool"], runs[f"{prof}/node_loss/pool"]
        cfg = loss["inputs"]["config"]
        tput = float(main["five_view_min_per_node_hour"])
        slots = int(main["slots_per_gpu"]) * int(cfg["gpus_per_node"])
        f = loss["failures"]
        n = int(f["count"]["node_loss"])
        in_flight = float(f["slot_h_lost_mean"]) * tput / slots
        backlog = float(f["backlog_five_view_min_lost_mean"])
        down = float(cfg["node_return_s"]) / 3600 * tput
        per_loss = in_flight + backlog + down
        week = 168 * tput
        out[prof] = {
            "losses_simulated": n, "per_loss_five_view_min": {
                "in_flight": round(in_flight, 1), "undelivered_backlog": round(backlog, 1),
                "node_down_until_replaced": round(down, 1), "total": round(per_loss, 1)},
            "slot_h_lost_in_flight_mean": f["slot_h_lost_mean"],
            "recovery_s_mean": f["recovery_s_mean"],
            "at_per_node_week": per_week,
            "throughput_cost_share": round(per_week * per_loss / week, 5),
            "throughput_with_elevated_losses": float(loss["five_view_min_per_node_hour"]),
            "elevated_rate_per_node_week": float(cfg["node_loss_per_week"])}
    return out


def lease_sweep(runs: dict) -> dict:
    out = {}
    for key, fig in runs.items():
        if key.startswith(f"{UE}/lease="):
            f = fig["failures"]
            out[key.split("/", 1)[1]] = {
                "five_view_min_per_node_hour": fig["five_view_min_per_node_hour"],
                "recovery_s_mean": f["recovery_s_mean"], "recovered": f["recovered"],
                "losses": f["count"]["node_loss"], "duplicate_units": fig["duplicate_units"]}
    return out


def answers(runs: dict) -> dict:
    return {"pool_gain": pool_gain(runs), "best_slots_per_gpu": best_slots(runs),
            "node_loss_cost": node_loss_cost(runs), "lease_timeout": lease_sweep(runs)}
