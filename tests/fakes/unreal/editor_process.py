"""``UnrealEditor-Cmd`` for tests: the fake editor (``FakeEditor``) run as a process,
``python -m tests.fakes.unreal.editor_process <project> [map] -ExecutePythonScript=<script>``, so
the launcher and the node runner drive it like the real one. Its world comes from the JSON file
named by ``WMFORGE_FAKE_WORLD`` (maps, skeletal meshes, animations, auto-play sequence actors,
``crash_after_jobs``); a crash ends the process with SIGSEGV after Unreal's crash banner. Like
Unreal it refuses root, unless the world says ``"refuse_root": false`` (this machine's Python
lives under /root, so the tests cannot run it as another user)."""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
from pathlib import Path

from tests.fakes.unreal import namespace as fu
from tests.fakes.unreal.editor import FakeEditor


def world_from(doc: dict) -> FakeEditor:
    assets: dict = {p: fu.SkeletalMesh(p) for p in doc.get("meshes", [])}
    assets.update({p: fu.AnimSequence(p) for p in doc.get("animations", [])})
    actors = [fu.LevelSequenceActor(auto_play=bool(a)) for a in doc.get("sequence_actors", [])]
    return FakeEditor(doc["maps"], assets, fps=int(doc.get("fps", 30)), level_actors=actors,
                         crash_after_jobs=doc.get("crash_after_jobs"), stdout=sys.stdout)


def main(argv: list[str]) -> int:
    positional = [a for a in argv if not a.startswith("-")]
    script = next(a.split("=", 1)[1] for a in argv if a.startswith("-ExecutePythonScript="))
    print(f"[2025.01.01-00.00.00:000][  0]LogInit: Display: fake editor: {' '.join(argv)}",
          flush=True)
    doc = json.loads(Path(os.environ["WMFORGE_FAKE_WORLD"]).read_text())
    if os.geteuid() == 0 and doc.get("refuse_root", True):  # compiled into Unreal (FACTS)
        print("Refusing to run with the root privileges.", flush=True)
        return 1
    ed = world_from(doc)
    rc = ed.run(Path(script), {}, positional[1] if len(positional) > 1 else "")
    if rc == 139:
        print("Engine crash handling finished; re-raising signal 11 for the default handler. "
              "Good bye.", flush=True)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        signal.signal(signal.SIGSEGV, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGSEGV)
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
