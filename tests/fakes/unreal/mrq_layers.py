"""What the fake editor writes for a Movie Render Queue job with ground-truth passes
(unreal/ue_layers.py): per camera and frame, EXR files laid out and encoded as MRQ writes them.

- ``{render_pass}`` of a post-process material is ``FinalImage`` + the pass's name; the main
  pass (``FinalImage``) is written too. Values are the scene texture the material reads
  (``materials.Material.scene_texture``): SceneDepth = the depth along the view axis in
  Unreal units (cm) in R, WorldNormal = the surface normal in Unreal's world axes (x forward,
  y right, z up: left-handed). 32-bit float channels with ``high_precision_output``, else half.
  Where no surface is hit the depth is the far value (FLT_MAX here; Unreal's own value was not
  measured) and the normal is zero.
- The Object ID pass writes ``ActorHitProxyMask00..02`` (Cryptomatte: R = rank-0 id as the
  float bits of MurmurHash3_32 of the actor label with the exponent kept off 0 and 255, G =
  its coverage, B/A = rank 1), the manifest of every actor in the world in the header
  (``cryptomatte/<key>/manifest``). Pixels that hit nothing get the id of ``default``.
- As MRQ does, a job with more than one spatial or temporal sample jitters each sample by a
  sub-pixel offset and averages them (depth and normals); a job with one of each does not.

Surfaces are the embedded engine's (Bullet ray casts, one per pixel and sample), the level's
body labelled with the level's name, each prop with its own, and drawn skeletal mesh actors
as upright cylinders labelled with their actor label. A stand-in: no Unreal runs here."""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path
from typing import Any

from tests.fakes.unreal import namespace as fu

FAR_CM = 3.4028234663852886e38  # FLT_MAX
RAY_M = 60.0


def murmur3_32(data: bytes, seed: int = 0) -> int:
    """MurmurHash3 x86 32-bit (Cryptomatte's name hash)."""
    c1, c2, h, n = 0xCC9E2D51, 0x1B873593, seed, len(data)
    for i in range(0, n - n % 4, 4):
        k = struct.unpack_from("<I", data, i)[0]
        k = (k * c1) & 0xFFFFFFFF
        k = ((k << 15) | (k >> 17)) & 0xFFFFFFFF
        h ^= (k * c2) & 0xFFFFFFFF
        h = ((h << 13) | (h >> 19)) & 0xFFFFFFFF
        h = (h * 5 + 0xE6546B64) & 0xFFFFFFFF
    k = 0
    tail = data[n - n % 4:]
    for j in reversed(range(len(tail))):
        k = (k << 8) | tail[j]
    if tail:
        k = (k * c1) & 0xFFFFFFFF
        k = ((k << 15) | (k >> 17)) & 0xFFFFFFFF
        h ^= (k * c2) & 0xFFFFFFFF
    h ^= n
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & 0xFFFFFFFF
    return h ^ (h >> 16)


def crypto_id(name: str) -> int:
    """The Cryptomatte id of a name: its hash with the float exponent kept in 1..254."""
    h = murmur3_32(name.encode())
    exp = min(max((h >> 23) & 0xFF, 1), 254)
    return (h & 0x807FFFFF) | (exp << 23)


def level_label(node_name: str) -> str:
    """A Bullet body's actor label: ``level:<scene>/<level>`` → the level's name, ``prop:X`` → X."""
    return node_name.split(":", 1)[-1].split("/")[-1]


def bodies(ed: Any) -> list[tuple[str, tuple[float, float, float, float, float]]]:
    """(label, (x, y, z of the feet, radius, height)) of the skeletal mesh actors drawn in the
    main pass (GBuffer and hit proxies)."""
    out = []
    for a in ed.editor_world.actors:
        if not isinstance(a, fu.SkeletalMeshActor) or a.hidden_in_game:
            continue
        c = a.skeletal_mesh_component
        if c.asset is None or not c.render_in_main_pass:
            continue
        x, y, z = fu._m(c.relative_location)
        z += c.asset.base_cm * abs(c.relative_scale.z) / 100.0  # its lowest point
        out.append((a.label, (x, y, z, c.asset.radius_cm * abs(c.relative_scale.x) / 100.0,
                              c.asset.height_cm * abs(c.relative_scale.z) / 100.0)))
    return out


