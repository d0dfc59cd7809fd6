"""The seam between the fake ``unreal`` calls and the fake editor that runs the script.

The calls (``objects``, ``sequencer``, ``subsystems``) reach the editor only through
:func:`running_editor` and only for what :class:`EditorHost` declares; ``FakeEditor``
(``editor.py``) implements it and installs itself with :func:`install` while a script runs. So
the calls never import the editor, and the editor imports them: one direction.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol


class FakeCrash(BaseException):
    """The fake engine crashed (the banner is in the log). Not an Exception: a script's
    ``except Exception`` cannot catch an engine crash any more than in Unreal."""


class EditorHost(Protocol):
    """What the ``unreal`` calls read and do on the running editor."""

    engine: Any  # the embedded engine: level geometry for traces
    editor_world: Any
    pie_world: Any  # None outside PIE
    assets: dict[str, Any]  # object path → loaded asset
    disk: dict[str, Any]  # object path → asset saved in the project (outlives the editor)
    world_dt: float  # the world's delta seconds this frame (fixed step or wall clock)
    sequences: dict[str, Any]  # every sequence made, deleted or not
    subsystems: dict[type, Any]
    callbacks: list[Callable[[float], None]]  # Slate post-tick callbacks
    requests: list[str]  # "begin_play" / "end_play", served on the next frame
    calls: list[str]  # editor calls the tests check the order of
    render: Any  # the render in progress (None when none)
    keep_alive: bool
    quit_requested: bool
    saved: list[str]
    deleted: list[str]
    pawns_at_spawn: list[list[str]]
    world_partition_bounds: Any  # a Box for a World Partition map, else None
    partition: Any  # the streaming cells of a World Partition PIE world, else None

    def open_map(self, path: str) -> bool: ...

    def add_actor(self, world: Any, a: Any) -> None: ...

    def destroy(self, a: Any) -> None: ...

    def pie_characters(self) -> list[Any]: ...

    def start_render(self, queue: Any, executor: Any) -> None: ...

    def write_log(self, category: str, verbosity: str, text: str) -> None: ...

    def crash(self, assertion: str, frame_fn: str) -> None: ...


_RUNNING: EditorHost | None = None


def install(editor: EditorHost | None) -> None:
    """Make ``editor`` the one the calls talk to (None: no script runs)."""
    global _RUNNING
    _RUNNING = editor


def running_editor() -> EditorHost:
    assert _RUNNING is not None, "no FakeEditor is running a script"
    return _RUNNING
