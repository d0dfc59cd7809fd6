"""The engine process of a node-runner slot with ``engine=unreal``:
``python -m stages.engine.unreal_launch stage1|stage2 <spec.json | instance folder>``.

It refuses root, maps the slot's GPU to its Vulkan adapter, starts Unreal Editor with the stage
script (its output becomes this process's output, the runner's engine log), and judges the
outcome by progress lines and frames — never by Unreal's exit code. Stage II: every trajectory
MRQ reports rendered (``rendered.jsonl``) is verified, encoded and published here, then gets
its progress line; ``COMPLETE`` is written only when every job has a line or a failure row.
On failure the verdict of the log classifier is printed as the last line and the exit code is 1.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from ..core.progress import COMPLETE, PROGRESS, append_progress, read_progress
from .unreal import (
    UnrealConfig,
    UnrealLaunchError,
    adapter_for_uuid,
    check_adapter,
    command_line,
    refuse_root,
    slot_display,
    virtual_display_argv,
    vulkan_devices,
)
from .unreal_log import classify_text

RENDERED = "rendered.jsonl"  # written by unreal/stage2_mrq.py, one line per MRQ job


def say(msg: str) -> None:
    print(f"wmforge: unreal: {msg}", flush=True)


def _pump(proc: subprocess.Popen, sink: list[str]) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        sink.append(line)
        sys.stdout.write(line)
        sys.stdout.flush()


def engine_user(cfg: UnrealConfig, folders: list[Path], euid: int | None = None
                ) -> tuple[int, int] | None:
    """Unreal refuses root (§8.4). Under root the editor runs as ``unreal.run_as`` instead:
    (uid, gid) of that user, with the instance folders handed to it; None when the runner is
    not root. A missing user is an UnrealLaunchError naming it."""
    if (os.geteuid() if euid is None else euid) != 0:
        return None
    import pwd

    try:
        pw = pwd.getpwnam(cfg.run_as)
    except KeyError:
        refuse_root(cfg)  # names the user to create or to run as
        raise
    if pw.pw_uid == 0:
        refuse_root(cfg)
    for folder in folders:
        for dirpath, _dirs, files in os.walk(folder):
            os.chown(dirpath, pw.pw_uid, pw.pw_gid)
            for f in files:
                os.chown(os.path.join(dirpath, f), pw.pw_uid, pw.pw_gid)
    return pw.pw_uid, pw.pw_gid


def run_editor(argv: list[str], env: dict[str, str], on_poll=None,
               poll_s: float = 0.5, user: tuple[int, int] | None = None) -> tuple[int, str]:
    """Run the editor, streaming its output; ``on_poll()`` runs while it lives. ``user``:
    (uid, gid) to run it as (the runner itself stays root; only the engine drops)."""
    lines: list[str] = []
    extra: dict = {}
    if user is not None:
        import pwd

        pw = pwd.getpwuid(user[0])
        env = dict(env, HOME=pw.pw_dir, USER=pw.pw_name, LOGNAME=pw.pw_name)
        extra = {"user": user[0], "group": user[1], "extra_groups": []}
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, errors="replace", **extra)
    t = threading.Thread(target=_pump, args=(proc, lines), daemon=True)
    t.start()
    while proc.poll() is None:
        if on_poll:
            on_poll()
        time.sleep(poll_s)
    t.join(timeout=10)
    if on_poll:
        on_poll()
    return proc.returncode, "".join(lines)


def prepare(stage: str, spec: dict, spec_path: Path
            ) -> tuple[list[str], dict[str, str], int | None, subprocess.Popen | None,
                       tuple[int, int] | None]:
    cfg = UnrealConfig(**(spec.get("unreal") or {}))
    uuid = os.environ.get("WMFORGE_GPU_UUID", "")
    adapter = adapter_for_uuid(uuid, vulkan_devices()) if uuid else None
    argv = command_line(cfg, stage, str(spec.get("ue_map", "")), adapter,
                        int(spec.get("fps", 30)))
    say(f"{stage}: adapter {adapter if adapter is not None else '-'} for GPU "
        f"{uuid or '(cpu slot)'}; {' '.join(argv)}")
    user = engine_user(cfg, [spec_path.parent])
    if user is not None:
        say(f"{stage}: runner is root: the editor runs as '{cfg.run_as}' (uid {user[0]})")
    env = dict(os.environ, WMFORGE_SPEC=str(spec_path))
    xvfb = None
    if cfg.virtual_display:
        n = slot_display(cfg, os.environ.get("WMFORGE_SLOT", "c0"))
        xvfb = subprocess.Popen(virtual_display_argv(n), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        env["DISPLAY"] = f":{n}"
    return argv, env, adapter, xvfb, user


def judge(stage: str, log_text: str, adapter: int | None, expected: int, done: int,
          failed: int, marker: bool) -> tuple[bool, str]:
    """(ok, why) from what the engine produced; the exit code plays no part."""
    if adapter is not None:
        used, line = check_adapter(log_text, adapter)
        if used is False:
            return False, f"adapter_fallback: asked for -graphicsadapter={adapter}: {line}"
    if not marker:
        return False, "the stage script did not finish (no completion marker)"
    if done + failed < expected:
        return False, f"{done} finished + {failed} failed of {expected} expected"
    return True, ""


def stage1(spec_path: Path) -> int:
    spec = json.loads(spec_path.read_text())
    folder = spec_path.parent
    try:
        argv, env, adapter, xvfb, user = prepare("stage1", spec, spec_path)
    except (UnrealLaunchError, KeyError) as exc:
        say(f"error: {exc}")
        return 1
    try:
        rc, text = run_editor(argv, env, user=user)
    finally:
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

    lock = take_owner_lock(inst)
    spec = json.loads((inst / "instance.json").read_text())
    spec_path = inst / "instance.json"
    jobs = {j["name"]: j for j in spec["jobs"]}
    seen: set[str] = set(read_progress(inst))
    failed: set[str] = set()
    fmt = (spec.get("unreal") or {}).get("image_format", "png")
    renderer = UnrealFrames(inst, spec["settings"], fmt, say)

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
        argv, env, adapter, xvfb, user = prepare("stage2", spec, spec_path)
    except UnrealLaunchError as exc:
        say(f"error: {exc}")
        return 1
    try:
        rc, text = run_editor(argv, env, on_poll, user=user)
    finally:
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
