"""Unreal Engine log → failure reason code (paper Table 2, plus generic crashes).

A node-runner snapshot carries the code (``log_reason``) beside the runner's own reason
(stalled, engine_crashed, no_completion, ...). Rules run most specific first; each returns the
line that decided it, so a post-mortem starts at the evidence. The patterns follow the real
formats of Unreal's Linux logs (``[2025.01.01-10.00.00:000][  0]LogCategory: Verbosity: text``),
its crash banner, the Vulkan RHI, Movie Render Queue and the editor's Python.

Codes (Table 2 first): skeletal_assert_after_switch, world_partition_init_crash,
sequence_took_camera, root_motion_conflict, gpu_unavailable, no_vulkan_device, gpu_device_lost,
gpu_adapter_fallback, out_of_memory, gpu_hung, slot_leftovers, log_growth; run_as_root; generic:
assertion_failed, fatal_error, signal_crash, mrq_error, python_error.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

TABLE2 = ("skeletal_assert_after_switch", "world_partition_init_crash", "sequence_took_camera",
          "root_motion_conflict", "gpu_unavailable", "no_vulkan_device", "gpu_device_lost",
          "out_of_memory", "gpu_hung", "slot_leftovers", "log_growth")
GENERIC = ("assertion_failed", "fatal_error", "signal_crash", "mrq_error", "python_error")
MAX_LOG_BYTES = 512 * 1024 * 1024  # an engine log past this is itself a failure (disk)
FLOOD_SHARE = 0.5  # one message (timestamps stripped) making up this share of many lines
FLOOD_MIN_LINES = 20000
CRASH_CONTEXT_LINES = 60  # lines after a crash marker read as its stack

_PREFIX = re.compile(r"^\[\d{4}\.\d\d\.\d\d-\d\d\.\d\d\.\d\d:\d{3}\]\[\s*\d+\]")
CRASH = re.compile(r"Assertion failed:|=== Critical error: ===|Fatal error!|Caught signal \d+|"
                   r"Signal \d+ caught|Unhandled Exception: SIG|appError called|"
                   r"re-raising signal \d+")
SKELETAL = re.compile(r"Skeletal|SkinnedMesh|SkinnedAsset|Skeleton|BoneContainer|RequiredBones|"
                      r"AnimInstance|SkelMesh|GPUSkin|RefSkeleton|BoneIndex|LODRenderData",
                      re.I)
WORLD_PARTITION = re.compile(r"WorldPartition|UWorldPartition|WorldPartitionSubsystem|"
                             r"WorldPartitionRuntime|ActorDesc", re.I)

# (code, pattern) — the first whose pattern matches a line decides (after the crash rules)
LINE_RULES: list[tuple[str, re.Pattern[str]]] = [
    ("run_as_root", re.compile(r"Refusing to run with the root privileges")),
    ("gpu_adapter_fallback", re.compile(
        r"wmforge: adapter_fallback|adapter_fallback: asked for|"
        r"LogVulkanRHI: Warning: Tried to use (graphics adapter at index \d+|"
        r"r\.GraphicsAdapter=\d+).*Falling back to first device", re.I)),
    ("gpu_device_lost", re.compile(r"VK_ERROR_DEVICE_LOST|TerminateOnGPUCrash|"
                                   r"GPU crash|GPUCrash|device (was )?lost", re.I)),
    ("out_of_memory", re.compile(
        r"Ran out of memory allocating|Out of memory|OutOfMemory|VK_ERROR_OUT_OF_(DEVICE|HOST)_"
        r"MEMORY|oom-kill|Out of video memory|Killed process \d+ .*UnrealEditor", re.I)),
    ("gpu_hung", re.compile(r"NVRM: Xid|GPU has fallen off the bus|GPU hang|"
                            r"task \S+ blocked for more than \d+ seconds|"
                            r"uninterruptible", re.I)),
    ("no_vulkan_device", re.compile(
        r"Cannot find a compatible Vulkan|Failed to find any Vulkan|No Vulkan devices|"
        r"Found 0 device\(s\)|VK_ERROR_INCOMPATIBLE_DRIVER|vkEnumeratePhysicalDevices .*failed|"
        r"Vulkan failed to initialize|Failed to create Vulkan instance|vkCreateInstance failed",
        re.I)),
    ("gpu_unavailable", re.compile(
        r"Failed to initialize NVML|NVIDIA-SMI has failed|no CUDA-capable device|"
        r"could not open /dev/nvidia|/dev/nvidia\S* .*(No such file|Permission denied)|"
        r"VK_ERROR_INITIALIZATION_FAILED|RHI (failed|could not) (to )?initiali[sz]e|"
        r"Failed to create RHI|wmforge: gpu_unavailable", re.I)),
    ("sequence_took_camera", re.compile(
        r"wmforge: camera_takeover|LevelSequence.*(auto-?play|AutoPlay).*(camera|cut)|"
        r"camera cut.*(LevelSequenceActor|showcase)", re.I)),
    ("root_motion_conflict", re.compile(r"wmforge: root_motion_conflict|root motion.*"
                                        r"(not locked|conflict|fighting)", re.I)),
    ("slot_leftovers", re.compile(r"cleaning leftovers of an interrupted run|"
                                  r"wmforge: slot_leftovers", re.I)),
    ("log_growth", re.compile(r"wmforge: log_growth|No space left on device|"
                              r"log file .*(too large|exceed)", re.I)),
    ("mrq_error", re.compile(r"LogMovieRenderPipeline: Error:|Render Executor: Error|"
                             r"wmforge: stage2: mrq_error|MoviePipeline.*(failed|errored)",
                             re.I)),
    ("python_error", re.compile(r"LogPython: Error:|^Traceback \(most recent call last\)")),
]


@dataclass
class LogVerdict:
    reason: str  # "" when nothing failed
    line: str = ""  # the evidence (timestamp prefix stripped)
    line_no: int = 0  # 1-based
    crash: bool = False
    progress: dict = field(default_factory=dict)  # what the log shows of progress

    def as_dict(self) -> dict:
        return {"log_reason": self.reason, "log_evidence": self.line,
                "log_line": self.line_no, "log_progress": self.progress}


def strip_prefix(line: str) -> str:
    return _PREFIX.sub("", line).strip()


def progress_of(lines: list[str]) -> dict:
    """Progress the engine reported: shader compilation, MRQ jobs, our own lines."""
    out: dict = {}
    for raw in lines:
        s = strip_prefix(raw)
        m = re.search(r"(\d+) shaders? (left|remaining) to compile|"
                      r"shaders left to compile:? ?(\d+)", s, re.I)
        if m:
            out["shaders_left"] = int(m.group(1) or m.group(3))
        m = re.search(r"MoviePipelineLinearExecutorBase finished (\d+) jobs", s)
        if m:
            out["mrq_jobs_finished"] = int(m.group(1))
        m = re.search(r"MoviePipelineLinearExecutorBase starting (\d+) jobs", s)
        if m:
            out["mrq_jobs_started"] = int(m.group(1))
        if "wmforge: stage1: DONE" in s or "wmforge: stage2: rendered" in s:
            out["trajectories"] = out.get("trajectories", 0) + 1
    return out


def classify_text(text: str, signal_name: str = "") -> LogVerdict:
    """The reason code of one engine log (and the exit signal, when the runner saw one)."""
    lines = text.splitlines()
    prog = progress_of(lines)
    # 1. crashes: the crash marker and the stack below it decide between Table 2's engine cases
    for i, raw in enumerate(lines):
        s = strip_prefix(raw)
        if not CRASH.search(s):
            continue
        ctx = "\n".join(strip_prefix(x) for x in lines[i:i + CRASH_CONTEXT_LINES])
        for code, pat in LINE_RULES[:5]:  # device lost, OOM, ... explain a crash better
            hit = next((strip_prefix(x) for x in lines if pat.search(strip_prefix(x))), "")
            if hit and code in ("gpu_device_lost", "out_of_memory", "gpu_hung"):
                return LogVerdict(code, hit, _line_no(lines, hit), True, prog)
        if SKELETAL.search(ctx):
            return LogVerdict("skeletal_assert_after_switch", s, i + 1, True, prog)
        if WORLD_PARTITION.search(ctx):
            return LogVerdict("world_partition_init_crash", s, i + 1, True, prog)
        code = ("assertion_failed" if "Assertion failed" in ctx else
                "signal_crash" if re.search(r"signal \d+|SIG[A-Z]+", ctx, re.I) else
                "fatal_error")
        return LogVerdict(code, s, i + 1, True, prog)
    # 2. line rules, most specific first
    for code, pat in LINE_RULES:
        for i, raw in enumerate(lines):
            s = strip_prefix(raw)
            if pat.search(s):
                return LogVerdict(code, s, i + 1, False, prog)
    if signal_name == "SIGKILL" and not lines:
        return LogVerdict("out_of_memory", "killed by SIGKILL with an empty log", 0, True, prog)
    return LogVerdict("", "", 0, False, prog)


def _line_no(lines: list[str], stripped: str) -> int:
    for i, raw in enumerate(lines):
        if strip_prefix(raw) == stripped:
            return i + 1
    return 0


def flood(lines: list[str]) -> tuple[str, int] | None:
    """One message repeated over most of a long log (a log that grows without bound)."""
    if len(lines) < FLOOD_MIN_LINES:
        return None
    msg, n = Counter(strip_prefix(x) for x in lines).most_common(1)[0]
    return (msg, n) if n >= FLOOD_SHARE * len(lines) else None


def classify_log_file(path: Path, signal_name: str = "",
                      max_bytes: int = MAX_LOG_BYTES) -> LogVerdict:
    """Classify an engine log on disk; a log past ``max_bytes`` or flooded by one message is
    ``log_growth`` (only its tail is read)."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return classify_text("", signal_name)
    with open(path, "rb") as f:
        if size > max_bytes:
            f.seek(max(0, size - 4 * 1024 * 1024))
        text = f.read().decode("utf-8", errors="replace")
    verdict = classify_text(text, signal_name)
    if size > max_bytes and not verdict.crash:
        return LogVerdict("log_growth", f"engine log is {size} bytes (limit {max_bytes})", 0,
                          False, verdict.progress)
    if not verdict.reason:
        fl = flood(text.splitlines())
        if fl:
            return LogVerdict("log_growth", f"{fl[1]} lines of: {fl[0][:200]}", 0, False,
                              verdict.progress)
    return verdict
