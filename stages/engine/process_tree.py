"""Processes as /proc (Linux) shows them: the project's one reader of /proc/<pid>/."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

_PROC = Path("/proc")


def all_pids(exclude: int | None = None) -> list[int]:
    """Every process id /proc lists now (``exclude`` left out), in /proc's order."""
    return [int(d.name) for d in _PROC.iterdir()
            if d.name.isdigit() and int(d.name) != exclude]


def proc_stat(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat (pid, command name, state, ppid, …; field ``i`` of
    proc(5) at index ``i - 1``), or None when the process is gone."""
    try:
        raw = (_PROC / str(pid) / "stat").read_text()
        # the command name is in parentheses and may hold spaces and parentheses
        return [raw[: raw.index("(")].strip(), raw[raw.index("(") + 1: raw.rindex(")")],
                *raw[raw.rindex(")") + 2:].split()]
    except (OSError, ValueError):
        return None


def process_state(pid: int) -> str | None:
    """The state letter of ``pid`` (R, S, D, Z, …), or None when it is gone."""
    st = proc_stat(pid)
    return st[2] if st and len(st) > 2 else None


def is_running(pid: int) -> bool:
    """``pid`` exists and is neither a zombie nor dead."""
    return process_state(pid) not in ("Z", "X", None)


def command_line(pid: int) -> str:
    """The command line of ``pid``, arguments joined by spaces (OSError when it is gone)."""
    return (_PROC / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(
        errors="replace")


def environment(pid: int) -> list[bytes]:
    """The ``KEY=value`` entries of ``pid``'s environment (OSError when it is gone or not
    ours to read)."""
    return (_PROC / str(pid) / "environ").read_bytes().split(b"\0")


def process_tree(pids: Iterable[int], exclude: int | None = None) -> list[int]:
    """``pids`` and every live process below them, sorted; ``exclude`` (and what is below it)
    left out. Parents come from each process's /proc/<pid>/stat, which a process that retitles
    itself (Ray's agents) cannot overwrite."""
    children: dict[int, list[int]] = {}
    for pid in all_pids():
        st = proc_stat(pid)
        if st is None or len(st) < 4:
            continue
        try:
            children.setdefault(int(st[3]), []).append(pid)
        except ValueError:
            continue
    out: set[int] = set()
    todo = list(pids)
    while todo:
        p = todo.pop()
        if p in out or p == exclude:
            continue
        out.add(p)
        todo += children.get(p, [])
    return sorted(out)
