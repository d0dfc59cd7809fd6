"""The command line every stage shares: ``--params``, its input/output paths, ``-S key=value``
overrides; the config is loaded and validated before any work."""

from __future__ import annotations

import argparse
import sys

from ..config import ConfigError, WmforgeConfig, load_params


def stage_args(prog: str, doc: str | None, argv: list[str] | None, paths: dict[str, str]
               ) -> tuple[argparse.Namespace, WmforgeConfig] | None:
    """(args, config), or None after printing the config error (the caller exits 2)."""
    ap = argparse.ArgumentParser(prog=prog, description=(doc or "").splitlines()[0])
    ap.add_argument("--params", default="params.yaml")
    for name, default in paths.items():
        ap.add_argument(f"--{name}", default=default)
    ap.add_argument("-S", "--set", action="append", default=[], metavar="KEY=VALUE")
    args = ap.parse_args(argv)
    try:
        return args, load_params(args.params, args.set)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return None
