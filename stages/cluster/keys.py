"""Skip keys that cannot go stale (DESIGN §6): what decides "already done" for a trajectory or a
render covers the inputs, the settings, the bytes of the assets it reads and the version of the
code that makes it. A code fix or an edited texture re-makes the output; nothing has to be
cleared by hand.

Asset trees are hashed file by file; a digest is cached per (path, size, mtime) in
``<work>/asset_digests.json``, so an unchanged library costs a ``stat`` per file, not a read.
"""

from __future__ import annotations

import hashlib
import json
import os
from functools import cache
from importlib import metadata
from pathlib import Path

from ..config import RenderConfig
from ..engine.publish import sha256_file, traj_files
from ..engine.render_settings import RenderSettings, leaders_value
from ..media.layers import validate_layers

PACKAGE_ROOT = Path(__file__).resolve().parent.parent
# the sources whose change changes the bytes of a trajectory (Stage I) or a render (Stage II)
STAGE1_SOURCES = ("core", "engine", "parquet_io.py")
STAGE2_SOURCES = ("core", "engine", "media", "parquet_io.py")


@cache
def code_version(parts: tuple[str, ...] = STAGE2_SOURCES) -> str:
    """``<package version>+<16 hex>``: the wmforge version and a hash of the Python sources of
    ``parts`` (sub-packages of ``stages``), by relative path and bytes."""
    try:
        ver = metadata.version("wmforge")
    except metadata.PackageNotFoundError:
        ver = "0+unknown"
    h = hashlib.sha256()
    for part in parts:
        root = PACKAGE_ROOT / part
        for p in [root] if root.is_file() else sorted(root.rglob("*.py")):
            h.update(p.relative_to(PACKAGE_ROOT).as_posix().encode() + b"\0")
            h.update(hashlib.sha256(p.read_bytes()).digest())
    return f"{ver}+{h.hexdigest()[:16]}"


