"""``wmforge unreal smoke``: one hour on a real Linux UE 5.6 render node, one JSON report.

No Unreal Engine runs where wmforge is developed; this checks on a node that has one what the
fake editor (tests/fakes/unreal/) can only assume. It drives the same launcher the node runner
runs (``python -m stages.engine.unreal_launch``) and reads what the editor produced:

1. ``devices``: one editor start per Vulkan GPU with ``-graphicsadapter=N`` (the probe script
   ``unreal/smoke_probe.py``): the Vulkan RHI's device-selection line must name N, with no
   fallback warning (the check the launcher applies to every slot).
2. ``cold_start``: the first of those starts runs with a fresh local derived-data cache
   (``UE-LocalDataCachePath``), so shaders compile; the longest time the node runner would
   see no change in the step's watched files must stay below ``node.stall_timeout_s``.
3. ``stage1``: one trajectory recorded in PIE: completion marker, one progress line, every
   frame ``1/fps`` apart and no ``fixed_step_missing`` (the world's step is checked by the
   script each frame).
4. ``stage2``: the trajectory replayed with Movie Render Queue, verified and encoded (five
   views, the frame count), with the probe (``unreal/ue_sequence.py:probe``) reading back in
   Sequencer what the keys do: ``feet`` (the character's lowest point within 10 cm of the
   recorded feet in every job), ``facing`` (within 2° of yaw + correction), ``fp_free_of_body``
   (in the fp job the character is out of the main pass while the fp camera is inside its
   bounds; in the views job it is drawn).

The report (``<out>/smoke.json``): ``ok`` and, per check, ``ok`` and its evidence. The same
function runs in CI on the fake editor process (tests/test_unreal_smoke.py).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from .config import UnrealConfig, load_params
from .core.engine_types import CharacterSpec
from .core.progress import COMPLETE, read_progress
from .core.trajectory import VIEWS

KEY = "5305e5305e5305e5"  # the smoke run's config hash and render key (16 hex digits)
FEET_TOLERANCE_M = 0.10
YAW_TOLERANCE_DEG = 2.0


def _gone_ok(exc: OSError) -> None:
    """os.walk's onerror: a folder removed while it is walked is skipped; any other error
    (a folder that cannot be read) is raised."""
    if not isinstance(exc, FileNotFoundError):
        raise exc


def _watch(paths: list[Path], stop: threading.Event, gaps: list[float],
           poll_s: float = 0.25) -> None:
    """The node runner's view: the longest time in which no watched file changed."""
    def sig() -> tuple:
        out = []
        for p in paths:
            # os.walk, not rglob: a folder the engine removes mid-walk (a trajectory's frames
            # after encoding) is skipped, where rglob raises and ends this thread
            files = sorted(Path(d) / f for d, ds, fs in os.walk(p, onerror=_gone_ok)
                           for f in ds + fs) if p.is_dir() else [p]
            for q in files:
                if q.suffix == ".log":
                    continue  # an engine that only writes its log is not advancing
                try:
                    st = q.stat()
                    out.append((str(q), st.st_size, st.st_mtime_ns))
                except FileNotFoundError:
                    continue
        return tuple(out)

    last, since = sig(), time.monotonic()
    while not stop.wait(poll_s):
        now_sig = sig()
        if now_sig != last:
            gaps.append(time.monotonic() - since)
            last, since = now_sig, time.monotonic()
    gaps.append(time.monotonic() - since)


def _launch(stage: str, target: Path, env: dict[str, str], watch: list[Path],
            log_path: Path, timeout_s: float) -> tuple[int, str, float]:
    """Run the launcher like a node-runner slot; (exit code, its output, longest stall)."""
    argv = [sys.executable, "-m", "stages.engine.unreal_launch", stage, str(target)]
    stop, gaps = threading.Event(), []  # type: ignore[var-annotated]
    w = threading.Thread(target=_watch, args=(watch, stop, gaps), daemon=True)
    w.start()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            rc = proc.wait()
    stop.set()
    w.join()
    return rc, log_path.read_text(errors="replace"), max(gaps or [0.0])


def _check(ok: bool, **evidence: Any) -> dict:
    return {"ok": bool(ok), **evidence}


def device_probe(cfg: UnrealConfig, out: Path, index: int, env: dict[str, str],
                 cold: bool) -> tuple[dict, float]:
    """Start the editor on Vulkan device ``index`` with the probe script; (its check, the
    longest stall the node runner would have seen)."""
    from .engine.unreal import check_adapter, command_line
    from .engine.unreal_launch import LogHeartbeat, run_editor

    folder = out / f"device_{index}"
    folder.mkdir(parents=True, exist_ok=True)
    beat = folder / "heartbeat"
    beat.touch()
    env = dict(env)
    if cold:  # a fresh local derived-data cache: shaders compile as on a new node
        env["UE-LocalDataCachePath"] = str(folder / "ddc")
    argv = command_line(cfg, "probe", "", index)
    stop, gaps = threading.Event(), []  # type: ignore[var-annotated]
    w = threading.Thread(target=_watch, args=([beat], stop, gaps), daemon=True)
    w.start()
    t0 = time.monotonic()
    rc, text = run_editor(argv, env, on_line=LogHeartbeat(beat, 0.2),
                          exit_grace_s=cfg.exit_grace_s)
    stop.set()
    w.join()
    (folder / "engine.log").write_text(text)
    used, line = check_adapter(text, index)
    return _check(used is True, index=index, line=line, exit_code=rc,
                  seconds=round(time.monotonic() - t0, 1)), max(gaps or [0.0])


