"""Files of a pack → Unreal object paths. The trajectory records library paths (a pack's
``.uasset``/``.umap`` files); the editor loads objects by ``/Game/...`` path: the part after
the pack's last ``Content`` folder, without the extension. Standard library only."""

from __future__ import annotations

from pathlib import PurePosixPath


def object_path(path: str, near: str = "") -> str:
    """``/Game/...`` paths pass unchanged; ``…/Content/City/Maps/Downtown.umap`` →
    ``/Game/City/Maps/Downtown``; a bare clip name (``Walk`` or ``Walk.uasset``) is looked up
    beside ``near`` (the character's model)."""
    if path.startswith("/Game/") or path.startswith("/Script/"):
        return path
    p = PurePosixPath(path)
    if len(p.parts) == 1 and near:
        base = PurePosixPath(object_path(near)).parent
        return str(base / p.stem)
    if "Content" not in p.parts:
        raise ValueError(f"{path}: not inside a pack's Content folder and not a /Game/ path")
    k = len(p.parts) - 1 - p.parts[::-1].index("Content")
    return "/Game/" + str(PurePosixPath(*p.parts[k + 1:]).with_suffix(""))


def map_object_path(path: str) -> str:
    """A map's package path (``/Game/City/Maps/Downtown``, what the editor opens) → its object
    path (``/Game/City/Maps/Downtown.Downtown``), what a SoftObjectPath names (MRQ's job.map);
    an object path passes unchanged."""
    last = path.rsplit("/", 1)[-1]
    if not path.startswith("/") or not last:
        raise ValueError(f"{path!r}: not an Unreal package path such as /Game/Maps/Level")
    return path if "." in last else f"{path}.{last}"
