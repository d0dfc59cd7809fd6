"""The ``wmforge`` console script."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from .config import (
    CONF_DIR,
    PARAMS_PATH,
    SCHEMA_DEFAULTS_NAME,
    ConfigError,
    composed_yaml,
    schema_defaults_yaml,
)


def cmd_params(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="wmforge params",
        description=f"Write conf/{SCHEMA_DEFAULTS_NAME} from the dataclasses, then compose conf/ "
        "into params.yaml (as dvc exp run does)")
    ap.add_argument("overrides", nargs="*",
                    help="Hydra overrides, e.g. inventory.max_extent_m=5000")
    ap.add_argument("--check", action="store_true",
                    help=f"exit 1 when conf/{SCHEMA_DEFAULTS_NAME} differs from the dataclasses' "
                    "defaults or params.yaml from what conf/ composes to")
    ap.add_argument("--out", default=str(PARAMS_PATH))
    args = ap.parse_args(argv)
    defaults_file = CONF_DIR / SCHEMA_DEFAULTS_NAME
    defaults_text = schema_defaults_yaml()
    defaults_now = defaults_file.read_text(encoding="utf-8") if defaults_file.exists() else ""
    if defaults_now != defaults_text:
        if args.check:
            print(f"{defaults_file} is stale: run `wmforge params` to regenerate it from the "
                  "dataclasses in stages/config/", file=sys.stderr)
            return 1
        defaults_file.write_text(defaults_text, encoding="utf-8")
        print(f"wrote {defaults_file}")
    try:
        text = composed_yaml(args.overrides)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out)
    if args.check:
        current = out.read_text(encoding="utf-8") if out.exists() else ""
        if current != text:
            print(f"{out} is stale: run `wmforge params` to recompose it from conf/",
                  file=sys.stderr)
            return 1
        print(f"{out} is up to date with conf/")
        return 0
    out.write_text(text, encoding="utf-8")
    print(f"wrote {out}")
    return 0


def cmd_lint(argv: list[str]) -> int:
    """ruff + mypy on stages/, and unreal/ type-checked against Unreal's 5.6 API stub (one
    command, as CI runs it)."""
    from .unreal_lint import mypy_unreal

    py = sys.executable
    rc = subprocess.call([py, "-m", "ruff", "check", "stages", "tests", "unreal"])
    rc |= subprocess.call([py, "-m", "mypy", "stages"])
    rc |= mypy_unreal()
    return rc


def _unknown(cmd: str, argv: list[str], known: str) -> int:
    print(f"usage: wmforge {cmd} {known} [args] (got {' '.join(argv) or 'nothing'})",
          file=sys.stderr)
    return 2


def _stage_main(module: str, argv: list[str]) -> int:
    import importlib

    return int(importlib.import_module(f"stages.{module}").main(argv) or 0)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = {
        "params": cmd_params,
        "lint": cmd_lint,
        "sample-library": lambda a: _stage_main("sample_library", a),
        "inventory": lambda a: _stage_main("inventory", a),
        "characters": lambda a: _stage_main("character_sheets", a),
        "view": lambda a: _stage_main("viewer.server", a),
        "diff": lambda a: _stage_main("datasets.version_diff", a),
        "caption": lambda a: _stage_main("caption", a),
        "shard": lambda a: _stage_main("shard", a),
        "lerobot": lambda a: _stage_main("lerobot_export", a),
        "report": lambda a: _stage_main("report", a),
        "export": lambda a: (_stage_main("datasets.rerun_export", a[1:]) if a[:1] == ["rerun"]
                             else _unknown("export", a, "rerun")),
        "node": lambda a: _stage_main("cluster.node_cli", a),
        "unreal": lambda a: (_stage_main("unreal_smoke", a[1:]) if a[:1] == ["smoke"] else
                             _unknown("unreal", a, "smoke")),
        # `cluster simulate` is the simulator's own CLI; the rest is cluster_cli
        "cluster": lambda a: (_stage_main("cluster.simulate.cli", a[1:])
                              if a[:1] == ["simulate"] else _stage_main("cluster.cluster_cli", a)),
    }
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in commands:
        print("usage: wmforge {" + ",".join(commands) + "} [args]\n\n"
              "  params          compose conf/ into params.yaml (--check to verify)\n"
              "  lint            ruff + mypy on stages/; unreal/ against the Unreal API stub\n"
              "  sample-library  write the bundled sample asset library\n"
              "  inventory       scan an asset library → levels/characters.parquet\n"
              "  characters      a picture of each character as the inventory measured it\n"
              "  view            serve a page to inspect one rendered trajectory\n"
              "  caption, shard, lerobot, report   the dataset stages (also run by dvc repro)\n"
              "  diff REV_A REV_B   what changed in the dataset between two git revisions\n"
              "  export rerun TRAJ  one rendered trajectory as a Rerun recording (.rrd)\n"
              "  node run|slots|snapshots   the node runner: Stage I + II on every slot of this "
              "machine; its slot plan; failure snapshots by reason\n"
              "  cluster up|run|status|health|down|upload|s3-local   production over Ray + S3\n"
              "  cluster simulate   the 25 x 8 cluster simulation report (predictions)\n"
              "  unreal smoke    one hour on a real UE 5.6 node: the checks of docs/unreal.md, "
              "a JSON report")
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    return int(commands[argv[0]](argv[1:]) or 0)


if __name__ == "__main__":
    sys.exit(main())
