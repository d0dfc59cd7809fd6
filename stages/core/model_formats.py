"""Model file formats: which one a file is by its name, whether an Unreal package carries its
tag. Standard library only."""

from __future__ import annotations

from pathlib import Path

LEVEL_SUFFIXES = (".glb", ".gltf", ".egg", ".egg.pz", ".bam", ".obj", ".umap", ".fbx")
# FBX is measured through Panda3D's Assimp loader in a child process (stages.engine.fbx_probe),
# never here: probe_model refuses it, the inventory routes it there
ENGINE_LOADED_SUFFIXES = (".fbx",)
UNREAL_PACKAGE_TAG = 0x9E2A83C1
UNREAL_PACKAGE_SUFFIXES = (".umap", ".uasset")


def unreal_package_problem(path: Path) -> tuple[str, str] | None:
    """An Unreal package (.umap, .uasset) starts with the package tag 0x9E2A83C1 (bytes
    C1 83 2A 9E); a file without it is not one (truncated, a placeholder, another format).
    Returns (reason, detail) for a ``broken`` row, or None."""
    if path.suffix.lower() not in UNREAL_PACKAGE_SUFFIXES:
        return None
    try:
        with path.open("rb") as fh:
            head = fh.read(4)
    except OSError as exc:
        return "unreadable", f"{path.name}: {exc.strerror or exc}"
    if len(head) < 4 or int.from_bytes(head, "little") != UNREAL_PACKAGE_TAG:
        return ("not_unreal_package", f"{path.name}: starts with {head.hex() or 'nothing'}, "
                f"expected the Unreal package tag {UNREAL_PACKAGE_TAG:#010x} (c1832a9e)")
    return None


def model_format(path: Path) -> str | None:
    """The format of ``path`` by its name (``"glb"``, ``"egg.pz"``, …), or None."""
    name = path.name.lower()
    for suf in LEVEL_SUFFIXES:
        if name.endswith(suf):
            return suf.lstrip(".")
    return None
