"""The node runner's own throughput (issue: node runner benchmark): Stage II through
``stages.cluster`` — slots, staging, progress logs, recovery — not the bare harness of
bench_render.py.

Run: .venv/bin/python tests/benchmarks/bench_node.py [--preset 720p] [--spatial 8]
         [--frames 300] [--slots 1,4,8,16] [--level UrbanBlocks/Downtown] [--json out.json]

It builds the sample library (without the wheel assets), makes max(slots) Stage I trajectories of
one level on the node runner (timed: Stage I trajectories per wall second), then for each slot
count S renders S of them with S slots (on a GPU machine: S slots on GPU 0; on a CPU machine: S
CPU slots) and prints five-view frames/s, five-view minutes per GPU-hour, GPU utilisation and
memory sampled through NVML, the engine processes' CPU seconds against their encoder threads'
busy seconds (wall time: an upper bound on the encoding share), and the peak RSS per slot.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from stages.config import load_params  # noqa: E402


class Sampler:
    """NVML utilisation/memory of every GPU and VmHWM of every engine process, every 0.5 s."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.util: dict[int, list[float]] = {}
        self.mem: dict[int, list[float]] = {}
        self.hwm: dict[int, float] = {}
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            import pynvml

            pynvml.nvmlInit()
            handles = [pynvml.nvmlDeviceGetHandleByIndex(i)
                       for i in range(pynvml.nvmlDeviceGetCount())]
        except Exception:  # noqa: BLE001 - a CPU machine
            handles = []
        while not self.stop.is_set():
            for i, h in enumerate(handles):
                try:
                    u = pynvml.nvmlDeviceGetUtilizationRates(h)
                    m = pynvml.nvmlDeviceGetMemoryInfo(h)
                except Exception:  # noqa: BLE001
                    continue
                self.util.setdefault(i, []).append(float(u.gpu))
                self.mem.setdefault(i, []).append(m.used / 2**30)
            for d in Path("/proc").iterdir():
                if not d.name.isdigit():
                    continue
                try:
                    cmd = (d / "cmdline").read_bytes()
                    if b"stages.engine.render_worker" not in cmd:
                        continue
                    st = (d / "status").read_text()
                except OSError:
                    continue
                m2 = re.search(r"VmHWM:\s+(\d+)", st)
                if m2:
                    self.hwm[int(d.name)] = max(self.hwm.get(int(d.name), 0),
                                                int(m2.group(1)) / 1024)
            time.sleep(0.5)

    def __enter__(self) -> Sampler:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()


def encoder_busy_s(root: Path) -> float:
    tot = 0.0
    for log in root.rglob("renderer.log"):
        for line in log.read_text(errors="replace").splitlines():
            m = re.search(r"encoder busy s: (.*)$", line)
            if m:
                tot += sum(float(x.split("=")[1]) for x in m.group(1).split() if "=" in x)
    return tot


def kill_one(root: Path) -> None:
    """SIGKILL a renderer in the middle of a trajectory (its videos half written)."""
    import signal

    deadline = time.time() + 600
    while time.time() < deadline:
        for part in root.glob("*/*/*/traj_*/back.mp4.part"):
            log = part.parent.parent / "progress.log"
            if part.stat().st_size < 20_000:
                continue
            for d in Path("/proc").iterdir():
                try:
                    cmd = (d / "cmdline").read_bytes()
                except OSError:
                    continue
                if (b"stages.engine.render_worker" in cmd
                        and str(log.parent).encode() in cmd):
                    os.kill(int(d.name), signal.SIGKILL)
                    print(f"kill -9 renderer pid {d.name} ({log.parent.name})", flush=True)
                    return
        time.sleep(0.05)