def _ray_body(o: tuple, d: tuple, body: tuple) -> float | None:
    """Ray parameter of the first hit of ``o + t d`` (t > 0) on an upright cylinder's side,
    from outside or from inside (a camera inside the body sees its inner wall)."""
    x, y, z, r, h = body
    ox, oy = o[0] - x, o[1] - y
    a = d[0] * d[0] + d[1] * d[1]
    if a < 1e-12:
        return None
    b = 2 * (ox * d[0] + oy * d[1])
    c = ox * ox + oy * oy - r * r
    disc = b * b - 4 * a * c
    if disc < 0:
        return None
    for t in sorted(((-b - math.sqrt(disc)) / (2 * a), (-b + math.sqrt(disc)) / (2 * a))):
        if t > 1e-6 and z <= o[2] + t * d[2] <= z + h:
            return t
    return None


def _cylinder(o: tuple, d: tuple, body: tuple) -> tuple[float, tuple] | None:
    """The ray-body hit both jobs use (``_ray_body``) with the side's outward normal."""
    t = _ray_body(o, d, body)
    if t is None:
        return None
    px, py = o[0] - body[0] + t * d[0], o[1] - body[1] + t * d[1]
    n = math.hypot(px, py) or 1.0
    return t, (px / n, py / n, 0.0)


def _offsets(n: int) -> list[tuple[float, float]]:
    """Sub-pixel offsets of n samples (Halton 2, 3 around the centre); none for one sample."""
    if n <= 1:
        return [(0.0, 0.0)]

    def halton(i: int, b: int) -> float:
        f, r = 1.0, 0.0
        while i > 0:
            f /= b
            r += f * (i % b)
            i //= b
        return r
    return [(halton(i + 1, 2) - 0.5, halton(i + 1, 3) - 0.5) for i in range(n)]


def surface(engine: Any, o: tuple, d: tuple, bods: list) -> tuple[float, tuple, str] | None:
    """(z along the view axis in m, world normal in contract axes, actor label) of the nearest
    surface on the ray ``o + t d`` (``d`` has unit forward component), or None."""
    w, P = engine.world, engine._P
    end = tuple(o[a] + RAY_M * d[a] for a in range(3))
    r = w.rayTestClosest(P(*o), P(*end))
    best = None
    if r.hasHit():
        n = r.getHitNormal()
        best = (r.getHitFraction() * RAY_M, (n.x, n.y, n.z), level_label(r.getNode().getName()))
    for label, body in bods:
        hit = _cylinder(o, d, body)
        if hit is not None and (best is None or hit[0] < best[0]):
            best = (hit[0], hit[1], label)
    return best


