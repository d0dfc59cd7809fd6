"""Which model files of the library are sidecar-less characters: skinned models, the clip files
that go with each (paper §4.1), every other model file with the reason it is not used.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd

from ..core.model_probe import ModelProbe, ProbeError, model_format
from ..core.skeleton_guess import skeleton_match

SKIPPED_COLUMNS = ["path", "pack", "reason", "detail"]
SKELETON_MATCH_MIN = 0.6  # a clip-only file goes with a character whose skeleton fits this well
MODEL_FORMATS = ("egg", "egg.pz", "glb", "gltf", "fbx")
CLIP_FOLDERS = ("anims", "animations", "anim", "clips")


def clip_files_near(model: Path, files: list[Path], probe: Callable[[Path], ModelProbe]
                     ) -> list[str]:
    """Animation-only files beside the model or in a clip folder beside it, as paths relative
    to the model's folder (how Stage II finds them). With several models in one folder a clip
    goes with the model whose name shares its longest prefix."""
    folder = model.parent
    out = []
    for f in files:
        if f == model or model_format(f) not in MODEL_FORMATS:
            continue
        if f.parent != folder and not (f.parent.parent == folder
                                       and f.parent.name.lower() in CLIP_FOLDERS):
            continue
        try:
            if probe(f).animation_only:
                out.append(str(f.relative_to(folder)))
        except ProbeError:
            continue
    return sorted(out)


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a.lower(), b.lower(), strict=False):
        if x != y:
            break
        n += 1
    return n


def discover(root: Path, model_files: list[Path], sidecar_dirs: set[Path],
             probe: Callable[[Path], ModelProbe]) -> tuple[list[Path], dict[Path, list[str]],
                                                           set[Path]]:
    """(skinned models without a sidecar, their clip files, every file that belongs to a
    character: models and clips, sidecar folders' models included) among ``model_files``.

    An egg clip file goes with the model beside it (several models in one folder: the one whose
    name shares its longest prefix); a glTF clip-only file (no mesh: Mixamo's "without skin"
    downloads) goes with the nearby character whose skeleton it fits best (joint names and
    hierarchy, ``core.skeleton_guess.skeleton_match``), and with none when none fits."""
    models: list[Path] = []
    clip_of: dict[Path, list[str]] = {}
    owned: set[Path] = set()
    for f in model_files:
        if any(d == f.parent or d in f.parents for d in sidecar_dirs):
            owned.add(f)
            continue
        if model_format(f) not in MODEL_FORMATS:
            continue
        try:
            p = probe(f)
        except ProbeError:
            continue
        if p.skinned and not p.animation_only:
            models.append(f)
    gltf_claims: dict[Path, tuple[float, Path]] = {}
    for m in models:
        clips = clip_files_near(m, model_files, probe)
        if sum(1 for o in models if o.parent == m.parent) > 1:
            clips = [c for c in clips if model_format(m.parent / c) not in ("glb", "gltf")
                     and max(_common_prefix(Path(c).name, o.name) for o in models
                             if o.parent == m.parent) == _common_prefix(Path(c).name, m.name)]
        else:
            clips = [c for c in clips if model_format(m.parent / c) not in ("glb", "gltf")]
        clip_of[m] = clips
        owned.add(m)
        owned.update(m.parent / c for c in clips)
        for c in clip_files_near(m, model_files, probe):
            f = m.parent / c
            if model_format(f) not in ("glb", "gltf"):
                continue
            score = skeleton_match(probe(m).joint_parents, probe(f).joint_parents)
            if score >= SKELETON_MATCH_MIN and score > gltf_claims.get(f, (0.0, m))[0]:
                gltf_claims[f] = (score, m)
    for f, (_, m) in sorted(gltf_claims.items()):
        clip_of[m].append(str(f.relative_to(m.parent)))
        owned.add(f)
    for m in models:
        clip_of[m].sort()
    return models, clip_of, owned


def skipped_table(root: Path, files: list[Path], used: set[Path],
                  probe: Callable[[Path], ModelProbe]) -> pd.DataFrame:
    """A row for every model file that is neither a level, a character nor one of a
    character's clips, with the reason: nothing in the library is dropped in silence."""
    rows = []
    for f in sorted(files):
        if f in used or model_format(f) is None:
            continue
        rel = str(f.relative_to(root))
        pack = Path(rel).parts[0] if len(Path(rel).parts) > 1 else ""
        try:
            p = probe(f)
        except ProbeError as exc:
            what = exc.detail if exc.reason == "unreadable" else f"{exc.reason}: {exc.detail}"
            rows.append({"path": rel, "pack": pack, "reason": f"unreadable: {what[:200]}",
                         "detail": exc.detail})
            continue
        if p.animation_only:
            reason, detail = ("clip-only file, no character with its skeleton",
                              f"{len(p.joints)} joints, clips {p.animations[:5]}; no skinned "
                              f"model beside it (or in its folder's parent) has a skeleton that "
                              f"fits {SKELETON_MATCH_MIN:.0%} of it")
        elif p.unskinned_animation and not p.skinned:
            reason, detail = (f"animated without skin ({p.unskinned_animation})",
                              f"clips {p.animations[:5]}: the engine animates characters "
                              "through skins only, and a small animated model is no level")
        elif p.skinned:
            reason, detail = "skinned model in a character folder, not used", \
                "a character.json beside it names another model"
        else:
            reason, detail = "model in a character folder", \
                "a prop or part of a character pack: neither a level nor a character"
        rows.append({"path": rel, "pack": pack, "reason": reason, "detail": detail})
    return pd.DataFrame(rows, columns=SKIPPED_COLUMNS)
