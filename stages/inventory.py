"""`inventory` stage (paper §4.1): scan an asset library, write levels.parquet and
characters.parquet.

Each top-level folder of the library root is a pack. For each pack the real content directory is
recorded (no fixed path assumed: the first ``Content`` folder on the way to its levels, else the
levels' nearest common folder). Each candidate level gets a kind (see ``stages.core.levels`` for
the heuristics; model files beside a ``character.json`` or under ``Characters/``, ``Animations/``
or ``__ExternalActors__/`` folders are never level candidates), ``enabled``, a reason when
disabled, sizes and counts, and the user's per-level overrides (``overrides.yaml`` at the
library root); those level rows are built in ``stages.shared.inventory_levels``. Characters — by
their ``character.json`` sidecars or, without one, skinned models and their clips — are in
``stages.shared.inventory_characters``; their files are never level candidates, and a pack
holding only characters is a character pack (no level row).

Bad input never crashes the stage and is never read past the library root: unreadable or corrupt
files, symlink loops, links pointing outside the root, names with ``..`` or non-UTF-8 bytes, and
empty packs each become a row with a reason code (the walk itself is
``stages.shared.library_walk``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import yaml

from .config import ConfigError, InventoryConfig, load_params
from .core.spawns import parse_starts
from .parquet_io import write_parquet
from .shared.character_discovery import discover, skipped_table
from .shared.inventory_characters import _Probes, characters_table
from .shared.inventory_levels import inventory_levels
from .shared.library_walk import Entry, walk_library


def _load_yaml(path: Path) -> dict:
    if not path.exists():
        return {}
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: cannot read overrides: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: overrides must be a mapping of level id → fields")
    allowed = {"walk_speed", "exposure_compensation", "enabled", "note", "starts",
               "camera_scale"}
    for lid, fields in data.items():
        if not isinstance(fields, dict):
            raise ConfigError(f"{path}: overrides for '{lid}' must be a mapping")
        bad = set(fields) - allowed
        if bad:
            raise ConfigError(f"{path}: unknown override key(s) {sorted(bad)} for '{lid}'; "
                              f"expected some of {sorted(allowed)}")
        for key, lo, hi in (("walk_speed", 0.05, 20.0), ("exposure_compensation", -10.0, 10.0),
                            ("camera_scale", 0.1, 3.0)):
            v = fields.get(key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int | float)
                                  or not lo <= v <= hi):
                unit = {"walk_speed": "m/s", "exposure_compensation": "EV stops",
                        "camera_scale": "x the camera rig's distances"}[key]
                raise ConfigError(f"{path}: {lid}.{key}: expected a number in [{lo}, {hi}] "
                                  f"({unit}), got {v!r}")
        if "starts" in fields:
            try:
                fields["starts"] = parse_starts(fields["starts"], f"{path}: {lid}")
            except ValueError as exc:
                raise ConfigError(str(exc)) from None
    return data


def inventory_characters(root: Path, cfg: InventoryConfig,
                         entries: list[Entry] | None = None) -> pd.DataFrame:
    """characters.parquet's rows for the library at ``root`` (walked when no entries)."""
    entries = entries if entries is not None else list(walk_library(root.resolve()))
    return characters_table(root, cfg, entries)


@dataclass
class InventoryResult:
    levels: pd.DataFrame
    characters: pd.DataFrame
    notes: list[str] = field(default_factory=list)
    skipped: pd.DataFrame | None = None


def run_inventory(root: Path, cfg: InventoryConfig, overrides_file: str) -> InventoryResult:
    if not root.is_dir():
        raise ConfigError(f"library.root: '{root}' is not a folder")
    overrides = _load_yaml(root / overrides_file)
    entries = list(walk_library(root))
    probe = _Probes(cfg, root)
    owned: set[Path] = set()
    if cfg.discover_characters:
        files = [e.path for e in entries if e.path is not None]
        sidecar_dirs = {f.parent for f in files if f.name == "character.json"}
        _, _, owned = discover(root, files, sidecar_dirs, probe)
    levels = inventory_levels(root, cfg, overrides, entries, owned)
    known = set(levels["level_id"])
    notes = [f"override for unknown level '{k}' ignored" for k in overrides if k not in known]
    chars = characters_table(root, cfg, entries, probe)
    # every model file is a level row, a character (model or clip) or a skipped row
    files = [e.path for e in entries if e.path is not None]
    base = root.resolve()

    def norm(p: Path | str) -> Path:
        return Path(os.path.normpath(base / p))

    used = {norm(str(p)) for p in levels["path"].dropna()}
    used |= {norm(str(p)) for p in chars["model_path"].dropna()}
    used |= {norm(p) for p in owned}
    for r in chars.itertuples():
        if r.model_path and r.model_clips:
            folder = norm(str(r.model_path)).parent
            used |= {norm(folder / c) for c in json.loads(str(r.model_clips))}
    skipped = skipped_table(base, [norm(f) for f in files], used, probe)
    return InventoryResult(levels, chars, notes, skipped)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="wmforge inventory", description=__doc__.splitlines()[0])
    ap.add_argument("--library", help="library root (default: params library.root)")
    ap.add_argument("--out", default="data/inventory", help="output folder")
    ap.add_argument("--params", default="params.yaml",
                    help="params file (default params.yaml; built-in defaults when absent)")
    ap.add_argument("-S", "--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a param, e.g. -S inventory.max_extent_m=5000")
    args = ap.parse_args(argv)
    try:
        if Path(args.params).exists():
            cfg = load_params(args.params, args.set)
        else:
            from omegaconf import OmegaConf

            from .config import validate
            cfg = validate(OmegaConf.from_dotlist(args.set), "built-in defaults")
        root = Path(args.library or cfg.library.root)
        res = run_inventory(root, cfg.inventory, cfg.library.overrides_file)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out)
    write_parquet(res.levels, out / "levels.parquet")
    write_parquet(res.characters, out / "characters.parquet")
    if res.skipped is not None:
        write_parquet(res.skipped, out / "skipped.parquet")
    lv = res.levels
    print(f"inventory: {len(lv)} level rows ({int(lv['enabled'].sum())} enabled) "
          f"from {lv['pack'].nunique()} packs, {len(res.characters)} characters, "
          f"{0 if res.skipped is None else len(res.skipped)} files skipped → {out}")
    if res.skipped is not None:
        for r in res.skipped.itertuples():
            print(f"skipped: {r.path}: {r.reason}")
    print(lv.groupby(["kind", "reason"], dropna=False).size().to_string())
    for n in res.notes:
        print(f"note: {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