def smoke(cfg: UnrealConfig, ue_map: str, character: CharacterSpec, out: Path,
          devices: list[int], frames: int = 150, fps: int = 30, cold: bool = True,
          stall_timeout_s: float = 300.0, timeout_s: float = 1800.0,
          overrides: list[str] | None = None, log: Any = print, launch: Any = None,
          size: tuple[int, int] = (320, 180)) -> dict:
    """Run the checks (module docstring) and write ``<out>/smoke.json``; returns the report.
    ``launch(stage, target, env, watch, log_path, timeout_s)`` runs a launcher step (default:
    a subprocess, as the node runner does)."""
    launch = launch or _launch
    from .cluster.keys import render_settings

    out.mkdir(parents=True, exist_ok=True)
    params = load_params(overrides=list(overrides or []))
    env = dict(os.environ)
    env.pop("WMFORGE_GPU_UUID", None)  # the probe names adapters itself
    level_id = f"smoke/{ue_map.rstrip('/').rsplit('/', 1)[-1]}"
    report: dict = {"map": ue_map, "character": character.character_id, "checks": {}}
    checks = report["checks"]

    # 1 + 2: one editor start per device; the first one cold
    results, worst = [], 0.0
    for k, index in enumerate(devices):
        log(f"smoke: device {index}{' (cold cache)' if cold and k == 0 else ''}")
        res, gap = device_probe(cfg, out, index, env, cold and k == 0)
        results.append(res)
        if k == 0:
            worst = gap
    checks["devices"] = _check(bool(results) and all(r["ok"] for r in results),
                               slots=results)
    checks["cold_start"] = _check(bool(results) and worst < stall_timeout_s,
                                  longest_silence_s=round(worst, 1),
                                  stall_timeout_s=stall_timeout_s, cold=cold,
                                  first_start_s=results[0]["seconds"] if results else None)

    # 3: Stage I, one trajectory
    s1 = out / "stage1"
    s1.mkdir(exist_ok=True)
    traj_root = out / "trajectories"
    t = params.trajectories
    spec = {
        "level_id": level_id, "level_path": ue_map, "load_path": "", "path_map": {},
        "scale": 1.0, "up_axis": "Z", "indices": [0], "frames": frames, "fps": fps, "seed": 0,
        "engine": {"name": "unreal", "fps": fps}, "characters": [asdict(character)],
        "actions": asdict(t.actions), "spawn": asdict(t.spawn), "cameras": asdict(t.cameras),
        "camera_rays": True, "resolved_config": {"smoke": True}, "config_hash": KEY,
        "out_dir": str(traj_root), "progress": str(s1 / "progress.log"),
        "heartbeat": str(s1 / "heartbeat"), "failures": str(s1 / "failures.jsonl"),
        "unreal": asdict(cfg), "ue_map": ue_map, "map_on_command_line": True}
    (s1 / "spec.json").write_text(json.dumps(spec, indent=1))
    log("smoke: stage I")
    rc, _text, gap1 = launch("stage1", s1 / "spec.json", env, [s1 / "heartbeat"],
                             out / "stage1.log", timeout_s)
    failures = ([json.loads(x) for x in (s1 / "failures.jsonl").read_text().splitlines()]
                if (s1 / "failures.jsonl").exists() else [])
    traj = traj_root / "traj_0000"
    steps: list[float] = []
    if (traj / "frames.parquet").exists():
        import pandas as pd

        ts = pd.read_parquet(traj / "frames.parquet")["t"].tolist()
        steps = [b - a for a, b in zip(ts, ts[1:], strict=False)]
    fixed = bool(steps) and all(abs(s * fps - 1.0) < 1e-6 for s in steps)
    checks["stage1"] = _check(
        rc == 0 and (s1 / COMPLETE).exists() and len(read_progress(s1)) == 1 and not failures
        and fixed, exit_code=rc, progress=len(read_progress(s1)), failures=failures,
        frames=len(steps) + 1 if steps else 0, fixed_step=fixed,
        longest_silence_s=round(gap1, 1))

    # 4: Stage II with the probe
    inst = out / "render" / "smoke" / "level" / "inst"
    inst.mkdir(parents=True, exist_ok=True)
    rcfg = replace(params.render, width=size[0], height=size[1])
    ispec = {"level_id": level_id, "settings": render_settings(rcfg, fps).as_dict(),
             "jobs": ([{"name": "traj_0000", "traj_dir": str(traj.resolve()), "key": KEY}]
                      if traj.exists() else []),
             "unreal": asdict(cfg), "ue_map": ue_map, "map_on_command_line": True,
             "smoke_probe": True}
    (inst / "instance.json").write_text(json.dumps(ispec, indent=1))
    rows: list[dict] = []
    if ispec["jobs"]:
        log("smoke: stage II")
        rc2, _text2, gap2 = launch("stage2", inst, env, [inst], out / "stage2.log", timeout_s)
        if (inst / "probe.jsonl").exists():
            rows = [json.loads(x) for x in (inst / "probe.jsonl").read_text().splitlines()]
        videos = [v for v in VIEWS if (inst / "traj_0000" / f"{v}.mp4").exists()]
        checks["stage2"] = _check(rc2 == 0 and len(read_progress(inst)) == 1
                                  and len(videos) == len(VIEWS), exit_code=rc2,
                                  videos=videos, longest_silence_s=round(gap2, 1))
    else:
        checks["stage2"] = _check(False, reason="no trajectory from Stage I")
    feet = [abs(r["lowest_z_m"] - r["feet_z_m"]) for r in rows]
    yaw = [r["yaw_error_deg"] for r in rows]
    fp_rows = [r for r in rows if r["pass"] == "fp"]
    view_rows = [r for r in rows if r["pass"] != "fp"]
    checks["feet"] = _check(bool(feet) and max(feet) <= FEET_TOLERANCE_M,
                            worst_m=round(max(feet), 4) if feet else None,
                            tolerance_m=FEET_TOLERANCE_M, samples=len(feet))
    checks["facing"] = _check(bool(yaw) and max(yaw) <= YAW_TOLERANCE_DEG,
                              worst_deg=round(max(yaw), 3) if yaw else None,
                              tolerance_deg=YAW_TOLERANCE_DEG)
    checks["fp_free_of_body"] = _check(
        bool(fp_rows) and all(not r["main_pass"] for r in fp_rows)
        and all(r["main_pass"] for r in view_rows),
        fp_camera_in_body=[r.get("fp_camera_in_body") for r in fp_rows],
        fp_main_pass=[r["main_pass"] for r in fp_rows],
        views_main_pass=[r["main_pass"] for r in view_rows])
    report["ok"] = all(c["ok"] for c in checks.values())
    (out / "smoke.json").write_text(json.dumps(report, indent=1) + "\n")
    log(f"smoke: {'ok' if report['ok'] else 'FAILED'}: "
        + ", ".join(f"{k} {'ok' if v['ok'] else 'failed'}" for k, v in checks.items()))
    return report


