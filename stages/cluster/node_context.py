"""What every unit of work of one run shares: the config, the skip keys, the node's character
cache."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..config import NodeConfig, RenderConfig, WmforgeConfig
from ..core.engine_types import CharacterSpec
from .keys import STAGE1_SOURCES, AssetDigests, code_version, pack_dir


def copy_stable(digests: AssetDigests, src: Path, dst: Path, tries: int = 3) -> str:
    """Copy the folder ``src`` to ``dst`` (links followed) and return the digest of what was
    copied: ``src``'s digest before the copy, checked again after it. A pack edited while it
    was copied (its digest changed) is copied again; one that keeps changing raises OSError
    naming it. Without the check, a copy could hold bytes its key does not name."""
    for _ in range(tries):
        before = digests.tree(src)
        shutil.copytree(src, dst)
        if digests.tree(src) == before:
            return before
        shutil.rmtree(dst, ignore_errors=True)
    raise OSError(f"{src} changed while it was copied, {tries} times in a row: not staged")


@dataclass
class NodeContext:
    """What every unit of one run shares."""

    cfg: WmforgeConfig
    library: Path
    traj_root: Path
    render_root: Path | None
    rcfg: RenderConfig | None = None
    digests: AssetDigests = field(default_factory=AssetDigests)
    specs: list[CharacterSpec] = field(default_factory=list)
    char_packs: list[Path] = field(default_factory=list)  # library folders of the characters
    base: Path = field(default_factory=Path.cwd)
    # (scene/level, traj, render key) already delivered to the object store (cluster runs):
    # never rendered again, though the local copy is gone
    delivered: set[tuple[str, str, str]] = field(default_factory=set)

    @property
    def node(self) -> NodeConfig:
        return self.cfg.node

    def stage1_key(self, row: dict) -> str:
        """Everything that shapes a level's trajectories: seed, config, the level row, the
        Stage I code and the bytes of the level's pack and of the characters."""
        assets = {"level": self.digests.tree(pack_dir(self.library, str(row["path"]))),
                  "characters": [self.digests.tree(p) for p in self.char_packs]}
        tcfg = asdict(self.cfg.trajectories)
        tcfg.pop("levels")  # which levels run is a selection; it shapes no trajectory
        blob = json.dumps({"seed": self.cfg.seed, "trajectories": tcfg,
                           "characters": [asdict(c) for c in self.specs],
                           "engine": asdict(self.cfg.engine), "level": row,
                           "code": code_version(STAGE1_SOURCES), "assets": assets},
                          sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def char_cache(self, pack: Path) -> tuple[Path, str]:
        """The node-level copy of a character pack (§12: stored once per node), made once, and
        the digest of what it holds (the folder is named by its first 12 hex digits)."""
        cache = Path(self.node.work_dir) / "cache" / "characters"
        digest = self.digests.tree(pack)
        dst = cache / f"{pack.name}-{digest[:12]}"
        if dst.exists():
            return dst, digest
        cache.mkdir(parents=True, exist_ok=True)
        with open(cache / f".{pack.name}.lock", "a+") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)  # another runner may be copying it
            if not dst.exists():
                for stale in cache.glob(f".{dst.name}.tmp-*"):
                    shutil.rmtree(stale, ignore_errors=True)
                tmp = cache / f".{dst.name}.tmp-{os.getpid()}"
                got = copy_stable(self.digests, pack, tmp)
                if got != digest:  # edited since it was named: named by what was copied
                    digest, dst = got, cache / f"{pack.name}-{got[:12]}"
                if dst.exists():
                    shutil.rmtree(tmp, ignore_errors=True)
                else:
                    tmp.rename(dst)
        return dst, digest
