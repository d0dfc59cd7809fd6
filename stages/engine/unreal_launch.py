"""The engine process of a node-runner slot with ``engine=unreal``:
``python -m stages.engine.unreal_launch stage1|stage2 <spec.json | instance folder>``.

It refuses root, maps the slot's GPU to its Vulkan adapter, starts Unreal Editor with the stage
script (its output becomes this process's output, the runner's engine log), and judges the
outcome by progress lines and frames — never by Unreal's exit code. Stage II: every trajectory
MRQ reports rendered (``rendered.jsonl``) is verified, encoded and published here, then gets
its progress line; ``COMPLETE`` is written only when every job has a line or a failure row.
On failure the verdict of the log classifier is printed as the last line and the exit code is 1.

Under root the editor runs as ``unreal.run_as``: the editor-side code (``unreal/`` and
``stages/core``) is copied into the step's folder, which that user owns with the folders it
writes (Stage I's trajectory output); every path it must read is checked first and a path it
cannot reach (a repository under /root) is an error naming it. The editor keeps the user's
supplementary groups (video/render: the GPU device nodes).

The node runner kills a slot whose watched files stop changing. A cold editor (first shader
compilation, derived-data cache misses) can spend many minutes before the stage script runs,
so the launcher reads the editor's log as it comes and touches the step's heartbeat on every
new line of engine progress (:data:`PROGRESS_LINE`). After the completion marker (or the
script's last log line) the editor has ``unreal.exit_grace_s`` to exit; one that hangs or
crashes on exit is killed and judged by what it produced.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from ..core.progress import COMPLETE, PROGRESS, append_progress, read_progress
from .process_tree import process_tree
from .unreal import (
    ROOT,
    SCRIPTS,
    STAGE_SCRIPTS,
    UnrealConfig,
    UnrealLaunchError,
    adapter_for_uuid,
    check_adapter,
    command_line,
    slot_display,
    virtual_display_argv,
    vulkan_devices,
)
from .unreal_log import classify_text
from .unreal_run_as import check_reachable, engine_user

RENDERED = "rendered.jsonl"  # written by unreal/stage2_mrq.py, one line per MRQ job
EDITOR_CODE = "wmforge-editor-py-"  # prefix of the temporary copy of unreal/ and stages/core
# engine progress while nothing else moves: shader compilation and derived-data cache misses
# of a cold start, asset builds, MRQ, our scripts (real line formats: tests/data/unreal_logs/
# cold_start_shaders.log and SOURCES.md)
PROGRESS_LINE = re.compile(
    r"LogShaderCompilers: .*shaders left to compile|LogMaterial: .*(shader map|compiling)|"
    r"LogStaticMesh: .*Building|LogTexture: .*Building textures|LogDerivedDataCache: |"
    r"LogMovieRenderPipeline: |LogWorldPartition: |LogPython: wmforge: ", re.I)
FINISHED_LINE = re.compile(r"wmforge: (stage[12]|probe): finished")
KILL_WAIT_S = 10.0  # SIGTERM to SIGKILL


def say(msg: str) -> None:
    print(f"wmforge: unreal: {msg}", flush=True)


def _pump(proc: subprocess.Popen, sink: list[str],
          on_line: Callable[[str], None] | None = None) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        sink.append(line)
        sys.stdout.write(line)
        sys.stdout.flush()
        if on_line is not None:
            on_line(line)


class LogHeartbeat:
    """Touches ``path`` (a file the node runner watches) on each new line of engine progress in
    the editor's log: a cold start compiling shaders is alive although no trajectory moves. A
    line repeating the last one verbatim does not count (a flood is not progress)."""

    def __init__(self, path: Path, min_interval_s: float = 1.0):
        self.path, self.min_interval_s = path, min_interval_s
        self.last = ""
        self.beats = 0
        self.at = 0.0

    def __call__(self, line: str) -> None:
        if not PROGRESS_LINE.search(line):
            return
        text = re.sub(r"^\[[^\]]*\]\[\s*\d+\]", "", line).strip()
        now = time.monotonic()
        if text == self.last or now - self.at < self.min_interval_s:
            return
        self.last, self.at = text, now
        self.beats += 1
        with contextlib.suppress(OSError):  # unwritable: the runner's stall check decides
            self.path.write_text(f"log {self.beats}: {text[:200]}\n")


def stage_editor_code(scripts: Path | None = None) -> Path:
    """Copy what the editor imports (``unreal/*.py``; ``stages/__init__.py`` and
    ``stages/core``) into a new temporary folder (not the step folder: a Stage II step folder is
    the render output that gets uploaded); returns that folder, its ``unreal/`` holds the
    scripts. The editor then needs nothing of the repository, which may sit where its user
    cannot read (e.g. under /root). The caller removes the folder after the run."""
    import tempfile

    dst = Path(tempfile.mkdtemp(prefix=EDITOR_CODE))
    dst.chmod(0o755)
    (dst / "unreal").mkdir(parents=True)
    for p in (scripts or SCRIPTS).glob("*.py"):
        shutil.copy2(p, dst / "unreal" / p.name)
    core = ROOT / "stages" / "core"
    shutil.copytree(core, dst / "stages" / "core",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copy2(ROOT / "stages" / "__init__.py", dst / "stages" / "__init__.py")
    return dst


def kill_tree(proc: subprocess.Popen, wait_s: float = KILL_WAIT_S) -> None:
    """SIGTERM the editor and its children (shader workers), then SIGKILL what is left. Only
    that tree: the launcher shares the editor's process group with its runner."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in process_tree([proc.pid]):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        try:
            proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def run_editor(argv: list[str], env: dict[str, str], on_poll=None,
               poll_s: float = 0.5, user: tuple[int, int, list[int]] | None = None,
               on_line: Callable[[str], None] | None = None, marker: Path | None = None,
               exit_grace_s: float = 60.0) -> tuple[int, str]:
    """Run the editor, streaming its output; ``on_poll()`` runs while it lives and
    ``on_line(line)`` for each line. ``user``: (uid, gid, groups) to run it as (the runner
    itself stays root; only the engine drops). Once ``marker`` exists or the script logged its
    last line, the editor gets ``exit_grace_s`` to exit; then it is killed."""
    lines: list[str] = []
    extra: dict = {}
    if user is not None:
        import pwd

        pw = pwd.getpwuid(user[0])
        env = dict(env, HOME=pw.pw_dir, USER=pw.pw_name, LOGNAME=pw.pw_name)
        extra = {"user": user[0], "group": user[1], "extra_groups": list(user[2])}
    finished = threading.Event()

    def line_seen(line: str) -> None:
        if FINISHED_LINE.search(line):
            finished.set()
        if on_line is not None:
            on_line(line)

    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, errors="replace", **extra)
    t = threading.Thread(target=_pump, args=(proc, lines, line_seen), daemon=True)
    t.start()
    done_at: float | None = None
    while proc.poll() is None:
        if on_poll:
            on_poll()
        if done_at is None and (finished.is_set() or (marker is not None and marker.exists())):
            done_at = time.monotonic()
        if done_at is not None and time.monotonic() - done_at > exit_grace_s:
            say(f"the editor is still running {exit_grace_s:.0f} s after it finished: killed "
                f"(pid {proc.pid})")
            kill_tree(proc)
            break
        time.sleep(poll_s)
    proc.wait()
    t.join(timeout=10)
    if on_poll:
        on_poll()
    return proc.returncode, "".join(lines)


def prepare(stage: str, spec: dict, spec_path: Path, reads: list[Path] | None = None,
            writes: list[Path] | None = None
            ) -> tuple[list[str], dict[str, str], int | None, subprocess.Popen | None,
                       tuple[int, int, list[int]] | None, UnrealConfig, Path]:
    """The editor's command line, environment, adapter, X server, user, config and the
    temporary copy of the editor-side code (the caller removes it). Under root the step folder,
    that copy and ``writes`` are handed to ``unreal.run_as`` and every path of ``reads`` is
    checked reachable by it."""
    cfg = UnrealConfig(**(spec.get("unreal") or {}))
    folder = spec_path.parent
    uuid = os.environ.get("WMFORGE_GPU_UUID", "")
    adapter = adapter_for_uuid(uuid, vulkan_devices()) if uuid else None
    staged = stage_editor_code()
    scripts = staged / "unreal"
    argv = command_line(cfg, stage, str(spec.get("ue_map", "")), adapter,
                        int(spec.get("fps", 30)), scripts)
    say(f"{stage}: adapter {adapter if adapter is not None else '-'} for GPU "
        f"{uuid or '(cpu slot)'}; {' '.join(argv)}")
    try:
        user = engine_user(cfg, [folder, staged], dirs=list(writes or []))
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise
    if user is not None:
        say(f"{stage}: runner is root: the editor runs as '{cfg.run_as}' (uid {user[0]}, "
            f"groups {user[2]})")
        try:
            check_reachable(cfg, user, [scripts / STAGE_SCRIPTS[stage], *(reads or []),
                                        *(Path(x) for x in (cfg.editor, cfg.project) if x)],
                            [folder, *(writes or [])])
        except UnrealLaunchError:
            shutil.rmtree(staged, ignore_errors=True)
            raise
    env = dict(os.environ, WMFORGE_SPEC=str(spec_path))
    xvfb = None
    if cfg.virtual_display:
        n = slot_display(cfg, os.environ.get("WMFORGE_SLOT", "c0"))
        xvfb = subprocess.Popen(virtual_display_argv(n), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        env["DISPLAY"] = f":{n}"
    return argv, env, adapter, xvfb, user, cfg, staged


def judge(stage: str, log_text: str, adapter: int | None, expected: int, done: int,
          failed: int, marker: bool) -> tuple[bool, str]:
    """(ok, why) from what the engine produced; the exit code plays no part."""
    if adapter is not None:
        used, line = check_adapter(log_text, adapter)
        if used is False:
            return False, f"adapter_fallback: asked for -graphicsadapter={adapter}: {line}"
        if used is None and line:  # the Vulkan RHI ran but said nothing of the device it chose
            return False, (f"adapter_unconfirmed: asked for -graphicsadapter={adapter}, the log "
                           "has Vulkan RHI lines but no device-selection line ('Using device at "
                           "index N of M')")
    if not marker:
        return False, "the stage script did not finish (no completion marker)"
    if done + failed < expected:
        return False, f"{done} finished + {failed} failed of {expected} expected"
    return True, ""


def stage1(spec_path: Path) -> int:
    spec = json.loads(spec_path.read_text())
    folder = spec_path.parent
    beat = Path(spec.get("heartbeat") or folder / "heartbeat")
    try:
        beat.touch()  # before the folder is handed over: the editor writes it too
        out = Path(spec["out_dir"])
        writes = sorted({out, *(Path(spec[k]).parent for k in ("progress", "failures",
                                                                "heartbeat") if spec.get(k))}
                        - {folder})
        argv, env, adapter, xvfb, user, cfg, staged = prepare("stage1", spec, spec_path,
                                                              writes=writes)
    except (UnrealLaunchError, KeyError, OSError) as exc:
        say(f"error: {exc}")
        return 1
    try:
        rc, text = run_editor(argv, env, user=user, on_line=LogHeartbeat(beat),
                              marker=folder / COMPLETE, exit_grace_s=cfg.exit_grace_s)
    finally:
        shutil.rmtree(staged, ignore_errors=True)
        if xvfb is not None:
            xvfb.kill()
    done = len(read_progress(folder))
    fl = Path(spec["failures"])
    failed = len(fl.read_text().splitlines()) if fl.exists() else 0
    ok, why = judge("stage1", text, adapter, len(spec["indices"]), done, failed,
                    (folder / COMPLETE).exists())
    return _verdict(ok, why, rc, text, folder)


def stage2(inst: Path) -> int:
    from .render_worker import take_owner_lock
    from .stage2 import Stage2Failure
    from .unreal_frames import UnrealFrames
    from .unreal_layers import check_layers

    lock = take_owner_lock(inst)
    spec = json.loads((inst / "instance.json").read_text())
    spec_path = inst / "instance.json"
    jobs = {j["name"]: j for j in spec["jobs"]}
    seen: set[str] = set(read_progress(inst))
    failed: set[str] = set()
    fmt = (spec.get("unreal") or {}).get("image_format", "png")
    try:  # a layer Unreal cannot make with this project fails before the editor starts
        layers = check_layers(spec.get("ground_truth")
                              or (spec.get("settings") or {}).get("ground_truth") or [],
                              (spec.get("unreal") or {}).get("project"))
    except (ValueError, Stage2Failure) as exc:
        say(f"error: {exc}")
        return 1
    renderer = UnrealFrames(inst, spec["settings"], fmt, say, layers)

    def on_poll() -> None:
        p = inst / RENDERED
        if not p.exists():
            return
        for line in p.read_text().splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue  # a line being written
            name = str(row.get("trajectory"))
            if name in seen or name in failed or name not in jobs:
                continue
            job = jobs[name]
            try:
                if not row.get("ok"):
                    raise Stage2Failure(str(row.get("reason") or "mrq_error"),
                                      str(row.get("detail") or "MRQ reported an error"))
                rmeta = renderer.render(Path(job["traj_dir"]), name, job["key"])
            except Stage2Failure as exc:
                failed.add(name)
                with open(inst / "failures.jsonl", "a") as f:
                    f.write(json.dumps({"trajectory": name, "reason": exc.reason,
                                        "detail": exc.detail}) + "\n")
                say(f"{name}: {exc.reason}: {exc.detail}")
                continue
            append_progress(inst / PROGRESS, name, rmeta["frame_count"], job["key"])
            seen.add(name)
            say(f"{name}: {rmeta['frame_count']} frames x 5 views verified and encoded")

    try:
        argv, env, adapter, xvfb, user, cfg, staged = prepare(
            "stage2", spec, spec_path, reads=[Path(j["traj_dir"]) for j in spec["jobs"]])
    except (UnrealLaunchError, OSError) as exc:
        say(f"error: {exc}")
        return 1
    try:
        rc, text = run_editor(argv, env, on_poll, user=user,
                              on_line=LogHeartbeat(inst / "heartbeat"),
                              marker=inst / "ENGINE_DONE", exit_grace_s=cfg.exit_grace_s)
    finally:
        shutil.rmtree(staged, ignore_errors=True)
        if xvfb is not None:
            xvfb.kill()
    ok, why = judge("stage2", text, adapter, len(jobs), len(seen), len(failed),
                    (inst / "ENGINE_DONE").exists())
    code = _verdict(ok, why, rc, text, None)
    if ok:
        (inst / COMPLETE).write_text(json.dumps({"jobs": len(jobs)}) + "\n")
    lock.close()
    return code


def _verdict(ok: bool, why: str, rc: int, text: str, marker_folder: Path | None) -> int:
    if ok:
        say(f"ok (editor exit code {rc}, not used)")
        return 0
    if marker_folder is not None:
        (marker_folder / COMPLETE).unlink(missing_ok=True)
    v = classify_text(text)
    say(f"failed: {why}; log reason {v.reason or 'unknown'}"
        f"{': ' + v.line if v.line else ''} (editor exit code {rc})")
    return 1


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or args[0] not in ("stage1", "stage2"):
        print("usage: python -m stages.engine.unreal_launch stage1 <spec.json> | "
              "stage2 <instance folder>", file=sys.stderr)
        return 2
    return stage1(Path(args[1])) if args[0] == "stage1" else stage2(Path(args[1]))


if __name__ == "__main__":
    sys.exit(main())
