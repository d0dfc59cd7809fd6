"""The allocator service (paper §5.1): the policy, its persisted state and its HTTP status.

:class:`AllocatorService` is plain Python (tested without Ray); :func:`get_allocator` runs it as
one detached, named Ray actor that restarts after a crash (``max_restarts=-1``). Every change
of state is written to ``cluster.allocator_state`` (atomically: temp file + rename) before the
call returns, and ``__init__`` reads it back, so a restarted actor has the same pools and
leases. Its state is served over HTTP (``GET /state``: pools, leases, per-node counts) at an
address written next to the state file (``http_address``), which ``wmforge cluster status``
reads.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from .allocator_policy import READABLE_VERSIONS, STATE_VERSION, AllocatorPolicy

ACTOR_NAME = "wmforge-allocator"
NAMESPACE = "wmforge"


class OtherRunError(RuntimeError):
    """The allocator (or its state file) belongs to another run: one line naming it."""


def run_identity(pools_rows: list[dict], passes: int, seed: int, state_path: str,
                 store: str) -> dict:
    """What makes a run the same run: its pools (level → node per pass), passes, seed, the
    allocator's state file and where its outputs go (endpoint/bucket/prefix)."""
    rows = sorted((str(r["level_id"]), str(r["node"]), int(r["pass"])) for r in pools_rows)
    pools = hashlib.sha256(json.dumps(rows).encode()).hexdigest()[:16]
    return {"pools": pools, "levels": len({r[0] for r in rows}), "passes": int(passes),
            "seed": int(seed), "state": os.path.abspath(state_path), "store": store}


def _differs(have: dict, want: dict) -> str:
    keys = [k for k in ("pools", "passes", "seed", "state", "store") if have.get(k) != want.get(k)]
    return ", ".join(f"{k} {have.get(k)!r} (this run: {want.get(k)!r})" for k in keys)


def _v1_mismatch(raw: dict, pools_rows: list[dict], identity: dict) -> str:
    """What of a version-1 state file (no identity) differs from this run ("" when nothing):
    its levels and their nodes (pass 0 of the pools), passes and seed."""
    owner = {str(r["level_id"]): str(r["node"]) for r in pools_rows if int(r["pass"]) == 0}
    out = []
    if dict(raw.get("owner", {})) != owner or sorted(raw.get("levels", [])) != sorted(owner):
        out.append(f"pools ({len(raw.get('levels', []))} levels in the file, "
                   f"{len(owner)} in this run, or bound to other nodes)")
    for k in ("passes", "seed"):
        if raw.get(k) != identity.get(k):
            out.append(f"{k} {raw.get(k)!r} (this run: {identity.get(k)!r})")
    return ", ".join(out)


def check_state_file(state_path: str, identity: dict, pools_rows: list[dict] | None = None
                     ) -> None:
    """Raise :class:`OtherRunError` when the state file holds another run's allocator, or a
    schema version this code does not read (see ``STATE_VERSION`` for the migration)."""
    p = Path(state_path)
    if not p.exists():
        return
    try:
        raw = json.loads(p.read_text())
    except (OSError, ValueError) as exc:
        raise OtherRunError(f"allocator state {p}: unreadable ({exc})") from None
    version = raw.get("version")
    if version not in READABLE_VERSIONS:
        raise OtherRunError(
            f"allocator state {p}: schema version {version!r}; this wmforge reads versions "
            f"{', '.join(map(str, READABLE_VERSIONS))}: use the wmforge that wrote it, or "
            "remove that file to start over (delivered trajectories are never made again)")
    have = raw.get("identity")
    if version == 1 and have is None and pools_rows is not None:
        problem = _v1_mismatch(raw, pools_rows, identity)
        if problem:
            raise OtherRunError(
                f"allocator state {p} is schema version 1 (it names no run) and differs from "
                f"this run: {problem}: set cluster.allocator_state to a new file for this run, "
                "or remove that file to start over")
        return
    if have is not None and have != identity:
        raise OtherRunError(
            f"allocator state {p} belongs to another run ({_differs(have, identity)}): set "
            "cluster.allocator_state to a new file for this run, or remove that file to start "
            "over")