def _vulkan_gpus() -> list[int]:
    from .engine.unreal import vulkan_devices

    return [int(d["index"]) for d in vulkan_devices()
            if "llvmpipe" not in str(d.get("deviceName", "")).lower()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="wmforge unreal smoke",
        description="One hour on a real Linux UE 5.6 node: fixed step, one trajectory recorded "
        "and replayed, feet and facing, fp free of the body, device selection per GPU, a "
        "cold-cache start that is not killed. Writes <out>/smoke.json.")
    ap.add_argument("--map", required=True, help="the level, /Game/... (package path)")
    ap.add_argument("--mesh", required=True, help="the character's SkeletalMesh, /Game/...")
    ap.add_argument("--anim", action="append", default=[],
                    help="ACTION=/Game/... animation (repeatable; W is the fallback)")
    ap.add_argument("--radius", type=float, default=0.3, help="capsule radius, m")
    ap.add_argument("--half-height", type=float, default=0.6, help="capsule half cylinder, m")
    ap.add_argument("--height", type=float, default=1.8, help="visual height, m")
    ap.add_argument("--yaw-correction", type=float, default=0.0, help="model yaw, degrees")
    ap.add_argument("--out", default="smoke", help="report folder")
    ap.add_argument("--frames", type=int, default=150)
    ap.add_argument("--devices", default="",
                    help="Vulkan device indices to probe, e.g. 0,1 (default: every GPU the "
                    "Vulkan loader lists, llvmpipe excepted)")
    ap.add_argument("--warm", action="store_true", help="keep the derived-data cache")
    ap.add_argument("overrides", nargs="*", help="config overrides (unreal.editor=...)")
    args = ap.parse_args(argv)
    params = load_params(overrides=args.overrides)
    anims = dict(a.split("=", 1) for a in args.anim)
    ch = CharacterSpec("smoke/character", args.radius, args.half_height, args.height,
                       model_path=args.mesh, animations=anims,
                       yaw_correction_deg=args.yaw_correction)
    devices = ([int(x) for x in args.devices.split(",") if x.strip()] if args.devices
               else _vulkan_gpus())
    report = smoke(params.unreal, args.map, ch, Path(args.out), devices, args.frames,
                   params.engine.fps, cold=not args.warm,
                   stall_timeout_s=params.node.stall_timeout_s, overrides=args.overrides)
    print(json.dumps(report, indent=1))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())

