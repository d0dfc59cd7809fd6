"""The figures of one simulated run (a prediction; its inputs travel with it)."""

from __future__ import annotations

from dataclasses import asdict

from .records import HOUR, RunRecord


def _r(x: float, nd: int = 3) -> float:
    return round(float(x), nd)


def figures(run: RunRecord) -> dict:
    c, st, prof = run.cfg, run.stats, run.prof
    lo, hi = st.window
    win_h = (hi - lo) / HOUR
    slot_total = c.nodes * run.slots * (hi - lo)
    shares = {k: v / slot_total for k, v in st.slot_s.items()}
    shares["idle"] = max(0.0, 1.0 - sum(shares.values()))
    busy = sum(run.gpu_busy_s) / (len(run.gpu_busy_s) * (hi - lo))
    mb = prof.output_mb_per_five_view_min
    fails = run.failures
    rec = [f.recovered_at_s - f.at_s for f in fails if f.recovered_at_s >= 0]
    out = {
        "prediction": True,
        "scheduler": c.scheduler, "profile": prof.name, "slots_per_gpu": run.slots_per_gpu,
        "window_h": _r(win_h),
        "five_view_min_per_node_hour": _r(st.minutes / (c.nodes * win_h)),
        "five_view_min_per_gpu_hour": _r(st.minutes / (c.nodes * c.gpus_per_node * win_h)),
        "trajectories_per_hour": _r(st.minutes / prof.five_view_min_per_trajectory / win_h),
        "units_completed": st.units,
        "makespan_s": _r(st.completions[-1][0], 1) if st.completions else None,
        "trajectories_made": sum(x[2] for x in st.completions),
        "slot_time_share": {k: _r(v, 4) for k, v in sorted(shares.items())},
        "gpu_busy_share": _r(busy, 4),
        "cold_load_share": _r(st.cold_loads / st.loads if st.loads else 0.0, 4),
        "loads": st.loads, "cold_loads": st.cold_loads,
        "trajectories_failed": st.trajectories_failed,
        "duplicate_units": run.duplicate_units,
        "upload_backlog_gb_high_per_node": {
            "max": _r(max(run.backlog_high_mb) / 1000),
            "mean": _r(sum(run.backlog_high_mb) / len(run.backlog_high_mb) / 1000)},
        "disk_drains": st.disk_drains,
        "upload_backlog_gb_end": _r(sum(run.backlog_mb) / 1000),
        "delivered_five_view_min": _r(sum(run.uploaded_mb) / mb, 1),
        "failures": {
            "count": {k: sum(f.kind == k for f in fails) for k in ("node_loss", "gpu_lost")},
            "slot_h_lost_mean": _r(sum(f.slot_s_lost for f in fails) / len(fails) / HOUR
                                   if fails else 0.0),
            "units_in_flight_mean": _r(sum(f.units_in_flight for f in fails) / len(fails)
                                       if fails else 0.0),
            "backlog_five_view_min_lost_mean": _r(
                sum(f.backlog_min_lost for f in fails) / len(fails) if fails else 0.0),
            "recovery_s_mean": _r(sum(rec) / len(rec) if rec else -1.0, 1),
            "recovered": len(rec),
            "events": [{"kind": f.kind, "node": f.node, "at_s": _r(f.at_s, 1),
                        "units_in_flight": f.units_in_flight,
                        "slot_h_lost": _r(f.slot_s_lost / HOUR),
                        "backlog_five_view_min_lost": _r(f.backlog_min_lost),
                        "levels_moved": f.levels_moved,
                        "recovery_s": _r(f.recovered_at_s - f.at_s, 1)
                        if f.recovered_at_s >= 0 else None} for f in fails[:50]],
        },
        "inputs": {"config": asdict(c), "profile": prof.to_dict()},
    }
    return out
