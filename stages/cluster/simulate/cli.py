"""``wmforge cluster simulate``: the 25 × 8 report (Markdown, plots, JSON) in under a minute."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .calibrate import MEASUREMENT
from .config import SimConfig, apply_sets
from .report import CalibrationError, make_report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="wmforge cluster simulate",
        description="Simulate the production cluster (25 nodes x 8 GPUs, pool vs uniform "
                    "scheduling, failures) with the real allocator policy, calibrated on "
                    "measured runs first. Every figure is a prediction.")
    ap.add_argument("--out", default="data/simulate", help="report folder")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=0, help="processes (0: up to two)")
    ap.add_argument("--quick", action="store_true", help="a small cluster (tests)")
    ap.add_argument("--measurement", default=str(MEASUREMENT),
                    help="the test cluster's measured costs and runs (JSON)")
    ap.add_argument("--uncalibrated", action="store_true",
                    help="report even when the model misses the measured runs")
    ap.add_argument("--one", nargs="*", metavar="KEY=VALUE",
                    help="one run with these SimConfig settings (e.g. scheduler=uniform "
                         "nodes=3); prints its figures as JSON instead of the report")
    args = ap.parse_args(argv)
    try:
        if args.one is not None:
            from .model import ClusterSim

            cfg = apply_sets(SimConfig(), args.one)
            fig = ClusterSim(cfg).run()
            print(json.dumps(fig, indent=1, sort_keys=True))
            return 0
        rep = make_report(Path(args.out), args.seed, args.quick, args.jobs,
                          Path(args.measurement), not args.uncalibrated)
    except (ValueError, CalibrationError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print((Path(args.out) / "report.md").read_text().split("## Runs")[0])
    return 0 if rep else 1


if __name__ == "__main__":
    sys.exit(main())
