"""The per-node uploader (paper §8.3): finished trajectories to S3, verified, then deleted.

Its own process (``python -m stages.cluster.uploader``, started by the node's Ray actor or by
hand). A trajectory of a render instance is eligible when its progress line exists and its
files have not changed for ``upload.quiet_s``. Its files go to
``<prefix>/<scene>/<level>/<instance>/<traj>/<file>`` (checksummed, never overwritten, each
verified with head_object), then a completion object ``<traj>/_COMPLETE.json`` (the manifest)
is written last; only then is a local tombstone (``UPLOADED.json``, the manifest) written and
the local files deleted. A restart re-verifies what is in the store and uploads only what is
not.

Exactly once per trajectory: a trajectory is identified in the bucket by its scene, level,
trajectory name and render key, whatever instance made it. Its **delivery record**
``<prefix>/<scene>/<level>/_delivered/<traj>/<render key>.json`` is written with
``If-None-Match: *`` once its files are verified, and names the instance that won. Before any
upload the uploader reads that record: when another instance already delivered the trajectory
(a copy made again after its node was counted lost, then found), nothing is written; the local
copy is deleted after the winner's objects are checked, and the tombstone names the winner. Two
instances racing: the one whose conditional write fails removes the objects it wrote under its
own instance and keeps nothing twice. Only the winner writes ``_COMPLETE.json``.

Failure snapshots go to ``<snapshot_prefix>/<node>/<instance>/`` (kept locally: small, and
``wmforge node snapshots`` reads them). When the store is unreachable the uploader backs off
and keeps everything local; a refused credential stops it with a message naming the endpoint
and the key id (never the secret).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import UploadConfig
from ..core.progress import read_progress
from .s3_store import S3Store, StoreAuthError, StoreConflict, StoreError, StoreUnreachable

COMPLETION = "_COMPLETE.json"
DELIVERED = "_delivered"  # <prefix>/<scene>/<level>/_delivered/<traj>/<render key>.json
TOMBSTONE = "UPLOADED.json"
UNVERIFIED = "UPLOADED_UNVERIFIED.json"  # upload.verify off: in the store, kept here
SNAP_MARK = ".uploaded"


@dataclass
class UploadStats:
    trajectories: int = 0  # completed (completion object verified) in this process
    files_written: int = 0  # objects this process wrote
    files_present: int = 0  # objects found already verified (an earlier run wrote them)
    bytes_written: int = 0
    snapshots: int = 0
    duplicates: int = 0  # delivered by another instance first: deleted here, never written
    conflicts: list[str] = field(default_factory=list)


def traj_key(prefix: str, root: Path, traj_dir: Path) -> str:
    rel = traj_dir.relative_to(root).as_posix()  # scene/level/instance/traj
    return f"{prefix.strip('/')}/{rel}" if prefix.strip("/") else rel


def delivery_key(prefix: str, scene: str, level: str, traj: str, render_key: str) -> str:
    """The one key of a trajectory in the bucket, whatever instance made it."""
    rel = f"{scene}/{level}/{DELIVERED}/{traj}/{render_key}.json"
    return f"{prefix.strip('/')}/{rel}" if prefix.strip("/") else rel


def parse_delivery_key(key: str) -> tuple[str, str, str, str] | None:
    """(scene, level, traj, render key) of a delivery record's key; None for other keys."""
    parts = key.split("/")
    if len(parts) < 5 or parts[-3] != DELIVERED or not parts[-1].endswith(".json"):
        return None
    return parts[-5], parts[-4], parts[-2], parts[-1][: -len(".json")]


def backlog(root: Path, now: float | None = None) -> tuple[int, float]:
    """(finished trajectories not delivered yet, age in s of the oldest one)."""
    now = time.time() if now is None else now
    items = eligible(root, 0.0, now)
    ages = []
    for d, _ in items:
        files = [p for p in d.rglob("*") if p.is_file()]
        if files:
            ages.append(now - max(p.stat().st_mtime for p in files))
    return len(items), round(max(ages), 1) if ages else 0.0


def eligible(root: Path, quiet_s: float, now: float | None = None) -> list[tuple[Path, str]]:
    """(trajectory folder, render key) of finished, quiet, not yet uploaded trajectories."""
    now = time.time() if now is None else now
    out = []
    for prog in sorted(root.glob("*/*/*/progress.log")):
        inst = prog.parent
        for traj, (_, key) in sorted(read_progress(inst).items()):
            d = inst / traj
            if not d.is_dir() or (d / TOMBSTONE).exists() or (d / UNVERIFIED).exists():
                continue
            files = [p for p in d.rglob("*") if p.is_file()]
            if files and now - max(p.stat().st_mtime for p in files) >= quiet_s:
                out.append((d, key))
    return out


