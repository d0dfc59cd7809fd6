"""Cluster figures on this machine (issue 15): Ray cluster start-up time and RSS per node,
trajectories per hour through 1 vs 3 nodes (real engine, tiny preset), and upload throughput to
the local SeaweedFS with and without verification.

Run: .venv/bin/python tests/benchmarks/bench_cluster.py [--levels 3] [--per-level 2]
         [--frames 48] [--upload-mb 256] [--skip-run] [--json out.json]

Everything runs on 127.0.0.1 (the machine's own address for Ray) in a temporary folder and is
stopped at the end. Start-up: a head with no work plus N worker nodes (each with the wmforge node
resource), timed until every node is alive; RSS: the resident memory of each node's processes
(its raylet and the processes under it; the head: GCS, dashboard, monitors) right after start.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from stages.config import load_params  # noqa: E402


def _rss_tree(pid: int) -> float:
    """MiB resident of ``pid`` and its descendants."""
    kids: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(d.name))
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) / 1024
        except OSError:
            pass
        todo += kids.get(p, [])
    return total


def start_cluster(n: int, tmp: str):
    from ray.cluster_utils import Cluster

    from stages.cluster.ray_executor import node_resource

    t0 = time.monotonic()
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
    nodes = [c.add_node(num_cpus=1, num_gpus=0, resources={node_resource(f"n{i + 1}"): 1})
             for i in range(n)]
    c.wait_for_nodes()
    return c, nodes, time.monotonic() - t0


def bench_startup(n: int, tmp: str) -> dict:
    import ray

    c, nodes, secs = start_cluster(n, tmp)
    try:
        head = c.head_node
        head_pids = [p.process.pid for ps in head.all_processes.values() for p in ps]
        head_rss = sum(_rss_tree(p) for p in head_pids)
        node_rss = [_rss_tree(nd.all_processes["raylet"][0].process.pid) for nd in nodes]
    finally:
        ray.shutdown()
        c.shutdown()
    return {"nodes": n, "startup_s": round(secs, 2), "head_rss_mib": round(head_rss),
            "worker_node_rss_mib": [round(x) for x in node_rss]}


def bench_run(nodes: int, args, srv, lib: Path, inv: Path, work: Path,
              kill: bool = False, rep: int = 0) -> dict:
    """One run over ``nodes`` Ray nodes. ``kill``: node n1 is removed (its raylet and workers
    killed, as a lost machine) once it has finished its first trajectory; then the figures
    include when (s after the start), the units it had leased, and the recovery time: from the
    removal until every one of those units was completed by another node."""
    import threading

    import pandas as pd
    import ray

    from stages.cluster.ray_executor import NodeJob, run_cluster
    from stages.cluster.uploader import TOMBSTONE
    from stages.config import UploadConfig
    from stages.pools import build_pools
    from tests.conftest import small_render_cfg

    levels = pd.read_parquet(inv / "levels.parquet")
    ids = sorted(levels[levels["enabled"].astype(bool)]["level_id"])[: args.levels]
    names = [f"n{i + 1}" for i in range(nodes)]
    tag = f"{nodes}{'-kill' if kill else ''}-r{rep}"
    cfg = load_params(overrides=[
        f"trajectories.per_level={args.per_level}", f"trajectories.frames={args.frames}",
        "trajectories.characters=[CharacterPack/Alex]", f"library.root={lib}",
        "node.cpu_slots=1", f"cluster.allocator_state={work}/alloc-{tag}/state.json",
        "monitor.warn_free_mb=0", "monitor.drain_free_mb=0", "monitor.prune_free_mb=0"])
    cfg = dataclasses.replace(cfg, render=small_render_cfg(), upload=UploadConfig(
        endpoint_url=srv.endpoint, bucket=f"bench-run-{tag}", quiet_s=0.5))
    c, nodes_, _ = start_cluster(nodes, str(work))
    try:
        ray.init(address=c.address, namespace="bench", log_to_driver=False)
        job = NodeJob(cfg, str(work / f"nodes-{tag}"), "level", inventory=str(inv),
                      library=str(lib))
        rows = build_pools(ids, names, 1, 0).to_dict("records")
        from stages.cluster.allocator_actor import ACTOR_NAME
        from stages.cluster.ray_executor import NAMESPACE, node_paths

        box: dict = {}
        seen: dict = {}

        def note(m: str) -> None:  # when the driver learnt that n1 died
            if "node n1 died" in m:
                seen.setdefault("died", time.monotonic())

        t0 = time.monotonic()
        def drive() -> None:
            try:
                box.update(run_cluster(job, rows, log=note))
            except BaseException as exc:  # noqa: BLE001 - re-raised in the main thread
                box["error"] = exc

        th = threading.Thread(target=drive, daemon=True)
        th.start()
        deadline = t0 + args.run_timeout_s
        # the allocator's state, polled: when each node leased its first unit (the cluster's
        # start: runner actors scheduled, started, imported) and each unit's lease window
        first: dict[str, float] = {}
        window: dict[str, list[float]] = {}
        alloc = None
        n1 = node_paths(job.work_root, "n1")["renders"]
        leased: set[str] = set()
        at = recovered = gone = -1.0
        delivered_at_kill = -1
        while th.is_alive():
            now = time.monotonic() - t0
            if time.monotonic() > deadline:
                raise SystemExit(f"run of {nodes} node(s): not finished after "
                                 f"{args.run_timeout_s} s")
            if alloc is None:
                try:
                    alloc = ray.get_actor(ACTOR_NAME, namespace=NAMESPACE)
                except ValueError:
                    time.sleep(0.1)
                    continue
            st = ray.get(alloc.state.remote(), timeout=30)
            for x in st["leases"]:
                first.setdefault(x["node"], now)
                u = f"{x['level_id']}#{x['pass_index']}"
                window.setdefault(u, [now, now])[1] = now
            done = set(st["done"])
            if kill and at < 0 and list(n1.glob("*/*/*/traj_*/meta.json")):
                # n1 finished its first trajectory: remove it (raylet and workers killed)
                leased = {f"{x['level_id']}#{x['pass_index']}" for x in st["leases"]
                          if x["node"] == "n1"}
                # the runner skips what the store has: note how much of n1's work was
                # delivered when it went (the model re-makes a dead node's unit whole)
                delivered_at_kill = len(list(n1.glob(f"*/*/*/traj_*/{TOMBSTONE}")))
                at = time.monotonic() - t0
                c.remove_node(nodes_[0], allow_graceful=False)
            if kill and at >= 0 and gone < 0 and "n1" not in st["nodes"]:
                gone = now - at  # the allocator let n1 go: the cluster declared it dead
            if kill and at >= 0 and recovered < 0 and leased <= done:
                recovered = time.monotonic() - t0 - at
            time.sleep(0.2)
        th.join()
        secs = time.monotonic() - t0
        if "error" in box:
            raise box["error"]
        out = box
        if kill and at < 0:
            raise SystemExit("kill run: n1 finished nothing before the run ended")
        if kill and (recovered < 0 or gone < 0 or not leased):
            raise SystemExit(f"kill run: n1's removal not seen through (leased {leased}, "
                             f"declared dead after {gone} s, recovered after {recovered} s)")
    finally:
        ray.shutdown()
        c.shutdown()
    timeline = {"start_s": round(sum(first.values()) / max(1, len(first)), 2),
                "first_lease_s": {k: round(v, 2) for k, v in sorted(first.items())},
                "unit_lease_s": {k: [round(v[0], 2), round(v[1], 2)]
                                 for k, v in sorted(window.items())}}
    kill_fig = ({"kill": [[0, round(at, 1)]], "units_in_flight": sorted(leased),
                 "delivered_at_kill": delivered_at_kill,
                 # detection: the removal until the allocator let n1 go (polled every 0.2 s);
                 # the driver's log line about it comes after its store listing
                 "detection_s": round(gone, 1),
                 "driver_logged_s": round(seen.get("died", t0 + at) - t0 - at, 1),
                 "recovery_s": round(recovered, 1)} if kill else {})
    n = sum(b["trajectories"] for b in out["allocator"]["balance"].values())
    return {"nodes": nodes, "rep": rep, "trajectories": n, "wall_s": round(secs, 1),
            "trajectories_per_hour": round(n / secs * 3600, 1),
            "frames": args.frames, "size": f"{cfg.render.width}x{cfg.render.height}",
            **timeline, **kill_fig}


def bench_upload(srv, tmp: Path, total_mb: int) -> list[dict]:
    from stages.cluster.uploader import Uploader
    from stages.config import UploadConfig
    from stages.core.progress import COMPLETE, append_progress

    out = []
    for verify in (True, False):
        root = tmp / f"up-{verify}"
        inst = root / "S" / "L" / "n1-bench"
        inst.mkdir(parents=True)
        sizes = [8 * 2**20] * (total_mb // 16) + [32 * 2**20] * (total_mb // 64)
        for i, sz in enumerate(sizes):
            d = inst / f"traj_{i:04d}"
            d.mkdir()
            (d / "back.mp4").write_bytes(os.urandom(sz))
            append_progress(inst / "progress.log", d.name, 1, f"{i:016x}")
        (inst / COMPLETE).write_text("")
        bucket = f"bench-up-{str(verify).lower()}"
        up = Uploader(UploadConfig(endpoint_url=srv.endpoint, bucket=bucket, quiet_s=0.0,
                                   verify=verify), root, "n1", log=lambda m: None)
        t0 = time.monotonic()
        up.scan_once()
        secs = time.monotonic() - t0
        mb = sum(sizes) / 2**20
        out.append({"verify": verify, "mib": round(mb), "files": len(sizes),
                    "seconds": round(secs, 2), "mib_per_s": round(mb / secs, 1)})
        shutil.rmtree(root)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--levels", type=int, default=3)
    ap.add_argument("--per-level", type=int, default=2)
    ap.add_argument("--frames", type=int, default=48)
    ap.add_argument("--upload-mb", type=int, default=256)
    ap.add_argument("--skip-run", action="store_true")
    ap.add_argument("--run-timeout-s", type=float, default=900.0)
    ap.add_argument("--repeat", type=int, default=1,
                    help="each run this many times (this host's run-to-run spread is ~15 %%)")
    ap.add_argument("--kill", action="store_true",
                    help="also a 3-node run with n1 removed mid-run (recovery time)")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="cluster-bench-", dir="/tmp"))
    os.environ.update({"RAY_TMPDIR": str(tmp), "RAY_AUTH_MODE": "disabled"})
    from stages.cluster.seaweed_server import SeaweedServer

    srv = SeaweedServer(tmp / "s3", "BENCHKEY", "bench-secret-" + os.urandom(6).hex())
    t0 = time.monotonic()
    srv.start()
    res: dict = {"s3_startup_s": round(time.monotonic() - t0, 2)}
    os.environ.update(srv.env())
    try:
        res["startup"] = [bench_startup(n, str(tmp)) for n in (1, 3)]
        for s in res["startup"]:
            print(f"ray start-up, head + {s['nodes']} node(s): {s['startup_s']} s; RSS head "
                  f"{s['head_rss_mib']} MiB, per worker node {s['worker_node_rss_mib']} MiB",
                  flush=True)
        res["upload"] = bench_upload(srv, tmp, args.upload_mb)
        for u in res["upload"]:
            print(f"upload {u['mib']} MiB in {u['files']} files, verify={u['verify']}: "
                  f"{u['seconds']} s = {u['mib_per_s']} MiB/s", flush=True)
        v, nv = res["upload"]
        print(f"verification costs {100 * (v['seconds'] / nv['seconds'] - 1):.0f}% of the "
              "upload time (head_object per object + local delete)", flush=True)
        if not args.skip_run:
            from stages.config import SampleLibraryConfig
            from stages.inventory import run_inventory
            from stages.parquet_io import write_parquet
            from stages.sample_library import build_sample_library

            lib = tmp / "lib"
            build_sample_library(lib, SampleLibraryConfig())
            inv = run_inventory(lib, load_params().inventory, "overrides.yaml")
            write_parquet(inv.levels, tmp / "inv" / "levels.parquet")
            write_parquet(inv.characters, tmp / "inv" / "characters.parquet")
            res["runs"] = []
            for rep in range(args.repeat):  # interleaved: slow phases of the host hit all
                for n in (1, 3):
                    res["runs"].append(bench_run(n, args, srv, lib, tmp / "inv", tmp, rep=rep))
                if args.kill:
                    res["runs"].append(bench_run(3, args, srv, lib, tmp / "inv", tmp,
                                                 kill=True, rep=rep))
            for r in res["runs"]:
                print(f"{r['nodes']} node(s): {r['trajectories']} trajectories "
                      f"({r['frames']} frames, {r['size']}) in {r['wall_s']} s = "
                      f"{r['trajectories_per_hour']} trajectories/hour"
                      + (f"; n1 removed at {r['kill'][0][1]} s with {r['units_in_flight']} "
                         f"leased, recovered {r['recovery_s']} s later" if "kill" in r else ""),
                      flush=True)
    finally:
        srv.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"machine: {os.cpu_count()} cores")
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
