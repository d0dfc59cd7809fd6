"""Deterministic WebDataset tar shards (notes §4.3): fixed member metadata (mtime, owner, mode),
members streamed from disk, a new shard before one would pass the size limit, each shard written
as ``.part`` and renamed when closed."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

Member = tuple[str, bytes | Path]  # (extension, content or a file to stream)


class ShardWriter:
    def __init__(self, out_dir: Path, max_bytes: int, mtime: int,
                 pattern: str = "shard-{:06d}.tar"):
        self.out_dir, self.max_bytes, self.mtime, self.pattern = out_dir, max_bytes, mtime, pattern
        self.index = -1
        self.tar: tarfile.TarFile | None = None
        self.size = 0
        self.part: Path | None = None
        self.written: list[str] = []

    @staticmethod
    def _member_size(content: bytes | Path) -> int:
        n = len(content) if isinstance(content, bytes) else content.stat().st_size
        return 512 + (n + 511) // 512 * 512

    def _open(self) -> None:
        self.close()
        self.index += 1
        name = self.pattern.format(self.index)
        self.part = self.out_dir / (name + ".part")
        # closed in close(): the shard stays open across samples
        self.tar = tarfile.open(self.part, "w", format=tarfile.PAX_FORMAT)  # noqa: SIM115
        self.size = 1024  # end-of-archive blocks
        self.written.append(name)

    def write(self, key: str, members: list[Member]) -> str:
        """Add one sample; returns the shard's file name."""
        if "." in key:
            raise ValueError(f"sample key {key!r} contains a dot (WebDataset keys end there)")
        need = sum(self._member_size(c) for _, c in members)
        if self.tar is None or (self.size + need > self.max_bytes and self.size > 1024):
            self._open()
        assert self.tar is not None
        for ext, content in members:
            info = tarfile.TarInfo(f"{key}.{ext}")
            info.mtime, info.mode, info.uid, info.gid = self.mtime, 0o644, 0, 0
            info.uname = info.gname = ""
            if isinstance(content, bytes):
                info.size = len(content)
                self.tar.addfile(info, io.BytesIO(content))
            else:
                info.size = content.stat().st_size
                with open(content, "rb") as f:
                    self.tar.addfile(info, f)
        self.size += need
        return self.written[-1]

    def close(self) -> None:
        if self.tar is not None:
            self.tar.close()
            assert self.part is not None
            os.replace(self.part, self.part.with_suffix(""))
            self.tar = None