def check_retry(root: Path, snaps: Path) -> dict:
    """The killed renderer's slot went on with a fresh process on the same GPU."""
    from stages.cluster.snapshots import read_snapshots

    killed = [s for s in read_snapshots(snaps) if s.get("signal") == "SIGKILL"]
    if len(killed) != 1:
        raise SystemExit(f"expected one killed renderer, snapshots: {killed}")
    k = killed[0]
    later = [json.loads(p.read_text()) for p in root.glob("*/*/*/device.json")
             if p.parent.name > k["instance"]]
    retry = [d for d in later if d.get("slot") == k["slot"]]
    if not retry:
        raise SystemExit(f"no later process in slot {k['slot']}")
    gpus = {d["requested"]["gpu"] for d in retry}
    return {"killed_instance": k["instance"], "slot": k["slot"], "killed_gpu": k["gpu"],
            "retried_on_gpus": sorted(g for g in gpus if g is not None) or None,
            "same_gpu": gpus == {k["gpu"]}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="720p")
    ap.add_argument("--spatial", type=int, default=8)
    ap.add_argument("--temporal", type=int, default=1)
    ap.add_argument("--size", default="", help="WxH instead of the preset (the demo: 320x180)")
    ap.add_argument("--frames", type=int, default=300)
    ap.add_argument("--slots", default="1,2")
    ap.add_argument("--level", default="UrbanBlocks/Downtown")
    ap.add_argument("--json", default="")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--all-gpus", action="store_true",
                    help="S slots on every GPU NVML finds (S x GPUs trajectories per run); "
                    "default: S slots on GPU 0")
    ap.add_argument("--kill-one", action="store_true",
                    help="kill -9 one slot's renderer once the run is under way: it must be "
                    "retried on the same GPU and the run complete")
    args = ap.parse_args()
    slot_counts = [int(x) for x in args.slots.split(",")]
    from stages.cluster.gpus import nvml_gpus
    from stages.cluster.lifecycle import make_trajectories, render_trajectories
    from stages.inventory import run_inventory
    from stages.sample_library import build_sample_library

    tmp = Path(tempfile.mkdtemp(prefix="wmforge-bench-node-"))
    gpus = nvml_gpus()
    per_slot_gpus = len(gpus) if (args.all_gpus and gpus) else 1
    n = max(slot_counts) * per_slot_gpus

    w, h = (int(x) for x in args.size.split("x")) if args.size else (0, 0)

    def cfg_for(slots: int):
        ids = ",".join(str(g.index) for g in (gpus if args.all_gpus else gpus[:1]))
        node = ([f"node.gpus=[{ids}]", f"node.slots_per_gpu={slots}"] if gpus
                else [f"node.cpu_slots={slots}"])
        return load_params(overrides=[
            "sample_library.include_wheel_assets=false", f"trajectories.per_level={n}",
            f"trajectories.frames={args.frames}", f"trajectories.levels=[{args.level}]",
            "trajectories.characters=[CharacterPack/Alex]", f"render.preset={args.preset}",
            f"render.width={w}", f"render.height={h}", f"render.spatial_samples={args.spatial}",
            f"render.temporal_samples={args.temporal}", f"node.work_dir={tmp}/work",
            f"node.snapshot_dir={tmp}/work/snapshots", "node.display=plain", *node])

    cfg = cfg_for(n)
    lib = tmp / "lib"
    build_sample_library(lib, cfg.sample_library)
    inv = run_inventory(lib, cfg.inventory, "overrides.yaml")
    trajs = tmp / "traj"
    t0 = time.perf_counter()
    fails = make_trajectories(cfg, inv.levels, inv.characters, lib, trajs, log=lambda m: None)
    t1 = time.perf_counter() - t0
    if not fails.empty:
        raise SystemExit(f"stage I failed: {fails.to_dict('records')}")
    ld = args.level.replace("/", "__")
    print(f"stage I: {n} trajectories x {args.frames} frames on {n} slots in {t1:.1f} s "
          f"({n * args.frames / t1:.0f} simulated frames/s)", flush=True)
    results: list[dict] = [{"stage1_trajectories": n, "stage1_wall_s": round(t1, 2)}]
    for s in slot_counts:
        total = s * per_slot_gpus  # processes (and trajectories) in this run
        sub = tmp / f"traj_{s}" / ld
        sub.mkdir(parents=True)
        for i in range(total):
            shutil.copytree(trajs / ld / f"traj_{i:04d}", sub / f"traj_{i:04d}")
        out = tmp / f"renders_{s}"
        c = cfg_for(s)
        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        killer = threading.Thread(target=kill_one, args=(out,), daemon=True)
        if args.kill_one:
            killer.start()
        with Sampler() as smp:
            t0 = time.perf_counter()
            index, rf = render_trajectories(c, sub.parent, out, c.render, log=lambda m: None,
                                            library=lib)
            wall = time.perf_counter() - t0
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        if len(index) != total or not rf.empty:
            raise SystemExit(f"{s} slots: rendered {len(index)}/{total}: "
                             f"{rf.to_dict('records')}")
        retried = check_retry(out, tmp / "work" / "snapshots") if args.kill_one else None
        cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
        enc = encoder_busy_s(out)
        dev_recs = [json.loads(p.read_text()) for p in out.rglob("device.json")]
        devs = sorted({d["gl_renderer"] for d in dev_recs})
        uuids = sorted({str(d.get("gl_device_uuid")) for d in dev_recs})
        util = {g: round(sum(v) / len(v), 1) for g, v in smp.util.items() if v}
        mem = {g: round(max(v), 2) for g, v in smp.mem.items() if v}
        out_s = total * args.frames / 30
        per_gpu_hour = out_s / wall * 60 / per_slot_gpus
        r = {"slots": s, "gpus": per_slot_gpus, "processes": total, "size": args.size,
             "temporal": args.temporal,
             "five_view_min_per_node_hour": round(out_s / wall * 60, 1),
             "kill_one": retried, "preset": args.preset, "spatial": args.spatial,
             "frames": args.frames, "wall_s": round(wall, 2),
             "five_view_frames_per_s": round(total * args.frames / wall, 2),
             "five_view_min_per_gpu_hour": round(per_gpu_hour, 1),
             "gpu_util_mean_pct": util, "gpu_mem_max_gib": mem,
             "engine_cpu_s": round(cpu, 1), "encoder_busy_s": round(enc, 1),
             # encoder threads' busy wall time per engine CPU second: an upper bound on the
             # encoding share (a busy encoder thread waiting for a core counts as busy)
             "encoder_busy_per_engine_cpu_s": round(enc / cpu, 3) if cpu else None,
             "host_cores": os.cpu_count(),
             "peak_rss_mib_per_slot": round(max(smp.hwm.values()), 1) if smp.hwm else None,
             "gl_renderers": devs, "gl_device_uuids": uuids}
        results.append(r)
        print(f"node runner {args.preset} x{args.spatial}, {s} slot(s) x {per_slot_gpus} "
              f"GPU(s): {r['five_view_min_per_node_hour']} five-view min per node-hour, "
              f"{r['five_view_frames_per_s']} five-view frames/s, "
              f"{r['five_view_min_per_gpu_hour']} five-view min per GPU-hour, GPU util "
              f"{util} %, GPU mem {mem} GiB, encoders {enc:.0f} s of {cpu:.0f} s engine CPU "
              f"(busy wall / CPU {r['encoder_busy_per_engine_cpu_s']}), peak RSS "
              f"{r['peak_rss_mib_per_slot']} MiB per slot, GL {devs}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    if not args.keep:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
