"""`wmforge diff REV_A REV_B`: what changed in the dataset between two git revisions.

Reads the manifests at each revision through ``dvc.api`` (so a revision whose data is not in
the local cache is fetched from the DVC remote): the level table (``data/select/levels.parquet``
when the pipeline has a select stage, else ``data/inventory/levels.parquet``), the shard index
(``data/shards/index.parquet``), the dataset metrics (``data/report/metrics.json``) and the
params. Prints levels added, removed or with a changed verdict; clips and hours by resolution
and by category; the change in action distribution; and the params that changed — as a table,
or as JSON with ``--json``.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from typing import Any

import pandas as pd

LEVEL_TABLES = ("data/select/levels.parquet", "data/inventory/levels.parquet")
SHARD_INDEX = "data/shards/index.parquet"
METRICS = "data/report/metrics.json"


class DiffError(RuntimeError):
    """A manifest that a revision declares could not be read."""


def _open(fs: Any, path: str, rev: str) -> bytes | None:
    """The file at ``rev``; None when the revision has no such file (an older pipeline). A file
    the revision declares but whose data is neither cached nor in the remote is an error, never
    an empty table."""
    if not fs.exists(path):
        return None
    try:
        return bytes(fs.read_bytes(path))
    except Exception as exc:  # noqa: BLE001 - dvc-data raises plain FileNotFoundError and more
        raise DiffError(f"{path} at revision {rev!r} is a DVC output, but its data is neither in "
                        f"the local cache nor in the DVC remote ({type(exc).__name__}: {exc}); "
                        "check `dvc remote list` and that `dvc push` ran for that revision"
                        ) from None


def _verdicts(levels: pd.DataFrame) -> dict[str, str]:
    if levels.empty:
        return {}
    if "retained" in levels:
        return {str(r["level_id"]): ("retained" if bool(r["retained"]) else
                                     f"rejected:{r.get('reason', '')}")
                for r in levels.to_dict("records")}
    return {str(r["level_id"]): ("enabled" if bool(r["enabled"]) else
                                 f"disabled:{r.get('reason') or r.get('kind')}")
            for r in levels.to_dict("records")}


def _flatten(d: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(d, dict):
        out: dict[str, Any] = {}
        for k, v in d.items():
            out.update(_flatten(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: d}


def load_version(repo: str, rev: str, remote: str | None = None) -> dict:
    import subprocess
    from pathlib import Path

    import dvc.api

    if Path(repo).exists():  # a local repository: an unknown revision is an error, not "empty"
        ok = subprocess.run(["git", "-C", repo, "rev-parse", "--verify", "--quiet",
                             f"{rev}^{{commit}}"], capture_output=True).returncode == 0
        if not ok:
            raise DiffError(f"unknown git revision {rev!r} in {Path(repo).resolve()}")
    config = {"core": {"remote": remote}} if remote else None
    fs = dvc.api.DVCFileSystem(repo, rev=rev, config=config)
    levels = pd.DataFrame()
    source = None
    for path in LEVEL_TABLES:
        raw = _open(fs, path, rev)
        if raw is not None:
            levels, source = pd.read_parquet(io.BytesIO(raw)), path
            break
    raw = _open(fs, SHARD_INDEX, rev)
    index = pd.read_parquet(io.BytesIO(raw)) if raw is not None else pd.DataFrame(
        columns=["key", "level_id", "category", "duration_s", "width", "height"])
    raw = _open(fs, METRICS, rev)
    metrics = json.loads(raw) if raw is not None else {}
    try:
        params = dvc.api.params_show(repo=repo, rev=rev)
    except Exception:  # noqa: BLE001 - a revision without params.yaml has no params
        params = {}
    return {"rev": rev, "levels": levels, "level_source": source, "index": index,
            "metrics": metrics, "params": params}


def _by(index: pd.DataFrame, key: str) -> dict[str, dict[str, float]]:
    if index.empty:
        return {}
    g = index.groupby(key)
    return {str(k): {"clips": int(len(v)), "hours": round(float(v["duration_s"].sum()) / 3600,
                                                          6)}
            for k, v in g}


def compare(a: dict, b: dict) -> dict:
    va, vb = _verdicts(a["levels"]), _verdicts(b["levels"])
    for v in (a, b):
        ix = v["index"]
        if not ix.empty:
            ix["resolution"] = ix["width"].astype(int).astype(str) + "x" + ix["height"].astype(
                int).astype(str)
        elif "resolution" not in ix:
            ix["resolution"] = []

    def delta(x: dict, y: dict) -> dict:
        keys = sorted(set(x) | set(y))
        zero = {"clips": 0, "hours": 0.0}
        return {k: {"a": x.get(k, zero), "b": y.get(k, zero),
                    "clips_change": y.get(k, zero)["clips"] - x.get(k, zero)["clips"],
                    "hours_change": round(y.get(k, zero)["hours"] - x.get(k, zero)["hours"], 6)}
                for k in keys}

    sa = a["metrics"].get("action_share", {})
    sb = b["metrics"].get("action_share", {})
    pa, pb = _flatten(a["params"]), _flatten(b["params"])
    return {
        "rev_a": a["rev"], "rev_b": b["rev"],
        "levels": {"added": sorted(set(vb) - set(va)), "removed": sorted(set(va) - set(vb)),
                   "verdict_changed": {k: {"a": va[k], "b": vb[k]}
                                       for k in sorted(set(va) & set(vb)) if va[k] != vb[k]},
                   "source": {"a": a["level_source"], "b": b["level_source"]}},
        "totals": {"a": {"clips": int(len(a["index"])),
                         "hours": round(float(a["index"]["duration_s"].sum()) / 3600, 6)},
                   "b": {"clips": int(len(b["index"])),
                         "hours": round(float(b["index"]["duration_s"].sum()) / 3600, 6)}},
        "by_resolution": delta(_by(a["index"], "resolution"), _by(b["index"], "resolution")),
        "by_category": delta(_by(a["index"], "category"), _by(b["index"], "category")),
        "action_share": {k: {"a": sa.get(k, 0.0), "b": sb.get(k, 0.0),
                             "change": round(sb.get(k, 0.0) - sa.get(k, 0.0), 6)}
                         for k in sorted(set(sa) | set(sb))},
        "non_forward_share": {"a": a["metrics"].get("non_forward_share"),
                              "b": b["metrics"].get("non_forward_share")},
        "params_changed": {k: {"a": pa.get(k), "b": pb.get(k)}
                           for k in sorted(set(pa) | set(pb)) if pa.get(k) != pb.get(k)},
    }


def render_text(d: dict) -> str:
    out = [f"wmforge diff {d['rev_a']} → {d['rev_b']}", ""]
    lv = d["levels"]
    out.append(f"levels: +{len(lv['added'])} added, -{len(lv['removed'])} removed, "
               f"{len(lv['verdict_changed'])} verdict changed")
    out += [f"  + {x}" for x in lv["added"]] + [f"  - {x}" for x in lv["removed"]]
    out += [f"  ~ {k}: {v['a']} → {v['b']}" for k, v in lv["verdict_changed"].items()]
    t = d["totals"]
    out += ["", f"clips: {t['a']['clips']} → {t['b']['clips']}   hours: {t['a']['hours']:.4f} → "
                f"{t['b']['hours']:.4f}"]
    for title, key in (("by resolution", "by_resolution"), ("by category", "by_category")):
        out += ["", f"{title:<16} {'clips A':>8} {'clips B':>8} {'Δ':>5} {'hours A':>9} "
                    f"{'hours B':>9} {'Δ hours':>9}"]
        for k, v in d[key].items():
            out.append(f"{k:<16} {v['a']['clips']:>8} {v['b']['clips']:>8} "
                       f"{v['clips_change']:>+5} {v['a']['hours']:>9.4f} {v['b']['hours']:>9.4f}"
                       f" {v['hours_change']:>+9.4f}")
    out += ["", f"{'action':<8} {'share A':>8} {'share B':>8} {'Δ (pp)':>8}"]
    for k, v in d["action_share"].items():
        out.append(f"{k:<8} {100 * v['a']:>7.1f}% {100 * v['b']:>7.1f}% "
                   f"{100 * v['change']:>+8.1f}")
    nf = d["non_forward_share"]
    if nf["a"] is not None and nf["b"] is not None:
        out.append(f"diagonal+backward+lateral: {100 * nf['a']:.1f}% → {100 * nf['b']:.1f}%")
    out += ["", f"params changed: {len(d['params_changed'])}"]
    out += [f"  {k}: {v['a']!r} → {v['b']!r}" for k, v in d["params_changed"].items()]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="wmforge diff", description=__doc__.splitlines()[0])
    ap.add_argument("rev_a")
    ap.add_argument("rev_b")
    ap.add_argument("--repo", default=".", help="git repository (path or URL)")
    ap.add_argument("--remote", default=None, help="DVC remote to fetch from (default: the "
                    "repository's default remote)")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = ap.parse_args(argv)
    try:
        a = load_version(args.repo, args.rev_a, args.remote)
        b = load_version(args.repo, args.rev_b, args.remote)
    except Exception as exc:  # noqa: BLE001 - dvc/scm errors: say which revision and why
        print(f"error: cannot read the manifests at {args.rev_a!r}/{args.rev_b!r} in "
              f"{args.repo}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    d = compare(a, b)
    sys.stdout.write(json.dumps(d, indent=1, default=str) + "\n" if args.json
                     else render_text(d))
    return 0


if __name__ == "__main__":
    sys.exit(main())
