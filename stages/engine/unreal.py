"""Launching Unreal Editor for the node runner (paper §5.3, §8.4, FACTS: Unreal).

Builds the command lines of both stages (UnrealEditor-Cmd, project and map, unattended, no
sound, stdout logging, off-screen rendering or a per-slot virtual display, fixed step for
Stage I, ini overrides), selects the slot's GPU with ``-graphicsadapter`` — the Vulkan device
whose UUID is the slot's NVML UUID, never an index guessed from CUDA order — and checks in the
log that the engine did not fall back to another adapter. Unreal refuses to run as root; so
does :func:`refuse_root`, naming the user to run as. Success is judged by progress lines and
verified frames, never by the exit code (a command-line MRQ render exits 0 when it failed).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from ..unreal_config import UnrealConfig

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "unreal"
STAGE_SCRIPTS = {"stage1": "stage1_pie.py", "stage2": "stage2_mrq.py", "probe": "smoke_probe.py"}
COMMON_FLAGS = ("-unattended", "-nosplash", "-nosound", "-NoLoadingScreen", "-NoScreenMessages",
                "-stdout", "-FullStdOutLogOutput", "-log")


class UnrealLaunchError(RuntimeError):
    """The editor cannot be launched as configured (root, missing editor, no such GPU)."""


def refuse_root(cfg: UnrealConfig, euid: int | None = None) -> None:
    """Unreal exits at once under root ("Refusing to run with the root privileges.") and leaves
    temporary files behind (§8.4); fail before starting it, naming the user to run as."""
    if (os.geteuid() if euid is None else euid) == 0:
        raise UnrealLaunchError(
            "Unreal Engine refuses to run as root (it prints 'Refusing to run with the root "
            f"privileges.' and exits): run the node runner as the unprivileged user "
            f"'{cfg.run_as}', e.g. `sudo -u {cfg.run_as} wmforge node run` "
            "(unreal.run_as names that user)")


# ------------------------------------------------------------------ GPU selection

def _norm_uuid(u: str) -> str:
    u = u.strip().lower()
    if u.startswith("gpu-"):
        u = u[4:]
    return u.replace("-", "")


def parse_vulkaninfo_summary(text: str) -> list[dict]:
    """``vulkaninfo --summary`` → one dict per GPU in Vulkan enumeration order
    (index, deviceName, deviceType, deviceUUID, ...)."""
    gpus: list[dict] = []
    cur: dict | None = None
    for line in text.splitlines():
        m = re.match(r"^GPU(\d+):\s*$", line.strip())
        if m:
            cur = {"index": int(m.group(1))}
            gpus.append(cur)
            continue
        if cur is not None:
            kv = re.match(r"^\s+(\w+)\s*=\s*(.*)$", line)
            if kv:
                cur[kv.group(1)] = kv.group(2).strip()
            elif line.strip() and not line.startswith((" ", "\t")):
                cur = None
    return gpus


def vulkan_devices() -> list[dict]:
    """The Vulkan devices this process sees, in Vulkan order: through the Vulkan loader
    (:mod:`stages.engine.vulkan_devices`), else ``vulkaninfo --summary``; empty without a
    loader or an ICD."""
    from .vulkan_devices import enumerate_devices

    devs = enumerate_devices()
    if devs:
        return devs
    exe = shutil.which("vulkaninfo")
    if exe is None:
        return []
    try:
        out = subprocess.run([exe, "--summary"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return parse_vulkaninfo_summary(out.stdout)


def adapter_for_uuid(gpu_uuid: str, devices: list[dict]) -> int:
    """The ``-graphicsadapter`` index (Vulkan order) of the device whose UUID is the slot's
    NVML UUID (NVIDIA's Vulkan deviceUUID is the same 16 bytes as ``nvidia-smi -L``'s)."""
    want = _norm_uuid(gpu_uuid)
    hits = [d["index"] for d in devices if _norm_uuid(str(d.get("deviceUUID", ""))) == want]
    if len(hits) != 1:
        listed = [(d["index"], d.get("deviceName"), d.get("deviceUUID")) for d in devices]
        raise UnrealLaunchError(f"GPU {gpu_uuid}: {'no' if not hits else 'several'} Vulkan "
                                f"device(s) with that UUID (Vulkan devices: {listed}); is the "
                                "NVIDIA Vulkan ICD (nvidia_icd.json) visible in the slot?")
    return hits[0]


# Vulkan RHI device selection as Unreal logs it (format strings of VulkanRHI.cpp; sources and
# sample lines: tests/data/unreal_logs/SOURCES.md):
# - UE 5.x SelectPhysicalDevice, an explicit -graphicsadapter=N (Log verbosity):
#     "Using device at index %d of %u as specfified by %s..."   (sic: "specfified")
#   and when N is out of range (Warning), before falling back to device 0:
#     "Tried to use graphics adapter at index %d as specified by %s, but only %d Adapter(s)
#      found. Falling back to first device..."
# - UE 4.26-5.0 FVulkanDynamicRHI::SelectAndInitDevice (Warning):
#     "Tried to use r.GraphicsAdapter=%d, but only %d Adapter(s) found. Falling back to first
#      device..."
# - UE 4.25 FVulkanDevice::InitGPU (Display): "Using Device %d: Geometry %d Tessellation %d"
_CHOSEN = (re.compile(r"LogVulkanRHI: (?:Display: )?Using device at index (\d+) of \d+"),
           re.compile(r"LogVulkanRHI: (?:Display: )?Using Device (\d+): Geometry"))
_FALLBACK = re.compile(r"LogVulkanRHI: Warning: Tried to use (?:graphics adapter at index "
                       r"(\d+)|r\.GraphicsAdapter=(\d+)).*Falling back to first device")
_VULKAN_RHI = re.compile(r"LogVulkanRHI: ")


def check_adapter(log_text: str, wanted: int) -> tuple[bool | None, str]:
    """Did the engine use Vulkan device ``wanted``? (True, line) / (False, line): a fallback
    warning, or a selection line naming another index; (None, "") when the log has no Vulkan
    RHI line at all (no RHI, or not Vulkan). A log with Vulkan RHI lines but no selection line
    is (None, "no selection line") — :func:`stages.engine.unreal_launch.judge` fails it."""
    chosen: tuple[int, str] | None = None
    for line in log_text.splitlines():
        if _FALLBACK.search(line):
            return False, line.strip()
        for pat in _CHOSEN:
            m = pat.search(line)
            if m and chosen is None:
                chosen = (int(m.group(1)), line.strip())
            if m and int(m.group(1)) != wanted:
                return False, line.strip()
    if chosen is not None:
        return True, chosen[1]
    if _VULKAN_RHI.search(log_text):
        return None, "no selection line"
    return None, ""


# ------------------------------------------------------------------ command lines

def map_object_path(level_file: str | Path) -> str:
    """A pack's level file → the map's object path: the part after the pack's last ``Content``
    folder, under ``/Game`` (``Packs/City/Content/City/Maps/Downtown.umap`` →
    ``/Game/City/Maps/Downtown``)."""
    parts = Path(level_file).parts
    if Path(level_file).suffix.lower() != ".umap" or "Content" not in parts:
        raise UnrealLaunchError(f"{level_file}: an Unreal level is a .umap file inside a pack's "
                                "Content folder")
    k = len(parts) - 1 - parts[::-1].index("Content")
    return "/Game/" + Path(*parts[k + 1:]).with_suffix("").as_posix()


def command_line(cfg: UnrealConfig, stage: str, map_path: str, adapter: int | None,
                 fps: int = 30, scripts: Path = SCRIPTS) -> list[str]:
    """The editor command of one stage (the script reads its spec from ``WMFORGE_SPEC``).
    ``-ExecutePythonScript``'s value is a command line of its own (script, then arguments):
    the script path is quoted so that a path with spaces stays one path."""
    if stage not in STAGE_SCRIPTS:
        raise ValueError(f"stage {stage!r}: expected one of {sorted(STAGE_SCRIPTS)}")
    if not cfg.editor or not cfg.project:
        raise UnrealLaunchError("unreal.editor and unreal.project must be set for engine=unreal "
                                f"(editor={cfg.editor!r}, project={cfg.project!r})")
    argv = [cfg.editor, cfg.project]
    if map_path:
        argv.append(map_path)
    argv.append(f'-ExecutePythonScript="{scripts / STAGE_SCRIPTS[stage]}"')
    argv += list(COMMON_FLAGS)
    if not cfg.virtual_display:
        argv.append("-RenderOffscreen")
    if adapter is not None:
        argv.append(f"-graphicsadapter={adapter}")
    if stage == "stage1":  # the controller advances one fixed step per frame (§6.1)
        argv += ["-UseFixedTimeStep", f"-FPS={fps}"]
    argv += [f"-ini:{o}" for o in cfg.ini_overrides]
    return argv


def virtual_display_argv(display: int, width: int = 1920, height: int = 1080) -> list[str]:
    """An X server for one slot (the paper gives each slot its own display)."""
    return ["Xvfb", f":{display}", "-screen", "0", f"{width}x{height}x24", "-nolisten", "tcp",
            "-noreset"]


def slot_display(cfg: UnrealConfig, slot: str) -> int:
    """Display number of a slot: display_base + a number unique to the slot name."""
    nums = [int(x) for x in re.findall(r"\d+", slot)] or [0]
    return cfg.display_base + (nums[0] * 16 + (nums[1] if len(nums) > 1 else 0))


def launcher_argv(stage: str, spec: str | Path) -> list[str]:
    """What a node-runner slot runs for engine=unreal: the launcher process, which builds the
    editor command (GPU of the slot, root check), runs it and judges the outcome."""
    import sys

    return [sys.executable, "-m", "stages.engine.unreal_launch", stage, str(spec)]
