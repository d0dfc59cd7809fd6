"""The operator's view of each node (``wmforge cluster health``): what needs a person.

Per node: the store answering a real request (``head_bucket``), the uploader (its supervisor's
state file, its process alive, its backlog: finished trajectories not delivered and the age of
the oldest), GPU access and disk pressure (the monitors, once), slots busy and idle with the
queue (the runner's ``slots.json``) and the age of the node's leases (the allocator's state).
Only real nodes are listed: folders of ``--work`` a node runner made (its ``params.yaml`` or
``renders/``), never ``pools`` or another folder beside them.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from .lifetimes import pid_alive
from .monitors import GPU_BAD
from .uploader import backlog


def real_nodes(work: Path) -> list[str]:
    """Node folders under ``work``: those a node runner made."""
    if not work.is_dir():
        return []
    return sorted(p.name for p in work.iterdir()
                  if p.is_dir() and ((p / "params.yaml").exists() or (p / "renders").is_dir()))


def store_check(ucfg: Any) -> tuple[bool, str]:
    """(answers, detail) from one real request to the bucket."""
    from .s3_store import S3Store, StoreError

    try:
        store = S3Store(ucfg)
        try:
            store.client.head_bucket(Bucket=ucfg.bucket)
        except Exception as exc:  # noqa: BLE001 - one line through the store's classifier
            code = getattr(exc, "response", {}).get("ResponseMetadata", {}).get(
                "HTTPStatusCode")
            if code == 404:  # it answers; the uploader creates the bucket
                return True, f"{store.endpoint} answers; bucket {ucfg.bucket} not created yet"
            store._raise(exc, "head_bucket")
        return True, f"{store.endpoint} bucket {ucfg.bucket} answers"
    except StoreError as exc:
        return False, str(exc)


def uploader_view(root: Path) -> dict:
    """The supervisor's state (``uploader.json``), its process checked, and the backlog."""
    n, age = backlog(root / "renders")
    try:
        st = json.loads((root / "uploader.json").read_text())
    except (OSError, ValueError):
        st = {"status": "never started"}
    status = st.get("status", "?")
    if status in ("running", "restarting") and st.get("pid") and not pid_alive(int(st["pid"])):
        status = "dead"  # its supervisor (the runner) is gone too
    return {"status": status, "restarts": st.get("restarts", 0), "error": st.get("error", ""),
            "backlog": n, "oldest_s": age}


def slots_view(root: Path) -> dict:
    try:
        st = json.loads((root / "work" / "slots.json").read_text())
    except (OSError, ValueError):
        return {"busy": 0, "idle": 0, "queued": 0, "age_s": None, "lowered": {}}
    slots = st.get("slots", [])
    busy = sum(1 for s in slots if s.get("stage") != "idle")
    return {"busy": busy, "idle": len(slots) - busy, "queued": st.get("queued", 0),
            "age_s": round(time.time() - float(st.get("updated", 0)), 1),
            "lowered": st.get("limits_lowered", {})}


def lease_view(alloc: dict | None, node: str, now: float | None = None) -> dict:
    now = time.time() if now is None else now
    if alloc is None:
        return {"leases": None, "oldest_s": None}
    mine = [ls for ls in alloc.get("leases", []) if ls.get("node") == node]
    ages = [now - float(ls.get("granted") or now) for ls in mine]
    return {"leases": len(mine), "oldest_s": round(max(ages), 1) if ages else 0.0}


def needs_person(row: dict, backlog_alert_s: float) -> list[str]:
    """Why this node needs a person (empty: nothing); a finished trajectory still local after
    ``backlog_alert_s`` (``monitor.backlog_alert_s``) is one reason."""
    out = []
    if not row["store"]["ok"]:
        out.append("store not answering")
    up = row["uploader"]
    if up["status"] in ("poisoned", "failed", "dead"):
        out.append(f"uploader {up['status']}")
    elif up["backlog"] and up["status"] not in ("running", "restarting"):
        out.append(f"{up['backlog']} finished trajectories local, no uploader")
    if up["backlog"] and up["oldest_s"] > backlog_alert_s:
        out.append(f"backlog {up['oldest_s']:.0f} s old")
    bad = sorted({g["reason"] for g in row["monitor"]["gpus"] if g["reason"] in GPU_BAD})
    out += [f"gpu {r}" for r in bad]
    for g, fell in sorted(row["slots"].get("lowered", {}).items()):
        out.append(f"{g} runs {fell.split(' -> ')[1]} of {fell.split(' -> ')[0]} processes "
                   "after running out of memory")
    if row["monitor"]["disk"]["level"] in ("drain", "prune"):
        out.append(f"disk {row['monitor']['disk']['level']}")
    return out


def node_table(rows: list[dict]) -> str:
    head = (f"{'node':<10}{'store':<7}{'uploader':<12}{'restarts':>9}{'backlog':>8}"
            f"{'oldest s':>9}{'busy':>5}{'idle':>5}{'queue':>6}{'leases':>7}{'lease s':>8}"
            "  needs a person")
    out = [head, "-" * len(head)]
    for r in rows:
        up, sl, ls = r["uploader"], r["slots"], r["lease"]
        lease_s = "-" if ls["oldest_s"] is None else f"{ls['oldest_s']:.0f}"
        out.append(f"{r['node']:<10}{'ok' if r['store']['ok'] else 'DOWN':<7}"
                   f"{up['status']:<12}{up['restarts']:>9}{up['backlog']:>8}"
                   f"{up['oldest_s']:>9.0f}{sl['busy']:>5}{sl['idle']:>5}{sl['queued']:>6}"
                   f"{'-' if ls['leases'] is None else ls['leases']!s:>7}"
                   f"{lease_s:>8}"
                   f"  {'; '.join(r['needs']) or '-'}")
    stores = {r["store"]["detail"] for r in rows if not r["store"]["ok"]}
    out += [f"store: {d}" for d in sorted(stores)]
    out += [f"uploader {r['node']}: {r['uploader']['error']}" for r in rows
            if r["uploader"]["error"] and r["uploader"]["status"] != "running"]
    return "\n".join(out)
