"""``wmforge cluster``: production over Ray (paper §5, §8).

- ``up --head [--local-nodes N]`` starts a Ray head (explicit port, no dashboard by default;
  no work of its own) and, for one machine, N local worker nodes; ``up --address HOST:PORT
  --node ID`` joins a worker node to a head (its ``wmforge_node_<ID>`` resource and its GPUs).
  It checks the head is reachable and refuses to start a second scheduler on a node that has one.
- ``run`` drives a run: the allocator, one node runner (+ uploader, monitors) per node.
- ``status`` shows the three progress signals side by side; ``health`` runs the monitors once.
- ``down`` drains every node, waits for the leases out, stops the actors and Ray.
- ``upload`` (one node's uploader, by hand) and ``s3-local`` (SeaweedFS on 127.0.0.1).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pwd
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ..config import ConfigError, WmforgeConfig, load_params
from .session_procs import SESSION_ENV, stop_session

# `run --standin`: the units come from the stand-in renderer of the tests, named by its import
# path and imported by the Ray workers, never here (so only from a checkout: run from its root)
STANDIN_UNITS = "tests.fakes.engine_standin:standin_unit"


def _cfg(args: argparse.Namespace) -> WmforgeConfig:
    return load_params(args.params, args.set)


def _session_file(cfg: WmforgeConfig) -> Path:
    return Path(cfg.cluster.allocator_state).parent / "cluster.json"


def _running_scheduler() -> str:
    """The address of a Ray scheduler already on this node ("" when none answers)."""
    from ray._common.utils import get_ray_address_file

    p = Path(get_ray_address_file(None))
    if not p.exists():
        return ""
    addr = p.read_text().strip()
    return addr if addr and _reachable(addr) else ""


def _reachable(addr: str, timeout_s: float = 3.0) -> bool:
    host, _, port = addr.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            return True
    except (OSError, ValueError):
        return False


def _check_engine_user(cfg: WmforgeConfig) -> None:
    """Unreal refuses root (§8.4): its editor processes then run as cluster.engine_user (or
    unreal.run_as), which must exist on the node."""
    user = cfg.cluster.engine_user or (cfg.unreal.run_as if cfg.engine.name == "unreal" else "")
    if user:
        try:
            pwd.getpwnam(user)
        except KeyError:
            raise ConfigError(f"cluster.engine_user {user!r}: no such user on this node") from None
    elif cfg.engine.name == "unreal" and os.geteuid() == 0:
        raise ConfigError("engine unreal refuses to run as root: set cluster.engine_user to an "
                          "unprivileged user")


def cmd_up(args: argparse.Namespace) -> int:
    cfg = _cfg(args)
    _check_engine_user(cfg)
    other = _running_scheduler()
    if other:
        print(f"error: a Ray scheduler already runs on this node ({other}); refusing to start a "
              "second one (`wmforge cluster down` first)", file=sys.stderr)
        return 2
    if args.head:
        from ray.cluster_utils import Cluster

        from .ray_executor import node_resource

        port = args.port or cfg.cluster.head_port
        if _reachable(f"127.0.0.1:{port}", 1.0):
            print(f"error: port {port} is in use on this node", file=sys.stderr)
            return 2
        t0 = time.monotonic()
        marker = os.urandom(8).hex()
        os.environ[SESSION_ENV] = marker  # inherited by every process of the session
        c: Any = Cluster(initialize_head=True, shutdown_at_exit=False, head_node_args={
            "gcs_server_port": port, "num_cpus": 0,
            "include_dashboard": cfg.cluster.include_dashboard})
        for i in range(args.local_nodes):
            c.add_node(num_cpus=cfg.node.cpu_slots, num_gpus=args.gpus,
                       resources={node_resource(f"{args.node_prefix}{i + 1}"): 1})
        c.wait_for_nodes()
        session = {"address": c.address, "session_dir": c.head_node.get_session_dir_path(),
                   "marker": marker,
                   "local_nodes": [f"{args.node_prefix}{i + 1}" for i in range(args.local_nodes)]}
        f = _session_file(cfg)
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(json.dumps(session, indent=1))
        print(f"cluster: head at {c.address} with {args.local_nodes} local node(s) "
              f"{session['local_nodes']} in {time.monotonic() - t0:.1f} s; session {f}")
        return 0
    if not args.address or not args.node:
        print("error: up needs --head, or --address HOST:PORT and --node ID", file=sys.stderr)
        return 2
    if not _reachable(args.address):
        print(f"error: no Ray head answers at {args.address} (check the address and that "
              "`wmforge cluster up --head` runs there)", file=sys.stderr)
        return 2
    from .ray_executor import node_resource

    argv = ["ray", "start", f"--address={args.address}",
            f"--resources={json.dumps({node_resource(args.node): 1})}"]
    if args.gpus:
        argv.append(f"--num-gpus={args.gpus}")
    return subprocess.call(argv)


def _connect(cfg: WmforgeConfig, address: str = "") -> None:
    import ray

    addr = address
    if not addr and _session_file(cfg).exists():
        addr = json.loads(_session_file(cfg).read_text())["address"]
    ray.init(address=addr or "auto", namespace="wmforge", log_to_driver=False)


def cmd_run(args: argparse.Namespace) -> int:
    import pandas as pd

    from .ray_executor import NodeJob, run_cluster

    cfg = _cfg(args)
    pools = Path(args.pools)
    if not pools.exists():
        print(f"error: {pools} not found: run `dvc repro pools` (or `python -m stages.pools`)",
              file=sys.stderr)
        return 2
    _connect(cfg, args.address)
    standin = {"journal": str(Path(args.work).resolve() / "standin-journal.log")}
    job = NodeJob(cfg, str(Path(args.work).resolve()), STANDIN_UNITS if args.standin else "level",
                  inventory=str(Path(args.inventory).resolve()),
                  library=str(Path(cfg.library.root).resolve()),
                  unit_options=standin if args.standin else {})
    from .allocator_actor import OtherRunError

    try:
        out = run_cluster(job, pd.read_parquet(pools).to_dict("records"),
                          log=lambda m: print(m, flush=True))
    except OtherRunError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    st, this = out["allocator"], out["this_run"]
    total = len(st["owner"]) * max(1, cfg.cluster.passes)
    if this["finished_before"] and this["units"] == 0:
        print(f"cluster: nothing to do: all {total} units were done by an earlier run "
              f"(allocator state {cfg.cluster.allocator_state}); this run made nothing")
    print(f"cluster: this run: {this['units']} units, {this['trajectories']} trajectories made; "
          f"allocator: {len(st['done'])} of {total} units done; per node "
          f"{ {n: b['trajectories'] for n, b in st['balance'].items()} } trajectories")
    bad = 0
    for n, r in sorted(out["nodes"].items()):
        for label in ("failed", "died"):
            if label in r:
                bad += label == "failed"
                print(f"cluster: node {n} {label}: {r[label]}")
    for n, u in sorted(out["undelivered"].items()):
        print(f"cluster: node {n}: {len(u['trajectories'])} finished trajectories still local "
              f"({u['why']}): {', '.join(u['trajectories'][:5])}"
              f"{' …' if len(u['trajectories']) > 5 else ''}; deliver with: "
              f"{u['deliver_with']}")
    return 0 if st["finished"] and not out["undelivered"] and not bad else 1


def _alloc_state(cfg: WmforgeConfig) -> dict | None:
    from .allocator_actor import read_http_state

    try:
        return read_http_state(cfg.cluster.allocator_state)
    except (OSError, ValueError):
        return None


def cmd_status(args: argparse.Namespace) -> int:
    from .cluster_status import (
        delivered_from_store,
        finished_from_logs,
        status_table,
    )
    from .s3_store import S3Store, StoreError

    cfg = _cfg(args)
    finished = finished_from_logs(Path(args.work))
    delivered: dict[str, int] | None
    try:
        delivered = delivered_from_store(S3Store(cfg.upload), cfg.upload.prefix)
    except StoreError as exc:
        print(f"error: cannot read the store: {exc}", file=sys.stderr)
        delivered = None
    print(status_table(finished, delivered, _alloc_state(cfg)))
    return 0 if delivered is not None else 1


def cmd_health(args: argparse.Namespace) -> int:
    from .health import (
        lease_view,
        needs_person,
        node_table,
        real_nodes,
        slots_view,
        store_check,
        uploader_view,
    )
    from .monitors import health_table, monitor_once
    from .ray_executor import node_paths

    cfg = _cfg(args)
    work = Path(args.work)
    nodes = args.node or real_nodes(work) or [cfg.render.node_id]
    ok, detail = store_check(cfg.upload)
    alloc = _alloc_state(cfg)
    mon_rows, rows = [], []
    for n in nodes:
        p = node_paths(work, n)
        p["work"].mkdir(parents=True, exist_ok=True)
        m = monitor_once(n, cfg.monitor, p["work"], p["renders"])
        mon_rows.append(m)
        row = {"node": n, "store": {"ok": ok, "detail": detail}, "monitor": m,
               "uploader": uploader_view(p["root"]), "slots": slots_view(p["root"]),
               "lease": lease_view(alloc, n)}
        row["needs"] = needs_person(row, cfg.monitor.backlog_alert_s)
        rows.append(row)
    print(health_table(mon_rows))
    print()
    print(node_table(rows))
    if alloc is None:
        print("allocator: not reachable (no lease ages)")
    return 1 if any(r["needs"] for r in rows) else 0


def cmd_down(args: argparse.Namespace) -> int:
    cfg = _cfg(args)
    sess_f = _session_file(cfg)
    session = json.loads(sess_f.read_text()) if sess_f.exists() else {}
    if session:
        import ray

        from .allocator_actor import ACTOR_NAME, NAMESPACE

        alloc: Any
        with contextlib.suppress(Exception):
            _connect(cfg)
            alloc = ray.get_actor(ACTOR_NAME, namespace=NAMESPACE)
            for n in ray.get(alloc.state.remote())["nodes"]:
                ray.get(alloc.drain.remote(n, "cluster_down"))
            # drained: each runner finishes the units it holds, then waits; stop them after
            deadline = time.monotonic() + args.timeout
            while time.monotonic() < deadline:
                ray.get(alloc.expire.remote())
                if not ray.get(alloc.state.remote())["leases"]:
                    break
                time.sleep(1)
            left = len(ray.get(alloc.state.remote())["leases"])
            for a in ray.util.list_named_actors(all_namespaces=True):
                if a["namespace"] == NAMESPACE:
                    ray.kill(ray.get_actor(a["name"], namespace=NAMESPACE), no_restart=True)
            print(f"cluster: drained and stopped the actors; {left} lease(s) were still out "
                  "(their units are leased again by the next run: state kept in "
                  f"{cfg.cluster.allocator_state})")
            ray.shutdown()
    stopped, survivors = stop_session(session.get("session_dir", ""),
                                      session.get("marker", ""))
    if survivors:
        print(f"error: {len(survivors)} process(es) of this Ray session survived: "
              f"{survivors[:10]}", file=sys.stderr)
        return 1
    sess_f.unlink(missing_ok=True)
    print(f"cluster: stopped {len(stopped)} Ray process(es) of this session; none left")
    return 0


def cmd_s3_local(args: argparse.Namespace) -> int:
    from .seaweed_server import SeaweedServer

    key, secret = os.environ.get("AWS_ACCESS_KEY_ID"), os.environ.get("AWS_SECRET_ACCESS_KEY")
    if not key or not secret:
        print("error: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY: the server's one "
              "identity (clients use the same standard variables)", file=sys.stderr)
        return 2
    srv = SeaweedServer(Path(args.dir), key, secret,
                        {"master": args.port + 1, "volume": args.port + 2,
                         "filer": args.port + 3, "s3": args.port})
    srv.start()
    print(f"s3-local: SeaweedFS S3 at {srv.endpoint} (data {args.dir}, key id {key}); Ctrl-C "
          "stops it", flush=True)
    stop = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))
    try:
        while not stop["now"] and srv.proc is not None and srv.proc.poll() is None:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        srv.stop()
    return 0


def _subcommand_at(argv: list[str]) -> int | None:
    """Index of the sub-command in ``argv`` (after ``--params X`` and ``-S K=V`` options)."""
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("--params", "-S", "--set"):
            i += 2
        elif a.startswith(("--params=", "--set=")) or (a.startswith("-S") and len(a) > 2):
            i += 1
        elif a.startswith("-"):
            return None
        else:
            return i
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="wmforge cluster", description=__doc__.splitlines()[0])
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("-S", "--set", action="append", default=[], metavar="KEY=VALUE")
    sub = ap.add_subparsers(dest="cmd", required=True)
    u = sub.add_parser("up", help="start a Ray head (--head) or join one (--address)")
    u.add_argument("--head", action="store_true")
    u.add_argument("--port", type=int, default=0, help="head port (default cluster.head_port)")
    u.add_argument("--local-nodes", type=int, default=0,
                   help="with --head: this many worker nodes on this machine")
    u.add_argument("--node-prefix", default="local")
    u.add_argument("--gpus", type=int, default=0, help="GPUs each node advertises")
    u.add_argument("--address", default="", help="HOST:PORT of the head (joining)")
    u.add_argument("--node", default="", help="this node's id (joining)")
    r = sub.add_parser("run", help="run the pools over every node of the cluster")
    r.add_argument("--address", default="")
    r.add_argument("--pools", default="data/pools/pools.parquet")
    r.add_argument("--inventory", default="data/inventory")
    r.add_argument("--work", default="work/cluster", help="per-node folders <work>/<node>/")
    r.add_argument("--standin", action="store_true",
                   help="the fake renderer stand-in instead of the engine (scheduling only; "
                   "from the root of a checkout, which has it in tests/fakes/)")
    for name, h in (("status", "the three progress signals"), ("health", "monitors, once")):
        s = sub.add_parser(name, help=h)
        s.add_argument("--work", default="work/cluster")
        if name == "health":
            s.add_argument("--node", action="append", default=[])
    d = sub.add_parser("down", help="drain, then stop the actors and Ray")
    d.add_argument("--timeout", type=float, default=600.0)
    sub.add_parser("upload", help="one node's uploader (see --help of it)", add_help=False)
    s3 = sub.add_parser("s3-local", help="SeaweedFS S3 on 127.0.0.1 (foreground)")
    s3.add_argument("--dir", default="work/s3")
    s3.add_argument("--port", type=int, default=8333)
    argv = list(sys.argv[1:] if argv is None else argv)
    i = _subcommand_at(argv)
    if i is not None and argv[i] == "upload":
        from .uploader import main as upload_main

        # the options before the sub-command (--params, -S) are the uploader's too
        return upload_main(argv[:i] + argv[i + 1:])
    args = ap.parse_args(argv)
    cmds = {"up": cmd_up, "run": cmd_run, "status": cmd_status, "health": cmd_health,
            "down": cmd_down, "s3-local": cmd_s3_local}
    try:
        return cmds[args.cmd](args)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
