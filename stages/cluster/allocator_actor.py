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

import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from .allocator_policy import AllocatorPolicy

ACTOR_NAME = "wmforge-allocator"
NAMESPACE = "wmforge"


class AllocatorService:
    """Leases over a persisted :class:`AllocatorPolicy`, with an HTTP status page."""

    def __init__(self, state_path: str, pools_rows: list[dict], passes: int, seed: int,
                 lease_s: float, http_host: str = "127.0.0.1", http_port: int = 0):
        self.path = Path(state_path)
        self.lock = threading.RLock()
        if self.path.exists():
            self.policy = AllocatorPolicy.from_dict(json.loads(self.path.read_text()))
            self.restored = True
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
            json.dump(self.policy.to_dict(), f, sort_keys=True)
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
                    "balance": p.balance(), "http": self.address}

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
                  node_id: str | None = None) -> Any:
    """The detached named allocator actor (created on first call, found after). ``node_id``:
    created on that Ray node (the head: a lost worker node then never takes the allocator with
    it). Hard affinity: Ray's soft affinity measured here placed it on a worker node in 2 of 3
    tries even with the head idle; and a cluster whose head is gone has no GCS left to run an
    allocator on anyway. After a crash of its process it restarts there and restores its
    state file."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    cls = ray.remote(AllocatorService)
    where = ({"scheduling_strategy": NodeAffinitySchedulingStrategy(node_id, soft=False)}
             if node_id else {})
    return cls.options(name=ACTOR_NAME, namespace=NAMESPACE, lifetime="detached",
                       get_if_exists=True, max_restarts=-1, max_task_retries=-1,
                       num_cpus=0, resources=resources or {}, max_concurrency=1,
                       **where).remote(
        state_path, pools_rows, passes, seed, lease_s, "127.0.0.1", http_port)


def read_http_state(state_path: str, timeout_s: float = 5.0) -> dict:
    """The allocator's state through its HTTP address (as ``cluster status`` reads it)."""
    import urllib.request

    addr = (Path(state_path).parent / "http_address").read_text().strip()
    with urllib.request.urlopen(f"{addr}/state", timeout=timeout_s) as r:
        return json.loads(r.read())