class Uploader:
    """Scans a renders root (and a snapshot root) and delivers what is finished."""

    def __init__(self, ucfg: UploadConfig, renders: Path, node: str,
                 snapshots: Path | None = None, log: Callable[[str], Any] = print,
                 store: S3Store | None = None):
        self.cfg, self.root, self.node, self.snaps, self.log = ucfg, renders, node, snapshots, log
        self.store = store or S3Store(ucfg)
        self.stats = UploadStats()
        self._bucket_ok = False

    def upload_trajectory(self, d: Path, render_key: str) -> bool:
        """Deliver one trajectory; True when it is complete in the store (and deleted here),
        by this instance or, first, by another one (then nothing is written)."""
        base = traj_key(self.cfg.prefix, self.root, d)
        inst = d.parent
        scene, level = inst.parent.parent.name, inst.parent.name
        dkey = delivery_key(self.cfg.prefix, scene, level, d.name, render_key)
        won = self.store.get_json(dkey)
        if won is not None and won.get("instance") != inst.name:
            return self._duplicate(d, won, dkey)
        manifest: dict[str, dict] = {}
        written: list[str] = []
        for p in sorted(q for q in d.rglob("*") if q.is_file()):
            rel = p.relative_to(d).as_posix()
            try:
                dg, wrote = self.store.put_verified(p, f"{base}/{rel}")
            except StoreConflict as exc:
                self.stats.conflicts.append(str(exc))
                self.log(f"upload: CONFLICT {exc}")
                return False
            if wrote:
                self.stats.files_written += 1
                self.stats.bytes_written += dg.size
                written.append(f"{base}/{rel}")
            else:
                self.stats.files_present += 1
            manifest[rel] = {"size": dg.size, "sha256": dg.sha256, "checksum": dg.checksum}
        record = {"node": self.node, "scene": scene, "level": level,
                  "instance": inst.name, "trajectory": d.name, "render_key": render_key,
                  "files": manifest, "verified": self.cfg.verify}
        data = json.dumps(record, sort_keys=True, indent=1).encode()
        if won is None and not self.store.create(data, dkey):
            won = self.store.get_json(dkey) or {}
            if won.get("instance") != inst.name:  # another instance won the race
                for key in written:  # ours are under our own instance: nobody else's
                    self.store.delete(key)
                self.log(f"upload: {base}: delivered first by {won.get('instance')}; the "
                         f"{len(written)} objects written here removed")
                return self._duplicate(d, won, dkey)
        self.store.put_bytes(data, f"{base}/{COMPLETION}")  # last: the trajectory is complete
        self.stats.trajectories += 1
        if not self.cfg.verify:
            (d / UNVERIFIED).write_bytes(data)
            return True  # unverified objects: nothing local is deleted
        (d / TOMBSTONE).write_bytes(data)  # first, so a crash mid-delete is resumable
        self._delete_local(d, manifest)
        self.log(f"upload: {base} ({len(manifest)} files) verified; local copies deleted")
        return True

    def _duplicate(self, d: Path, won: dict, dkey: str) -> bool:
        """Another instance delivered this trajectory: check its objects, then delete the
        local copy (never uploaded). False (kept) when the winner's objects do not check."""
        base = "/".join(dkey.split("/")[:-3]) + f"/{won.get('instance')}/{d.name}"
        for rel, f in (won.get("files") or {}).items():
            h = self.store.head(f"{base}/{rel}")
            if h is None or int(h["ContentLength"]) != int(f["size"]) or (
                    self.cfg.verify and h.get("ChecksumSHA256") != f["checksum"]):
                msg = (f"{dkey}: delivered by {won.get('instance')} but {base}/{rel} does not "
                       "check; kept locally")
                self.stats.conflicts.append(msg)
                self.log(f"upload: CONFLICT {msg}")
                return False
        local: dict[str, dict] = {p.relative_to(d).as_posix(): {}
                                  for p in d.rglob("*") if p.is_file()}
        (d / TOMBSTONE).write_text(json.dumps(
            {"duplicate_of": won.get("instance"), "node": won.get("node"), "delivery": dkey,
             "trajectory": d.name, "render_key": won.get("render_key")}, sort_keys=True))
        self._delete_local(d, local)
        self.stats.duplicates += 1
        self.log(f"upload: {traj_key(self.cfg.prefix, self.root, d)}: already delivered by "
                 f"{won.get('instance')}; nothing written, local copy deleted")
        return True

    @staticmethod
    def _delete_local(d: Path, files: dict) -> None:
        for rel in files:
            if rel != TOMBSTONE:
                (d / rel).unlink(missing_ok=True)
        for sub in sorted((p for p in d.rglob("*") if p.is_dir()), reverse=True):
            if not any(sub.iterdir()):
                sub.rmdir()

    def upload_snapshots(self) -> None:
        if self.snaps is None or not self.snaps.is_dir():
            return
        for inst in sorted(p for p in self.snaps.glob("*/*") if p.is_dir()):
            if (inst / SNAP_MARK).exists():
                continue
            rel = inst.relative_to(self.snaps).as_posix()  # node/instance
            for p in sorted(q for q in inst.rglob("*") if q.is_file()):
                key = f"{self.cfg.snapshot_prefix.strip('/')}/{rel}/{p.relative_to(inst)}"
                try:
                    self.store.put_verified(p, key)
                except StoreConflict as exc:
                    self.stats.conflicts.append(str(exc))
            (inst / SNAP_MARK).write_text("")
            self.stats.snapshots += 1

    def scan_once(self) -> int:
        """One pass; the number of trajectories delivered. Raises StoreUnreachable / Auth."""
        if not self._bucket_ok:
            self.store.ensure_bucket()
            self._bucket_ok = True
        n = 0
        for d, key in eligible(self.root, self.cfg.quiet_s):
            n += bool(self.upload_trajectory(d, key))
        self.upload_snapshots()
        return n

    def pending(self) -> int:
        return len(eligible(self.root, 0.0))

    def run(self, stop: Callable[[], bool] = lambda: False, once: bool = False,
            once_outage_s: float | None = None) -> int:
        """Scan until ``stop()``; with ``once``, until nothing finished is left (exit 1 when the
        store stays unreachable for ``once_outage_s``, default 4 × backoff_max_s). Exit code:
        0, 1 (store unreachable, ``once``), 3 (credentials refused), 4 (the store refused a
        request: bad bucket name, ...)."""
        delay = self.cfg.poll_s
        outage = 4 * self.cfg.backoff_max_s if once_outage_s is None else once_outage_s
        down_since: float | None = None
        while True:
            try:
                self.scan_once()
                delay, down_since = self.cfg.poll_s, None
                if once and self.pending() == 0:
                    return 0
            except StoreUnreachable as exc:
                down_since = time.monotonic() if down_since is None else down_since
                left = self.pending()
                if once and time.monotonic() - down_since >= outage:
                    self.log(f"upload: error: {exc}; gave up after {outage:.0f} s; {left} "
                             "finished trajectories kept locally")
                    return 1
                self.log(f"upload: {exc}; {left} finished trajectories kept locally; "
                         f"retrying in {delay:.0f} s")
                self._wait_for_store(delay, stop)
                delay = min(delay * 2, self.cfg.backoff_max_s)
                continue
            except StoreAuthError as exc:
                self.log(f"upload: error: {exc}")
                return 3
            except StoreError as exc:
                self.log(f"upload: error: {exc}; {self.pending()} finished trajectories kept "
                         "locally")
                return 4
            if stop():
                return 0
            time.sleep(self.cfg.poll_s)

    def _wait_for_store(self, delay: float, stop: Callable[[], bool]) -> None:
        """Sleep up to ``delay`` s, probing the store every poll_s: back as soon as it is."""
        end = time.monotonic() + delay
        while time.monotonic() < end and not stop():
            time.sleep(min(self.cfg.poll_s, max(0.0, end - time.monotonic())))
            try:
                self.store.client.head_bucket(Bucket=self.cfg.bucket)
            except Exception:  # noqa: BLE001 - still down (or another error: the scan says)
                continue
            left = end - time.monotonic()
            if left > 0:
                self.log(f"upload: the store answers again; resuming {left:.0f} s before the "
                         "back-off ends")
            return


def main(argv: list[str] | None = None) -> int:
    from ..config import ConfigError, load_params

    ap = argparse.ArgumentParser(prog="wmforge cluster upload", description=__doc__.splitlines()[0])
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("-S", "--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--renders", default="data/renders")
    ap.add_argument("--snapshots", default="", help="snapshot root (default: node.snapshot_dir)")
    ap.add_argument("--node", default="", help="node id (default: render.node_id)")
    ap.add_argument("--once", action="store_true", help="exit when nothing finished is left")
    args = ap.parse_args(argv)
    try:
        cfg = load_params(args.params, args.set)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        up = Uploader(cfg.upload, Path(args.renders), args.node or cfg.render.node_id,
                      Path(args.snapshots or cfg.node.snapshot_dir),
                      log=lambda m: print(m, flush=True))
    except StoreError as exc:
        print(f"upload: error: {exc}", file=sys.stderr)
        return 4
    print(f"upload: {args.renders} → s3://{cfg.upload.bucket}/{cfg.upload.prefix} at "
          f"{up.store.endpoint} as key id {up.store.key_id}", flush=True)
    return up.run(once=args.once)


if __name__ == "__main__":
    sys.exit(main())
