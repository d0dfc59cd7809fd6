"""How a step's engine process ended, as the node runner records it: a reason code (empty for
success) and a detail line (DESIGN §6; the codes are listed in docs/cluster.md)."""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path

from ..core.device_faults import EXIT_REASONS
from .steps import Step


def signal_name(rc: int) -> str:
    """The signal that ended a process with return code ``rc`` ('' when it exited)."""
    if rc >= 0:
        return ""
    try:
        return signal.Signals(-rc).name
    except ValueError:
        return f"signal {-rc}"


def log_tail(log: Path, n: int = 3) -> str:
    """The last ``n`` lines of an engine log on one line (at most 600 characters)."""
    try:
        lines = log.read_text(errors="replace").strip().splitlines()
    except FileNotFoundError:
        return ""
    return " | ".join(lines[-n:])[-600:]


def classify(step: Step, rc: int, killed: str, completed: bool, stall_timeout_s: float,
             host_oom: Callable[[str], str]) -> tuple[str, str]:
    """(reason, detail) of a step that ended with ``rc``: ``killed`` is the runner's own kill
    (``stalled`` or ``timeout``), ``completed`` whether its completion marker is there, and
    ``host_oom(signal name)`` names a kill by the host's memory limit ('' when it was not)."""
    sig = signal_name(rc)
    if killed:
        return killed, (f"no progress for {stall_timeout_s:.0f} s" if killed == "stalled"
                        else f"over its {step.timeout_s:.0f} s limit")
    if rc < 0:
        why = host_oom(sig)
        return ("host_oom", why) if why else ("engine_crashed", f"killed by {sig}")
    if rc in EXIT_REASONS:  # a device fault the engine classified (core.device_faults)
        return EXIT_REASONS[rc], f"exit code {rc}: {log_tail(step.log)}"
    if rc > 0:
        return "engine_error", f"exit code {rc}: {log_tail(step.log)}"
    if not completed:
        return "no_completion", "exit 0 without a completion marker"
    return "", ""
