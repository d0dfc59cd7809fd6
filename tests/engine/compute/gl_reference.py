"""GL's G-buffer planes and pictures of one frame, read back from the real deferred renderer
(Panda3D on llvmpipe here), for comparing the torch lighting and resolve against.

How the planes are read: the frame is drawn twice with the same poses. The first draw is the
ordinary one (G-buffer, the compute lighting pass, the resolve): the G-buffer planes, the lit
atlas and the resolved pictures are read back after it. The second draw has the lighting
pass's compute node hidden, so the atlas' colour plane keeps what the G-buffer shader wrote
there: the emission before lighting. The G-buffer planes of both draws must agree (the frame
is deterministic), which the reader checks.

Texture RAM images are BGR(A) and bottom-up; tiles sit at ``RenderTargets.tile_origin``. The
planes are returned top-down (row 0 at the top), ``[views, samples, H, W, C]``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from stages.core.trajectory import VIEWS


@dataclass
class GLFrame:
    emission: np.ndarray   # [V, N, H, W, 3] float32, linear
    albedo: np.ndarray     # [V, N, H, W, 3]
    metallic: np.ndarray   # [V, N, H, W]
    oct_normal: np.ndarray  # [V, N, H, W, 2] octahedral world normal
    roughness: np.ndarray  # [V, N, H, W]
    shadow: np.ndarray     # [V, N, H, W]
    depth: np.ndarray      # [V, N, H, W] GL window depth (1: sky)
    inv_view_proj: np.ndarray  # [V, N, 4, 4] clip → world, column vectors
    eye: np.ndarray        # [V, N, 3]
    lit: np.ndarray        # [V, N, H, W, 3] the atlas after GL's lighting pass
    colors: np.ndarray     # [V, H, W, 3] uint8, GL's resolved pictures
    meter: np.ndarray      # [H, V * W] uint8, GL's meter codes of the same poses
    meter_lit: np.ndarray  # [V, N, H, W, 3] the lit atlas of that meter frame
    exposure: float
    tone_map: str
    lighting: Any          # stages.engine.compute.lighting.Lighting


def write_sample_assets(out: Path, level: str = "Downtown") -> tuple[Path, Path]:
    """A sample level (as the sample library generates it) and the humanoid Alex."""
    from stages.assetgen import characters, levels

    out.mkdir(parents=True, exist_ok=True)
    lv = out / f"{level}.glb"
    if not lv.exists():
        lv.write_bytes(levels.RECIPES[level](7001, 48, 128).to_glb())
    ch = out / "Alex.glb"
    if not ch.exists():
        h, b, s, clips, _ = characters.HUMANOIDS["Alex"]
        ch.write_bytes(characters.humanoid("Alex", h, b, s, 7, 128, clips))
    return lv, ch


def _tiles(tex: Any, engine: Any, gsg: Any, targets: Any, comps: int) -> np.ndarray:
    tex.clearRamImage()  # else a second read returns the first one's image
    if not engine.extractTextureData(tex, gsg):
        raise RuntimeError(f"gl_reference: could not read texture {tex.getName()} back")
    if tex.getComponentWidth() != 4:
        raise RuntimeError(f"gl_reference: {tex.getName()} came back with "
                           f"{tex.getComponentWidth()}-byte components, expected float32")
    w, h = tex.getXSize(), tex.getYSize()
    ram = np.frombuffer(memoryview(tex.getRamImage()), np.float32).reshape(h, w, comps)
    if comps >= 3:  # BGR(A) → RGB(A)
        ram = ram[..., [2, 1, 0] + ([3] if comps == 4 else [])]
    W, H, N = targets.W, targets.H, targets.N
    out = np.empty((len(VIEWS), N, H, W, comps), np.float32)
    for v, view in enumerate(VIEWS):
        for k in range(N):
            x0, y0 = targets.tile_origin[(view, k)]
            out[v, k] = ram[y0:y0 + H, x0:x0 + W][::-1]
    return out


def _cameras(targets: Any) -> tuple[np.ndarray, np.ndarray]:
    """Each tile's clip → world matrix and eye, as ``LightingPass.set_tile_cameras`` makes
    them (Panda3D's row-vector matrix transposed to column vectors)."""
    from panda3d.core import LMatrix4f

    inv = np.zeros((len(VIEWS), targets.N, 4, 4), np.float32)
    eye = np.zeros((len(VIEWS), targets.N, 3), np.float32)
    for v, view in enumerate(VIEWS):
        for t in range(targets.T):
            for s in range(targets.S):
                cam = targets.cams[(view, t, s)]
                m = LMatrix4f(cam.getMat(targets.scene))
                m.invertInPlace()
                m = m * cam.node().getLens().getProjectionMat()
                m.invertInPlace()
                k = t * targets.S + s
                inv[v, k] = np.array([[m.getCell(i, j) for j in range(4)] for i in range(4)],
                                     np.float32).T
                p = cam.getPos(targets.scene)
                eye[v, k] = (p.x, p.y, p.z)
    return inv, eye


def standard_poses(width: int, height: int, at: tuple[float, float, float] = (0.0, 0.0, 0.0),
                   yaw: float = 0.0) -> dict:
    from stages.core.cameras import CameraRigConfig, compute_tracks
    from stages.engine.replay_render import ViewPose

    rig = CameraRigConfig(width=width, height=height)
    rows = compute_tracks([at], [yaw], 1.8, rig, None, body_radius=0.3)
    return {r["view"]: ViewPose((r["pos_x"], r["pos_y"], r["pos_z"]),
                                (r["rot_w"], r["rot_x"], r["rot_y"], r["rot_z"]), r["fov_deg"])
            for r in rows}


def _look_quat(d: np.ndarray) -> tuple[float, float, float, float]:
    """(w, x, y, z) of an OpenCV camera (x right, y down, z forward) looking along ``d``."""
    z = d / np.linalg.norm(d)
    x = np.cross(z, (0.0, 0.0, 1.0))
    x = x / np.linalg.norm(x)
    y = np.cross(z, x)
    m = np.stack([x, y, z], 1)  # camera → world, columns
    w = math.sqrt(max(1.0 + m[0, 0] + m[1, 1] + m[2, 2], 1e-12)) / 2
    return (w, (m[2, 1] - m[1, 2]) / (4 * w), (m[0, 2] - m[2, 0]) / (4 * w),
            (m[1, 0] - m[0, 1]) / (4 * w))


def sky_poses(sun_dir: tuple[float, float, float]) -> dict:
    """Views from 300 m above the level that see nothing but sky: four straight up (OpenCV
    axes: the identity looks along +Z), each turned a different way about the vertical, and
    one toward the sun (its disc; the level is far below the bottom of that picture)."""
    from stages.engine.replay_render import ViewPose

    out = {}
    for i, view in enumerate(VIEWS[:-1]):
        a = math.radians(30.0 * i) / 2
        out[view] = ViewPose((0.0, 0.0, 300.0), (math.cos(a), 0.0, 0.0, math.sin(a)), 70.0)
    out[VIEWS[-1]] = ViewPose((0.0, 0.0, 300.0), _look_quat(-np.asarray(sun_dir, float)), 40.0)
    return out


def render_reference(level: Path, character: Path, width: int = 96, height: int = 54,
                     spatial: int = 1, poses: dict | None = None, auto: bool = True,
                     at: tuple[float, float, float] = (0.0, 0.0, 0.0), yaw: float = 0.0
                     ) -> GLFrame:
    """One deferred GL frame of ``level`` with ``character`` at ``at`` facing ``yaw`` (rad),
    and its planes."""
    from stages.engine.compute.lighting import lighting_from_pass
    from stages.engine.level_render import load_level_lighting
    from stages.engine.models import load_model
    from stages.engine.pbr import exposure_from_meter
    from stages.engine.replay_render import CharacterPose, ReplayRenderer, SamplePose
    from tests.looks import look as make_look

    look = make_look(shading="deferred", shadow_map_size=512)
    r = ReplayRenderer(width, height, spatial, 1, "p3headlessgl", 1, look=look)
    try:
        t = r.targets
        if t.lighting is None:
            raise RuntimeError("gl_reference: the renderer did not take the deferred path")
        lit_cfg = load_level_lighting(str(level))
        r.load_level(load_model(str(level)), lit_cfg)
        r.load_character(load_model(str(character)), str(character), {}, 0.0)
        q = (math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2))
        cp = CharacterPose(at, q, (1.0, 1.0, 1.0), None, 0.0)
        sp = SamplePose(cp, poses or standard_poses(width, height, at, yaw))
        r.warmup(1)
        if auto:
            r.set_auto_exposure(exposure_from_meter(r.meter([sp], sp, 0.0),
                                                    r.look.exposure_key)[0])
        r.set_exposure(float(lit_cfg.get("exposure", 0.0)))
        colors, _, _ = r.render([sp], sp, 0.0)
        eng, gsg = t.engine, t.gsg
        lit = _tiles(t.atlas_tex, eng, gsg, t, 3)
        ga = _tiles(t.gbuf["gb_albedo"], eng, gsg, t, 4)
        gn = _tiles(t.gbuf["gb_normal"], eng, gsg, t, 4)
        gd = _tiles(t.gbuf["gb_depth"], eng, gsg, t, 1)[..., 0]
        inv, eye = _cameras(t)
        meter = r.meter([sp], sp, 0.0)
        meter_lit = _tiles(t.atlas_tex, eng, gsg, t, 3)
        t.lighting.np.hide()  # (switching its buffer off left the atlas as it was, lit)
        try:
            for _ in range(2):  # the first draw after the switch may still show the lit atlas
                r.render([sp], sp, 0.0)
        finally:
            t.lighting.np.show()
        emission = _tiles(t.atlas_tex, eng, gsg, t, 3)
        again = _tiles(t.gbuf["gb_normal"], eng, gsg, t, 4)
        if not np.array_equal(again, gn):
            raise RuntimeError("gl_reference: the G-buffer changed between two draws of the "
                               "same frame")
        return GLFrame(
            emission=emission, albedo=ga[..., :3].copy(), metallic=ga[..., 3].copy(),
            oct_normal=gn[..., :2].copy(), roughness=gn[..., 2].copy(),
            shadow=gn[..., 3].copy(), depth=gd, inv_view_proj=inv, eye=eye, lit=lit,
            colors=np.stack([np.ascontiguousarray(colors[v]) for v in VIEWS]), meter=meter,
            meter_lit=meter_lit,
            exposure=float(r.auto_exposure * 2.0 ** r.exposure_comp_ev),
            tone_map=look.tone_map, lighting=lighting_from_pass(t.lighting, lit_cfg))
    finally:
        r.close()
