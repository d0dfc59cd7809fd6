"""A fake Unreal Editor for the scripts in ``unreal/`` — no Unreal runs here.

The modules, each importing only the ones listed before it (``scripts/import_graph.py`` checks
that the graph has no cycle):

- ``host``: what the ``unreal`` calls ask of the running editor (a protocol), and which editor
  runs now; ``FakeCrash``.
- ``structs``: Unreal's structs and enums (``Vector``, ``Rotator``, ``FrameRate``, …).
- ``objects``: ``Object`` and the actors and components the scripts spawn and read.
- ``materials``: post-process materials made by script (what they output).
- ``frame``: cm/left-handed ↔ m/right-handed and a camera rotator's basis, written here
  independently of ``unreal/ue_frame.py`` so that the tests check it rather than reuse it.
- ``sequencer``: Level Sequences, their bindings, tracks, sections and channels; asset tools.
- ``movie_pipeline``: the Movie Render Queue job, its settings, queue and executors.
- ``subsystems``: editor subsystems, the static libraries, logging, Slate callbacks.
- ``namespace``: the module a script gets as ``unreal`` (every name above, nothing more).
- ``mrq_layers``: the EXR passes of a ground-truth job (depth, normals, Cryptomatte ids).
- ``mrq_render``: what the editor renders for a queue (ray-cast depth pictures).
- ``editor``: ``FakeEditor``, one editor process: its worlds, the PIE tick on the embedded
  engine, and ``run``, which installs ``namespace`` as ``sys.modules["unreal"]`` for the script.
- ``editor_process``: ``python -m tests.fakes.unreal.editor_process``, the editor as a process
  (``UnrealEditor-Cmd`` for the launcher tests).

This package's own ``__init__`` imports nothing, so importing one module never runs the rest.
"""
