"""The walk of an asset library (paper §4.1): every file below the root, each folder once, and
the packs they belong to (each top-level folder of the root is a pack).

Bad input never crashes the walk and is never read past the library root: unreadable folders,
symlink loops, links pointing outside the root, FIFOs and devices, and names with ``..`` or
non-UTF-8 bytes each become an :class:`Entry` with a problem (a reason code) instead of a file.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Entry:
    """One file found under the library root (or a problem found instead of a file)."""

    rel: str  # path relative to the root, safe to print
    path: Path | None  # None when the entry must not be read
    problem: str | None = None
    detail: str = ""


def _safe_rel(root: Path, p: Path) -> str:
    rel = os.path.relpath(p, root)
    return rel.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _name_problem(name: str) -> tuple[str, str] | None:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return "non_utf8_name", "file name is not valid UTF-8"
    if ".." in name:
        return "unsafe_name", "file name contains '..'"
    return None


def walk_library(root: Path) -> Iterator[Entry]:
    """Yield every file below ``root``, following links only inside the root, each dir once."""
    root = root.resolve()
    seen: set[str] = set()

    def walk(d: Path) -> Iterator[Entry]:
        try:
            real = os.path.realpath(d)
            if real in seen:
                return
            seen.add(real)
            entries = sorted(os.scandir(d), key=lambda e: e.name)
        except OSError as exc:
            yield Entry(_safe_rel(root, d), None, "unreadable", f"cannot list folder: {exc}")
            return
        for e in entries:
            p = Path(e.path)
            rel = _safe_rel(root, p)
            bad = _name_problem(e.name)
            if bad:
                yield Entry(rel, None, *bad)
                continue
            if e.is_symlink():
                try:
                    os.stat(p)
                except OSError as exc:
                    if exc.errno == errno.ELOOP:
                        yield Entry(rel, None, "symlink_loop", "symbolic link loop")
                    else:
                        yield Entry(rel, None, "unreadable", f"dangling link: {exc.strerror}")
                    continue
                target = Path(os.path.realpath(p))
                if target != root and root not in target.parents:
                    yield Entry(rel, None, "link_outside_root",
                                "symbolic link points outside the library root; not read")
                    continue
            try:
                is_dir = e.is_dir()
            except OSError as exc:
                yield Entry(rel, None, "unreadable", str(exc))
                continue
            if is_dir:
                yield from walk(p)
            elif not e.is_file():
                yield Entry(rel, None, "not_a_regular_file",
                            "a FIFO, socket or device, not a file; not read")
            else:
                yield Entry(rel, p)

    yield from walk(root)


def group_by_pack(root: Path, entries: list[Entry]) -> tuple[dict[str, list[Entry]], list[Entry]]:
    """(entries by pack, entries directly in ``root``): each top-level folder of ``root`` is a
    pack, listed (with no entries) also when the walk found nothing in it; a linked top-level
    folder is a pack only through what the walk found in it."""
    by_pack: dict[str, list[Entry]] = {}
    loose_root: list[Entry] = []
    for e in entries:
        parts = Path(e.rel).parts
        if len(parts) == 1:
            loose_root.append(e)
        else:
            by_pack.setdefault(parts[0], []).append(e)
    for d in sorted(os.listdir(root)):
        if (root / d).is_dir() and not (root / d).is_symlink() and d not in by_pack:
            by_pack[d] = []
    return by_pack, loose_root