def write_frame(ed: Any, job: Any, label: str, loc: Any, rot: Any, hfov: float, W: int, H: int,
                k: int) -> None:
    """Every pass of job ``job`` for camera ``label`` at frame ``k``, as MRQ lays them out."""
    import numpy as np
    import OpenEXR

    cfg = job.config.settings
    out = cfg[fu.MoviePipelineOutputSetting]
    aa = cfg.get(fu.MoviePipelineAntiAliasingSetting)
    n = 1 if aa is None else max(1, aa.spatial_sample_count) * max(1, aa.temporal_sample_count)
    deferred = cfg.get(fu.MoviePipelineDeferredPassBase)
    pp = [p for p in (deferred.additional_post_process_materials if deferred else [])
          if p.enabled and isinstance(p.material, fu.Material)]
    object_ids = fu.MoviePipelineObjectIdRenderPass in cfg
    f, rt, up = fu.camera_basis(rot)
    o = fu._m(loc)
    th, tv = math.tan(hfov / 2), math.tan(hfov / 2) * H / W
    bods = bodies(ed)
    depth = np.zeros((H, W), np.float64)
    normal = np.zeros((H, W, 3), np.float64)
    ids = np.zeros((H, W), np.uint32)
    default = crypto_id("default")
    for j in range(H):
        for i in range(W):
            seen: dict[str, int] = {}
            for dx, dy in _offsets(n):
                u = 2 * (i + 0.5 + dx) / W - 1
                v = 1 - 2 * (j + 0.5 + dy) / H
                d = tuple(f[a] + u * th * rt[a] + v * tv * up[a] for a in range(3))
                s = surface(ed.engine, o, d, bods)
                if s is None:
                    depth[j, i] += FAR_CM / n
                    seen["default"] = seen.get("default", 0) + 1
                    continue
                depth[j, i] += s[0] * 100.0 / n
                normal[j, i] += np.array((s[1][0], -s[1][1], s[1][2])) / n  # Unreal axes
                seen[s[2]] = seen.get(s[2], 0) + 1
            top = max(sorted(seen), key=lambda x: seen[x])
            ids[j, i] = default if top == "default" else crypto_id(top)
    files: dict[str, dict[str, Any]] = {}
    header: dict[str, Any] = {"compression": _compression(cfg), "type": OpenEXR.scanlineimage}
    if deferred is not None and deferred.render_main_pass:
        g = (255 * np.clip(1 - depth / 6000.0, 0, 1)).astype(np.float16)
        files["FinalImage"] = {"R": g, "G": g, "B": g, "A": np.ones((H, W), np.float16)}
        for p in pp:
            tex = p.material.scene_texture()
            if tex is None:
                continue
            dt = np.float32 if p.high_precision_output else np.float16
            if tex is fu.SceneTextureId.PPI_SCENE_DEPTH:
                rgb = [depth, np.zeros((H, W)), np.zeros((H, W))]
            elif tex is fu.SceneTextureId.PPI_WORLD_NORMAL:
                rgb = [normal[..., 0], normal[..., 1], normal[..., 2]]
            else:
                continue
            name = p.name or p.material.get_name()
            files["FinalImage" + name] = {c: np.asarray(a, dt) for c, a in zip("RGB", rgb,
                                                                              strict=True)}
            files["FinalImage" + name]["A"] = np.zeros((H, W), dt)
    if object_ids:
        names = sorted({"default", *(lab for lab, _ in bods), *(
            level_label(b.getName()) for b in ed.engine.world.getRigidBodies())})
        key = f"{murmur3_32(b'ActorHitProxyMask'):08x}"[:7]
        idf = ids.view(np.float32)
        zero = np.zeros((H, W), np.float32)
        for layer in range(3):
            files[f"ActorHitProxyMask{layer:02d}"] = (
                {"R": idf.copy(), "G": np.ones((H, W), np.float32), "B": zero, "A": zero}
                if layer == 0 else {"R": zero, "G": zero, "B": zero, "A": zero})
        header.update({
            f"cryptomatte/{key}/manifest": json.dumps({x: f"{crypto_id(x):08x}" for x in names},
                                                      separators=(",", ":")),
            f"cryptomatte/{key}/name": "ActorHitProxyMask",
            f"cryptomatte/{key}/hash": "MurmurHash3_32",
            f"cryptomatte/{key}/conversion": "uint32_to_float32"})
    for render_pass, channels in files.items():
        name = out.file_name_format.replace("{camera_name}", label).replace(
            "{render_pass}", render_pass).replace(
            "{frame_number}", f"{k:0{out.zero_pad_frame_numbers}d}")
        path = Path(out.output_directory.path) / f"{name}.exr"
        path.parent.mkdir(parents=True, exist_ok=True)
        h = dict(header) if render_pass.startswith("ActorHitProxyMask") else {
            "compression": header["compression"], "type": header["type"]}
        with OpenEXR.File(h, channels) as exr:
            exr.write(str(path))


def _compression(cfg: dict) -> Any:
    import OpenEXR

    exr = cfg.get(fu.MoviePipelineImageSequenceOutput_EXR)
    c = exr.compression if exr is not None else fu.EXRCompressionFormat.PIZ
    return {"NONE": OpenEXR.NO_COMPRESSION, "PIZ": OpenEXR.PIZ_COMPRESSION,
            "ZIP": OpenEXR.ZIP_COMPRESSION, "DWAA": OpenEXR.DWAA_COMPRESSION,
            "DWAB": OpenEXR.DWAB_COMPRESSION}[c.name]


def has_layer_passes(job: Any) -> bool:
    """Does the job render post-process materials or object ids (then it writes EXR passes)?"""
    cfg = job.config.settings
    d = cfg.get(fu.MoviePipelineDeferredPassBase)
    return (fu.MoviePipelineImageSequenceOutput_EXR in cfg
            and (fu.MoviePipelineObjectIdRenderPass in cfg
                 or any(p.enabled and isinstance(p.material, fu.Material)
                        for p in (d.additional_post_process_materials if d else []))))
