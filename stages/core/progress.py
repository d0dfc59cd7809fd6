"""The progress protocol (paper §8.2): the one-way channel from an engine process to the
scheduler. Standard library only: Unreal's Python writes the same lines.

An engine process appends one fixed-format line per finished trajectory to its instance's
``progress.log`` (flushed and fsynced before the next trajectory starts) and writes the
``COMPLETE`` marker only after a normal shutdown. The scheduler only reads. Stage I and Stage II
use the same line; a torn last line (a crash mid-write) is ignored by the reader.
"""

from __future__ import annotations

import os
from pathlib import Path

PROGRESS = "progress.log"
COMPLETE = "COMPLETE"
RECOVERED = "RECOVERED"


def progress_line(traj: str, frames: int, key: str) -> str:
    """``DONE <traj> frames=<6 digits> key=<16 hex>`` — one per finished trajectory."""
    if len(key) != 16 or " " in traj:
        raise ValueError(f"progress line: bad trajectory name {traj!r} or key {key!r}")
    return f"DONE {traj} frames={frames:06d} key={key}\n"


def parse_progress(text: str) -> dict[str, tuple[int, str]]:
    """traj → (frames, key) for every well-formed line."""
    out: dict[str, tuple[int, str]] = {}
    for line in text.splitlines():
        parts = line.split()
        if (len(parts) == 4 and parts[0] == "DONE" and parts[2].startswith("frames=")
                and parts[3].startswith("key=") and len(parts[3]) == 20):
            try:
                out[parts[1]] = (int(parts[2][7:]), parts[3][4:])
            except ValueError:
                continue
    return out


def read_progress(inst: Path) -> dict[str, tuple[int, str]]:
    """The finished trajectories an instance folder's ``progress.log`` names."""
    p = Path(inst) / PROGRESS
    try:
        return parse_progress(p.read_text(errors="replace"))
    except FileNotFoundError:
        return {}


def append_progress(path: Path, traj: str, frames: int, key: str) -> None:
    """Append one line durably (the scheduler may read it the moment it lands)."""
    with open(path, "a") as f:
        f.write(progress_line(traj, frames, key))
        f.flush()
        os.fsync(f.fileno())
