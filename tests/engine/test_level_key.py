"""A level is known by its content: the node passes each level folder's digest to Stage II
(``instance.json``'s ``level_digests``), and the renderer keys its loaded level (and the
compute renderer's compile gate) on it. A slot's copy with a new mtime is the same level; new
content under the same name is another; a spec without a digest falls back to the file's
size and mtime."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from stages.cluster.keys import AssetDigests, render_settings
from stages.config import load_params
from stages.engine.instance_render import InstanceRenderer
from stages.engine.replay_inputs import _resolve


def test_the_node_names_each_levels_content_digest_in_the_instance(rendered):
    root, index, _ = rendered
    specs = sorted(root.rglob("instance.json"))
    assert specs and len(specs) == index["instance"].nunique()
    for f in specs:
        spec = json.loads(f.read_text())
        base, digests = Path(spec["base"]), spec["level_digests"]
        recorded = {json.loads((Path(j["traj_dir"]) / "meta.json").read_text())["level"]["path"]
                    for j in spec["jobs"]}
        assert set(digests) == recorded, (digests, recorded)
        for rec in recorded:
            p = Path(rec) if Path(rec).is_absolute() else base / rec
            assert digests[rec] == AssetDigests().model(p)  # its folder (+ refs beside it)
            # ... and the render worker's renderer loaded it under that digest
            log = (f.parent / "renderer.log").read_text()
            assert f"render: level {rec} loaded, known by its content @ {digests[rec]}" in log, log


def _renderer(inst: Path, path_map: dict[str, str], digests: dict[str, str] | None):
    rcfg = load_params(overrides=[
        "render.width=64", "render.height=36", "render.spatial_samples=1",
        "render.temporal_samples=1", "render.mask_scale=1", "render.warmup_frames=0",
        "render.preview=false"]).render
    return InstanceRenderer(inst, render_settings(rcfg, 30), "p3headlessgl", Path.cwd(),
                            log=lambda *_: None, path_map=path_map, level_digests=digests)


def test_the_renderer_keys_its_level_on_the_nodes_digest(trajs, sample_library, tmp_path):
    meta = json.loads((trajs / "NatureValley__AlpineMeadow" / "traj_0000" / "meta.json")
                      .read_text())
    rec = meta["level"]["path"]
    slot = tmp_path / "slot" / "NatureValley"
    shutil.copytree(sample_library / "NatureValley", slot)  # a slot's staged copy
    path_map = {str(sample_library / "NatureValley"): str(slot)}
    level = _resolve(rec, Path.cwd(), path_map)
    assert slot in level.parents and level.is_file(), level

    def loads_of(ir: InstanceRenderer, steps) -> list[str]:
        """Run _ensure_level after each step; the level keys of the loads it made."""
        out: list[str] = []
        r = ir._renderer()
        real = r.load_level

        def counted(*a, **k):
            rep = real(*a, **k)
            out.append(r.level_key)
            return rep
        r.load_level = counted
        for step in steps:
            step()
            ir._ensure_level(meta)
        return out

    def touch() -> None:  # a copy made again without -p: same bytes, a new mtime
        ns = level.stat().st_mtime_ns + 10**9
        os.utime(level, ns=(ns, ns))

    digests = {rec: "d" * 64}
    ir = _renderer(tmp_path / "a", path_map, digests)
    try:
        def new_content() -> None:
            digests[rec] = "e" * 64  # the node's digest of a pack whose bytes changed
            ir.level_digests = dict(digests)
        keys = loads_of(ir, [lambda: None, touch, new_content])
    finally:
        ir.close()
    assert len(keys) == 2, keys  # loaded once, not again for the touch; again for new bytes
    assert keys[0].endswith("@" + "d" * 64) and keys[1].endswith("@" + "e" * 64)

    ir = _renderer(tmp_path / "b", path_map, None)  # a spec without digests (by hand)
    try:
        keys = loads_of(ir, [lambda: None, touch])
    finally:
        ir.close()
    assert len(keys) == 2 and keys[0] != keys[1], keys  # size:mtime: the touch is new


def test_a_level_rewritten_with_its_old_size_and_mtime_is_another_level(tmp_path):
    """``cp -p`` or ``rsync -t`` of other bytes over a level keeps its size and mtime: the
    node's digest cache (kept across runs) still sees new bytes (the ctime is new)."""
    import time

    d = tmp_path / "Pack" / "Maps"
    d.mkdir(parents=True)
    f = d / "level.gltf"
    f.write_bytes(b'{"asset": {"version": "2.0"}, "a": 1}')
    (d / "level.bin").write_bytes(bytes(64))
    cache = tmp_path / "asset_digests.json"
    digests = AssetDigests(cache)
    first = digests.tree(d)
    digests.save()
    st = f.stat()
    time.sleep(0.02)  # another ctime tick
    f.write_bytes(b'{"asset": {"version": "2.0"}, "a": 2}')  # same size
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))  # what cp -p puts back
    assert (f.stat().st_size, f.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)
    second = AssetDigests(cache).tree(d)  # a later run, reading the saved cache
    assert second != first
    assert second == AssetDigests().tree(d)  # what an empty cache says
    (d / "level.bin").write_bytes(bytes(63) + b"\1")  # an external buffer only
    assert AssetDigests(cache).tree(d) not in (first, second)