class AssetDigests:
    """sha256 of asset files and trees, cached by (path, size, mtime_ns, ctime_ns, inode):
    a file rewritten with its old size and mtime put back (``cp -p``, ``rsync -t``) has a new
    ctime, which no tool can set, and a file replaced by another has a new inode."""

    def __init__(self, cache_file: Path | None = None):
        self.cache_file = cache_file
        self.cache: dict[str, list] = {}
        self.dirty = False
        if cache_file is not None and cache_file.is_file():
            try:
                self.cache = json.loads(cache_file.read_text())
            except (OSError, ValueError):
                self.cache = {}

    def file(self, path: Path) -> str:
        st = path.stat()
        key = str(path.resolve())
        stamp = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]
        hit = self.cache.get(key)
        if hit and hit[:-1] == stamp:  # an entry of the older [size, mtime, digest]: a miss
            return str(hit[-1])
        digest = sha256_file(path)
        self.cache[key] = [*stamp, digest]
        self.dirty = True
        return digest

    def tree(self, root: Path) -> str:
        """One digest of every file under ``root`` (or of ``root`` itself if it is a file)."""
        if root.is_file():
            return self.file(root)
        h = hashlib.sha256()
        for dirpath, _dirs, files in sorted(os.walk(root, followlinks=True)):
            for name in sorted(files):
                p = Path(dirpath) / name
                if not p.is_file():
                    continue  # a dangling link: nothing to read
                h.update(p.relative_to(root).as_posix().encode() + b"\0")
                h.update(self.file(p).encode())
        return h.hexdigest()

    def model(self, path: Path, root: Path | None = None) -> str:
        """What a render reads of a model file (a level, a character): the digest of its
        folder (:meth:`tree`), combined with the digest of each file it references outside
        that folder but inside ``root``, its pack (``../Textures/``; :meth:`references`).
        A model with every reference inside its folder keeps its folder's digest; one whose
        references are unknown (a file too large to read) is keyed with its whole pack."""
        digest = self.tree(path.parent)
        refs = self.references(path, root)
        if refs is None:
            return (hashlib.sha256(f"{digest}|pack:{self.tree(root)}".encode()).hexdigest()
                    if root is not None else digest)
        real = Path(os.path.realpath(path.parent))
        outside = [f for f in refs if real not in f.parents and f.is_file()]
        if not outside:
            return digest
        h = hashlib.sha256(digest.encode())
        for f in outside:  # sorted by referenced_files
            h.update(b"\0" + os.path.relpath(f, real).encode() + b"\0")
            h.update(self.file(f).encode())
        return h.hexdigest()

    def references(self, path: Path, root: Path | None = None) -> list[Path] | None:
        """:func:`~stages.cluster.model_refs.referenced_files` of ``path`` inside ``root``
        (None: unknown). A glTF's or egg's references as written are cached like a digest,
        under the file's stamp, and resolved at each call (a retargeted symlink resolves
        anew); an OBJ's are read each time (its ``.mtl`` files change on their own)."""
        from . import model_refs

        if path.name.lower().endswith(".obj"):
            return model_refs.referenced_files(path, root)
        try:
            st = path.stat()
        except OSError:
            return []
        key = f"refs:{path.resolve()}"
        stamp = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]
        hit = self.cache.get(key)
        if hit and hit[:-1] == stamp and (hit[-1] is None or isinstance(hit[-1], list)):
            raw = hit[-1]
        else:
            raw = model_refs.raw_references(path)
            self.cache[key] = [*stamp, raw]
            self.dirty = True
        return None if raw is None else model_refs.referenced_files(path, root, raw)

    def save(self) -> None:
        if self.cache_file is None or not self.dirty:
            return
        self.cache_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.cache_file.with_name(f"{self.cache_file.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(self.cache, sort_keys=True))
        os.replace(tmp, self.cache_file)
        self.dirty = False


def pack_dir(library: Path, rel_path: str) -> Path:
    """The asset pack holding a library-relative file: the first folder under the root."""
    first = Path(rel_path).parts[0] if Path(rel_path).parts else ""
    return library / first


def render_settings(rcfg: RenderConfig, fps: int) -> RenderSettings:
    """The settings that shape a render's bytes (part of its key and of its meta.json)."""
    w, h = rcfg.size()
    return RenderSettings(
        width=w, height=h, spatial_samples=rcfg.spatial_samples,
        temporal_samples=rcfg.temporal_samples, shutter=rcfg.shutter,
        warmup_frames=rcfg.warmup_frames, x264_preset=rcfg.x264_preset, crf=rcfg.crf,
        encoder_threads=rcfg.encoder_threads, x264_mbtree=rcfg.x264_mbtree,
        gop=max(1, round(rcfg.gop_s * fps)), preview=rcfg.preview,
        preview_x264_preset=rcfg.preview_x264_preset,
        preview_encoder_threads=rcfg.preview_encoder_threads, mask_scale=rcfg.mask_scale,
        align_radius_px=rcfg.align_radius_px, align_min=rcfg.align_min,
        shadow_map_size=rcfg.shadow_map_size, shadow_extent_m=rcfg.shadow_extent_m,
        meter_frames=rcfg.meter_frames, shadow_pcf_taps=rcfg.shadow_pcf_taps,
        exposure_key=rcfg.exposure_key, tone_map=rcfg.tone_map,
        ibl_strength=rcfg.ibl_strength, shading=rcfg.shading,
        ground_truth=validate_layers(rcfg.ground_truth), backend=rcfg.backend,
        compute_shading=rcfg.compute_shading, yuv=rcfg.yuv,
        compute_leaders=leaders_value(rcfg.compute_leaders),
        max_triangles=rcfg.limits.max_triangles, max_texture_px=rcfg.limits.max_texture_px)


def render_key(traj_dir: Path, settings: RenderSettings | dict, code: str = "",
               assets: str = "") -> str:
    """Identity of one render: the trajectory's bytes (its meta.json carries Stage I's own key),
    the settings, the Stage II code version and the digest of the assets it reads."""
    d = settings.as_dict() if isinstance(settings, RenderSettings) else settings
    h = hashlib.sha256(json.dumps(d, sort_keys=True).encode())
    h.update(f"\0{code}\0{assets}\0".encode())
    for name in (*traj_files(traj_dir), "meta.json"):
        h.update(sha256_file(traj_dir / name).encode())
    return h.hexdigest()[:16]
