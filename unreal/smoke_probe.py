"""The smallest editor run (``wmforge unreal smoke``: one per GPU): the engine starts on the
adapter the command line names, this script logs the engine version one frame after start-up
and quits the editor. The launcher reads the Vulkan RHI's device-selection lines in its log."""

from __future__ import annotations

import unreal


class Probe:
    def __init__(self) -> None:
        self.handle: object | None = None

    def start(self) -> None:
        unreal.EditorPythonScripting.set_keep_python_script_alive(True)
        self.handle = unreal.register_slate_post_tick_callback(self.on_tick)

    def on_tick(self, delta_seconds: float) -> None:
        unreal.log(f"wmforge: probe: engine {unreal.SystemLibrary.get_engine_version()}")
        if self.handle is not None:
            unreal.unregister_slate_post_tick_callback(self.handle)
            self.handle = None
        unreal.log("wmforge: probe: finished")
        unreal.SystemLibrary.quit_editor()


if __name__ not in ("smoke_probe",):  # run by -ExecutePythonScript, not imported
    PROBE = Probe()
    PROBE.start()