class AllocatorService:
    """Leases over a persisted :class:`AllocatorPolicy`, with an HTTP status page."""

    def __init__(self, state_path: str, pools_rows: list[dict], passes: int, seed: int,
                 lease_s: float, http_host: str = "127.0.0.1", http_port: int = 0,
                 identity: dict | None = None):
        self.path = Path(state_path)
        self.lock = threading.RLock()
        if identity is not None:
            check_state_file(state_path, identity, pools_rows)
        self.identity = identity
        self.migrated_from: int | None = None
        if self.path.exists():
            raw = json.loads(self.path.read_text())
            self.policy = AllocatorPolicy.from_dict(raw)
            self.identity = identity or raw.get("identity")
            self.restored = True
            if raw.get("version") != STATE_VERSION:  # read as this run's: written back now
                self.migrated_from = raw.get("version")
                self._save()
        else:
            self.policy = AllocatorPolicy.from_pools(pools_rows, passes, seed, lease_s)
            self.restored = False
            self._save()
        self.started = time.time()
        self._http = ThreadingHTTPServer((http_host, http_port), self._handler())
        self._http.daemon_threads = True
        threading.Thread(target=self._http.serve_forever, daemon=True).start()
        addr = f"http://{http_host}:{self._http.server_address[1]}"
        self.address = addr
        tmp = self.path.parent / f".http_address.{os.getpid()}"
        tmp.write_text(addr + "\n")
        tmp.replace(self.path.parent / "http_address")

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        with open(tmp, "w") as f:
            json.dump({**self.policy.to_dict(), "identity": self.identity}, f, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        tmp.replace(self.path)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        svc = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                if self.path.rstrip("/") not in ("", "/state"):
                    self.send_error(404, "GET /state")
                    return
                body = json.dumps(svc.state(), sort_keys=True).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                return

        return Handler

    # -------------------------------------------------------------- calls (each persisted)

    def _do(self, fn: Any, *args: Any) -> Any:
        with self.lock:
            out = fn(*args)
            self._save()
            return out

    def lease(self, node: str) -> dict | None:
        ls = self._do(self.policy.lease, node, time.time())
        return None if ls is None else ls.__dict__.copy()

    def renew(self, lease_id: str, node: str) -> bool:
        return bool(self._do(self.policy.renew, lease_id, node, time.time()))

    def complete(self, lease_id: str, node: str, trajectories: int = 0) -> bool:
        return bool(self._do(self.policy.complete, lease_id, node, time.time(), trajectories))

    def join(self, node: str) -> list[str]:
        return list(self._do(self.policy.join, node))

    def leave(self, node: str) -> list[str]:
        return list(self._do(self.policy.leave, node, time.time()))

    def release(self, node: str) -> list[str]:
        return list(self._do(self.policy.release, node, time.time()))

    def drain(self, node: str, reason: str) -> None:
        self._do(self.policy.drain, node, reason)

    def undrain(self, node: str, only: tuple[str, ...] = ()) -> None:
        self._do(self.policy.undrain, node, tuple(only))

    def report_lost(self, node: str, n: int) -> None:
        self._do(self.policy.report_lost, node, n)

    def reopen(self, levels: list[str]) -> list[list]:
        return [list(u) for u in self._do(self.policy.reopen, list(levels))]

    def expire(self) -> int:
        return len(self._do(self.policy.expire, time.time()))

    def state(self) -> dict:
        with self.lock:
            p = self.policy
            return {"pid": os.getpid(), "ray_node": _ray_node(), "restored": self.restored,
                    "started": self.started,
                    "finished": p.finished(), "nodes": list(p.nodes), "owner": dict(p.owner),
                    "leases": [ls.__dict__.copy() for ls in p.leases.values()],
                    "done": sorted(f"{lv}#{ps}" for lv, ps in p.done),
                    "balance": p.balance(), "http": self.address, "identity": self.identity,
                    "state_path": str(self.path), "migrated_from": self.migrated_from}

    def ping(self) -> int:
        return os.getpid()


def _ray_node() -> str | None:
    """The Ray node this service runs on (None outside Ray)."""
    import sys

    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return None
    return str(ray.get_runtime_context().get_node_id())


def get_allocator(state_path: str, pools_rows: list[dict], passes: int, seed: int,
                  lease_s: float, http_port: int = 0, resources: dict | None = None,
                  node_id: str | None = None, identity: dict | None = None) -> Any:
    """The detached named allocator actor (created on first call, found after). ``node_id``:
    created on that Ray node (the head: a lost worker node then never takes the allocator with
    it). Hard affinity: Ray's soft affinity measured here placed it on a worker node in 2 of 3
    tries even with the head idle; and a cluster whose head is gone has no GCS left to run an
    allocator on anyway. After a crash of its process it restarts there and restores its
    state file.

    With ``identity`` (:func:`run_identity`), a live allocator of another run (other pools,
    passes, seed, state file or store) is replaced when it has no lease out, and refused with
    :class:`OtherRunError` naming it when it has; a state file of another run is refused."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    if identity is not None:
        _retire_other_run(identity)
        check_state_file(state_path, identity, pools_rows)
    cls = ray.remote(AllocatorService)
    where = ({"scheduling_strategy": NodeAffinitySchedulingStrategy(node_id, soft=False)}
             if node_id else {})
    return cls.options(name=ACTOR_NAME, namespace=NAMESPACE, lifetime="detached",
                       get_if_exists=True, max_restarts=-1, max_task_retries=-1,
                       num_cpus=0, resources=resources or {}, max_concurrency=1,
                       **where).remote(
        state_path, pools_rows, passes, seed, lease_s, "127.0.0.1", http_port, identity)


def _retire_other_run(identity: dict, timeout_s: float = 60.0) -> None:
    """Stop a live allocator of another run that has nothing out; refuse one that has."""
    import ray

    try:
        live = ray.get_actor(ACTOR_NAME, namespace=NAMESPACE)
    except ValueError:
        return
    st: Any = ray.get(live.state.remote(), timeout=timeout_s)
    have = st.get("identity") or {"state": os.path.abspath(st.get("state_path", "?"))}
    if have == identity:
        return
    what = _differs(have, identity)
    if st.get("leases"):
        raise OtherRunError(
            f"the live allocator {ACTOR_NAME} (pid {st.get('pid')}, state "
            f"{st.get('state_path', '?')}, {st.get('http')}) serves another run with "
            f"{len(st['leases'])} lease(s) out ({what}): wait for it or `wmforge cluster "
            "down` first")
    ray.kill(live, no_restart=True)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            ray.get_actor(ACTOR_NAME, namespace=NAMESPACE)
        except ValueError:
            return
        time.sleep(0.2)
    raise OtherRunError(f"the allocator {ACTOR_NAME} of another run did not stop in "
                        f"{timeout_s:.0f} s")


def read_http_state(state_path: str, timeout_s: float = 5.0) -> dict:
    """The allocator's state through its HTTP address (as ``cluster status`` reads it)."""
    import urllib.request

    addr = (Path(state_path).parent / "http_address").read_text().strip()
    with urllib.request.urlopen(f"{addr}/state", timeout=timeout_s) as r:
        return json.loads(r.read())
