"""``UnrealEditor-Cmd`` for tests: the fake editor (``FakeEditor``) run as a process,
``python -m tests.fakes.unreal.editor_process <project> [map] -ExecutePythonScript=<script>``, so
the launcher and the node runner drive it like the real one. Its world comes from the JSON file
named by ``WMFORGE_FAKE_WORLD`` (maps, skeletal meshes, animations, auto-play sequence actors,
``crash_after_jobs``); a crash ends the process with SIGSEGV after Unreal's crash banner. Like
Unreal it refuses root, unless the world says ``"refuse_root": false`` (this machine's Python
lives under /root, so the tests cannot run it as another user).

Also as Unreal does, when the world asks: the Vulkan RHI's device-selection lines for
``-graphicsadapter=N`` among ``"vulkan_devices"`` (the 5.x format strings, falling back to
device 0 when N is out of range); ``"cold_start_s"`` seconds of shader compilation (its real
log lines, no script running yet); and after the script quit, ``"on_quit": "hang"`` (the
process never exits) or ``"crash"`` (SIGSEGV after the completion marker)."""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
import time
from pathlib import Path

from tests.fakes.unreal import namespace as fu
from tests.fakes.unreal.editor import FakeEditor


def world_from(doc: dict) -> FakeEditor:
    assets: dict = {p: fu.SkeletalMesh(p) for p in doc.get("meshes", [])}
    assets.update({p: fu.AnimSequence(p) for p in doc.get("animations", [])})
    actors = [fu.LevelSequenceActor(auto_play=bool(a)) for a in doc.get("sequence_actors", [])]
    return FakeEditor(doc["maps"], assets, fps=int(doc.get("fps", 30)), level_actors=actors,
                      crash_after_jobs=doc.get("crash_after_jobs"), stdout=sys.stdout,
                      fixed_step="-UseFixedTimeStep" in sys.argv)


def _say(category: str, text: str) -> None:
    print(f"[2025.01.01-00.00.00:000][  0]{category}: {text}", flush=True)


def vulkan_lines(devices: list[str], argv: list[str]) -> None:
    """What VulkanRHI.cpp (5.x) logs selecting a device for -graphicsadapter=N."""
    _say("LogVulkanRHI", "Display: Built with Vulkan header version 1.3.290")
    n = next((int(a.split("=", 1)[1]) for a in argv if a.lower().startswith(
        "-graphicsadapter=")), -1)
    if n >= 0:
        if n >= len(devices):
            _say("LogVulkanRHI", f"Warning: Tried to use graphics adapter at index {n} as "
                 f"specified by command line, but only {len(devices)} Adapter(s) found. "
                 "Falling back to first device...")
            n = 0
        _say("LogVulkanRHI", f"Using device at index {n} of {len(devices)} as specfified by "
             "command line...")
    _say("LogVulkanRHI", "Creating Vulkan Device using VkPhysicalDevice 0x55d0c6a2e0f0.")


def cold_start(seconds: float) -> None:
    """A first start: shader compilation before any script runs (the real line format)."""
    left, t0 = 5000, time.monotonic()
    while time.monotonic() - t0 < seconds:
        _say("LogShaderCompilers", f"Display: Worker (3/13): shaders left to compile {left}")
        left -= 7
        time.sleep(0.25)


def main(argv: list[str]) -> int:
    positional = [a for a in argv if not a.startswith("-")]
    script = next(a.split("=", 1)[1] for a in argv if a.startswith("-ExecutePythonScript="))
    script = script[1:-1] if script[:1] == script[-1:] == '"' else script  # FParse::Value
    print(f"[2025.01.01-00.00.00:000][  0]LogInit: Display: fake editor: {' '.join(argv)}",
          flush=True)
    doc = json.loads(Path(os.environ["WMFORGE_FAKE_WORLD"]).read_text())
    if os.geteuid() == 0 and doc.get("refuse_root", True):  # compiled into Unreal (FACTS)
        print("Refusing to run with the root privileges.", flush=True)
        return 1
    if doc.get("vulkan_devices"):
        vulkan_lines(list(doc["vulkan_devices"]), argv)
    cold_start(float(doc.get("cold_start_s", 0.0)))
    ed = world_from(doc)
    rc = ed.run(Path(script), {}, positional[1] if len(positional) > 1 else "")
    if rc == 0 and doc.get("on_quit") == "hang":
        _say("LogExit", "Preparing to exit.")
        while True:  # a hang on exit (a render thread that never joins)
            time.sleep(1.0)
    if rc == 0 and doc.get("on_quit") == "crash":
        _say("LogExit", "Preparing to exit.")
        rc = 139
    if rc == 139:
        print("Engine crash handling finished; re-raising signal 11 for the default handler. "
              "Good bye.", flush=True)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        signal.signal(signal.SIGSEGV, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGSEGV)
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
