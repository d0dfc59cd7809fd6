"""Characters of the inventory (paper §4.1): found by a ``character.json`` sidecar, or without one
from the files themselves — a skinned model (egg with joints, glTF with a skin) and its
animation clips (clip files beside it, in an ``anims``/``animations`` folder beside it, or clips
inside the model; that discovery is ``shared.character_discovery``).

For every character the same record is built: clips mapped to the nine actions (by their
names, then the fallback chain of ``core.actions``), capsule from the bind-pose bounds × the
safety factor with the clamp (radius from the body's narrower horizontal extent, so arms and
tails overhang), visual height kept apart, units, kind and forward axis. A sidecar key wins over
the inferred value; every key it leaves out is inferred, and every inference is written to the
``guesses`` column. ``mapping_source`` says whether the action→clip map came from the sidecar
or was inferred.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from ..config import InventoryConfig
from ..core.actions import ACTIONS, resolve_animation_map
from ..core.character_guess import (
    clip_display_name,
    guess_forward,
    guess_kind,
    guess_units,
    map_clips,
)
from ..core.characters import LOCOMOTION_MODES, capsule_from_bounds, step_height_for
from ..core.levels import name_for
from ..core.model_probe import (
    ModelProbe,
    ProbeError,
    model_format,
    probe_model,
    unreal_package_problem,
)
from ..core.skeleton_guess import analyse_skeleton, yaw_for_forward
from .character_discovery import MODEL_FORMATS, clip_files_near, discover

CHARACTER_COLUMNS = [
    "character_id", "pack", "name", "path", "model_path", "kind", "ok", "reason", "locomotion",
    "scale", "yaw_correction_deg", "walk_speed", "height_offset_m", "visual_height_m",
    "footprint_m", "capsule_radius_m", "capsule_half_height_m", "capsule_clamped",
    "step_height_m", "animation_json", "animation_notes", "model_clips", "mapping_source",
    "guesses", "up_axis", "coordinate_system", "coordinate_system_source", "ground_offset_m",
    "root_motion_json",
]
SIDECAR_KEYS = ("name", "model", "kind", "animations", "scale", "yaw_correction_deg",
                "walk_speed", "locomotion", "height_offset_m", "up_axis")


def probe_file(path: Path, max_bytes: int, up_axis: Any = None, scale: float = 1.0,
               root: Path | None = None) -> ModelProbe:
    """``core.model_probe.probe_model``, and FBX through Panda3D's Assimp loader in a child
    process (``engine.fbx_probe``). ProbeError with a reason for a file that cannot be used."""
    if model_format(path) == "fbx":
        from ..engine.fbx_probe import fbx_model_probe

        probe: ModelProbe = fbx_model_probe(path, max_bytes)
        return probe
    return probe_model(path, max_bytes, up_axis, scale, root)


class _Probes:
    """Each model probed once per inventory run (levels and characters share it)."""

    def __init__(self, cfg: InventoryConfig, root: Path):
        self.cfg = cfg
        self.root = root.resolve()
        self._memo: dict[tuple[str, str | None], ModelProbe | ProbeError] = {}

    def _pack(self, path: Path) -> Path | None:
        """The pack folder holding ``path``: references must stay inside it (asset_guard)."""
        try:
            rel = path.resolve().relative_to(self.root)
        except ValueError:
            return None
        return self.root / rel.parts[0] if len(rel.parts) > 1 else None

    def __call__(self, path: Path, up_axis: Any = None) -> ModelProbe:
        key = (str(path), None if up_axis is None else str(up_axis))
        if key not in self._memo:
            try:
                self._memo[key] = probe_file(path, self.cfg.max_probe_bytes, up_axis, 1.0,
                                             self._pack(path))
            except ProbeError as exc:
                self._memo[key] = exc
        hit = self._memo[key]
        if isinstance(hit, ProbeError):
            raise hit
        return hit


def _as_float(manifest: dict, key: str, default: float, where: str) -> float:
    v = manifest.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise ValueError(f"{where}: '{key}' must be a number, got {v!r}")
    return float(v)


def character_row(root: Path, cfg: InventoryConfig, pack: str, where: str, model: Path,
                  manifest: dict, clip_files: list[str], probe: Callable[..., ModelProbe]
                  ) -> dict:
    """One characters.parquet row: sidecar keys win, everything else inferred (and recorded).
    Raises ProbeError / ValueError for the caller to turn into a reason."""
    m = manifest
    guesses: list[str] = []
    unknown = sorted(set(m) - set(SIDECAR_KEYS))
    if unknown:
        guesses.append(f"sidecar keys ignored (unknown): {unknown}")
    name = str(m.get("name") or (model.parent.name if m else _user_name(root, model)))
    row: dict[str, Any] = {c: None for c in CHARACTER_COLUMNS}
    row.update(pack=pack, path=where, name=name, character_id=f"{pack}/{name}", ok=False)
    real = model.resolve()
    if root not in real.parents:
        raise ValueError(f"model '{m.get('model', model.name)}' lies outside the library root")
    row["model_path"] = str(model.relative_to(root))
    loco = m.get("locomotion", "walk")
    if loco not in LOCOMOTION_MODES:
        raise ValueError(f"'locomotion' is {loco!r}; expected one of {LOCOMOTION_MODES}")
    bad_package = unreal_package_problem(model)
    if bad_package:
        raise ProbeError(*bad_package)
    p = probe(model, m.get("up_axis"))
    raw = p.extent
    # clips: inside the model, and clip files (named after their file when their own name
    # is an exporter's default), each with its root travel
    names: dict[str, str] = {}  # clip key (what the engine plays) → the name a user reads
    travel: dict[str, tuple[float, float, float]] = {}
    if p.format in ("gltf", "fbx"):
        for c in p.animations:
            names[c] = c
            if c in p.root_motion:
                travel[c] = p.root_motion[c]
    for c in clip_files:
        f = model.parent / c
        names[c] = c
        if model_format(f) in ("glb", "gltf"):
            try:
                cp = probe(f)
            except ProbeError:
                continue
            if cp.animations:
                names[c] = clip_display_name(cp.animations[0], _model_stem(f))
                if cp.animations[0] in cp.root_motion:
                    travel[c] = cp.root_motion[cp.animations[0]]
    available = set(names)
    anims = m.get("animations")
    if anims is not None:
        if not isinstance(anims, dict):
            raise ValueError("'animations' must map actions to clip names")
        source = "sidecar"
        present = {a: c for a, c in anims.items()
                   if c and (c in available or (model.parent / str(c)).is_file())}
        missing = sorted(set(anims) - set(present))
        notes = [f"missing clip for {a}" for a in missing]
    else:
        source = "inferred"
        by_name: dict[str, str] = {}
        for key, shown in sorted(names.items()):
            by_name.setdefault(shown, key)
        chosen, clip_guesses = map_clips(sorted(by_name), name)
        present = {a: by_name[c] for a, c in chosen.items()}
        guesses.extend(g if not any(by_name[n] != n and f"'{n}'" in g for n in by_name) else
                       g + " [" + ", ".join(f"'{n}' = {by_name[n]}" for n in by_name
                                            if by_name[n] != n and f"'{n}'" in g) + "]"
                       for g in clip_guesses)
        notes = []
    height = max(raw[2], 1e-9)
    walk = present.get("W")
    walk_travel = travel.get(walk) if walk else None
    skel = analyse_skeleton(p.joints, p.joint_parents, (p.bounds_min or (0, 0, 0))[2], height,
                            walk_travel) if p.joints else None
    if "scale" in m:
        scale = _as_float(m, "scale", 1.0, where)
    else:
        scale, note = guess_units(raw[2], model.name, humanoid=bool(
            skel is not None and skel.kind == "humanoid" and m.get("kind", "humanoid")
            == "humanoid"))
        guesses.append(note + (" (measured through the skin: the glTF bind pose)"
                               if p.format == "gltf" and p.skinned else ""))
    ext = (raw[0] * scale, raw[1] * scale, raw[2] * scale)
    if "kind" in m:
        kind = str(m["kind"])
    elif skel is not None and skel.kind is not None:
        kind = skel.kind
        guesses.append(f"kind {kind}: {skel.kind_evidence}")
    else:
        kind = guess_kind(ext)
        guesses.append(f"kind {kind}: {'longer than tall' if kind == 'quadruped' else 'taller'}"
                       + (f" (the skeleton does not say: {skel.kind_evidence})" if skel else ""))
    if "yaw_correction_deg" in m:
        yaw = _as_float(m, "yaw_correction_deg", 0.0, where)
    elif skel is not None and skel.forward is not None:
        yaw = yaw_for_forward(skel.forward)
        guesses.append(f"yaw_correction_deg {yaw:g}: faces ({skel.forward[0]:+.2f}, "
                       f"{skel.forward[1]:+.2f}) by the skeleton: {skel.facing_evidence}")
    else:
        yaw, note = guess_forward(ext, kind, p.format if p.format != "egg" else "egg")
        guesses.append(note)
    cap = capsule_from_bounds(raw, scale, cfg.capsule_safety, cfg.min_capsule_radius_m,
                              cfg.min_capsule_height_m)
    root_motion: dict[str, dict] = {}
    for c, v in sorted(travel.items()):
        dist = math.hypot(v[0], v[1]) * scale
        if dist > 0.05 * ext[2] and dist > 0.02:
            root_motion[c] = {"travel_m": [round(x * scale, 4) for x in v],
                              "handling": "in_place"}
            guesses.append(f"clip '{names.get(c, c)}' moves its root {dist:.2f} m per loop "
                           "(root motion): played in place, Stage I's controller moves the "
                           "capsule")
    mapping, fallback = resolve_animation_map(present)
    guesses.extend(p.notes)
    row.update(
        ok=True, reason=None, kind=kind, locomotion=loco, scale=scale, yaw_correction_deg=yaw,
        walk_speed=_as_float(m, "walk_speed", cfg.default_walk_speed, where),
        height_offset_m=_as_float(m, "height_offset_m", 0.0, where),
        visual_height_m=ext[2], footprint_m=max(ext[0], ext[1]),
        capsule_radius_m=cap.radius, capsule_half_height_m=cap.half_height,
        capsule_clamped=cap.clamped, step_height_m=step_height_for(cap),
        animation_json=json.dumps({a: mapping[a] for a in ACTIONS}),
        animation_notes="; ".join(notes + fallback), model_clips=json.dumps(sorted(available)),
        ground_offset_m=-(p.bounds_min or (0.0, 0.0, 0.0))[2] * scale,
        root_motion_json=json.dumps(root_motion),
        mapping_source=source, guesses=json.dumps(guesses),
        up_axis=None if m.get("up_axis") is None else str(m["up_axis"]),
        coordinate_system=p.coordinate_system,
        coordinate_system_source=p.coordinate_system_source,
    )
    if p.extras.get("engine_loadable") is False:
        # measured through a conversion the engine does not load: every figure is there for
        # the user to see, the character is not used
        row.update(ok=False, reason="fbx_engine_cannot_load",
                   animation_notes=f"{p.extras.get('loader_error')}; convert it to glTF "
                   "(FBX2glTF) beside the FBX to use it")
    return row


def _user_name(root: Path, model: Path) -> str:
    """A discovered character's name: its folder's when the file stem is generic and the model
    is the only one in its own folder (Sketchfab's ``Soldier/scene.gltf`` → ``Soldier``)."""
    others = [f for f in model.parent.iterdir() if f != model and model_format(f) in
              MODEL_FORMATS] if model.parent.is_dir() else []
    if model.parent.resolve() == root.resolve():
        return _model_stem(model)
    return name_for(_model_stem(model), model.parent.name, not others)


def _model_stem(model: Path) -> str:
    name = model.name
    for suf in (".egg.pz", ".egg", ".glb", ".gltf", ".fbx"):
        if name.lower().endswith(suf):
            return name[: -len(suf)]
    return name


def characters_table(root: Path, cfg: InventoryConfig, entries: list[Any],
                     probe: Callable[..., ModelProbe] | None = None) -> pd.DataFrame:
    """Rows for every character among ``entries`` (the library walk): sidecar ones, then
    discovered ones."""
    root = root.resolve()
    probe = probe or _Probes(cfg, root)
    files = [e.path for e in entries if e.path is not None]
    sidecars = [e for e in entries if e.path is not None and e.path.name == "character.json"]
    rows = []
    for e in sidecars:
        pack = Path(e.rel).parts[0]
        row: dict[str, Any] = {c: None for c in CHARACTER_COLUMNS}
        row.update(pack=pack, path=e.rel, ok=False, mapping_source="sidecar")
        try:
            m = json.loads(e.path.read_text(encoding="utf-8"))
            if not isinstance(m, dict):
                raise ValueError("manifest must be a JSON object")
            name = str(m.get("name") or e.path.parent.name)
            row.update(name=name, character_id=f"{pack}/{name}", kind=m.get("kind", "humanoid"))
            if "model" not in m:
                raise ValueError("missing key 'model' (model file next to character.json)")
            model = e.path.parent / str(m["model"])
            clips = clip_files_near(model, files, probe) if model.is_file() else []
            row = character_row(root, cfg, pack, e.rel, model, m, clips, probe)
        except ProbeError as exc:
            row.update(reason=f"model_{exc.reason}", kind=row.get("kind") or "unknown")
            row["animation_notes"] = exc.detail
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, ValueError) as exc:
            row.update(reason="bad_manifest", animation_notes=str(exc))
        rows.append(row)
    if cfg.discover_characters:
        sidecar_dirs = {e.path.parent for e in sidecars}
        models, clip_of, _ = discover(root, files, sidecar_dirs, probe)
        for model in models:
            rel = str(model.relative_to(root))
            try:
                rows.append(character_row(root, cfg, Path(rel).parts[0], rel, model, {},
                                          clip_of[model], probe))
            except (ProbeError, ValueError, OSError) as exc:
                row = {c: None for c in CHARACTER_COLUMNS}
                row.update(pack=Path(rel).parts[0], path=rel, ok=False, reason="bad_model",
                           animation_notes=str(exc), mapping_source="inferred")
                rows.append(row)
    df = pd.DataFrame(rows, columns=CHARACTER_COLUMNS)
    return df.sort_values("path", kind="stable").reset_index(drop=True)
