"""GL's own deferred G-buffer, read back from a ReplayRenderer's RenderTargets (the reference
the compute rasterizer is compared against): base colour, metallic, world normal, roughness,
the sun's shadow factor and window depth, per (view, sample) tile, rows top-down, in the
layout of ``stages.engine.compute.gbuffer_types``."""

from __future__ import annotations

import math

import numpy as np

from stages.core.trajectory import VIEWS
from stages.engine.replay_render import CharacterPose, ReplayRenderer, SamplePose, ViewPose


def _plane(r: ReplayRenderer, name: str) -> np.ndarray:
    """The whole atlas plane ``name`` as float32 [ah, aw, c], GL rows (bottom-up)."""
    t = r.targets
    tex = t.gbuf[name]
    if not t.engine.extractTextureData(tex, t.gsg):
        raise RuntimeError(f"could not read {name} back from the GL context")
    raw = np.frombuffer(memoryview(tex.getRamImage()), np.uint8)
    h, w, c = tex.getYSize(), tex.getXSize(), tex.getNumComponents()
    dt = {2: np.float16, 4: np.float32}[tex.getComponentWidth()]
    a = raw.view(dt).astype(np.float32).reshape(h, w, c)
    if c >= 3:  # Panda3D stores BGR(A)
        a = a[..., [2, 1, 0, *range(3, c)]]
    return a


def oct_decode(e: np.ndarray) -> np.ndarray:
    n = np.concatenate([e, 1 - np.abs(e[..., :1]) - np.abs(e[..., 1:2])], -1)
    neg = n[..., 2] < 0
    s = np.where(n[..., :2] >= 0, 1.0, -1.0)
    xy = (1 - np.abs(n[..., [1, 0]])) * s
    n[..., :2] = np.where(neg[..., None], xy, n[..., :2])
    return n / np.linalg.norm(n, axis=-1, keepdims=True)


def read_gl_gbuffer(r: ReplayRenderer) -> dict[str, np.ndarray]:
    """The G-buffer of the frame last drawn, [V, H, W(, c)] with V = view * N + sample."""
    t = r.targets
    if not t.deferred:
        raise ValueError("read_gl_gbuffer: the renderer is not deferred (render.shading)")
    planes = {k: _plane(r, k) for k in ("gb_albedo", "gb_normal", "gb_depth")}
    out: dict[str, list] = {k: [] for k in ("albedo", "metallic", "normal", "roughness",
                                            "shadow", "depth")}
    for view in VIEWS:
        for k in range(t.N):
            x0, y0 = t.tile_origin[(view, k)]
            tile = {n: p[y0:y0 + t.H, x0:x0 + t.W][::-1] for n, p in planes.items()}
            a, nr, d = tile["gb_albedo"], tile["gb_normal"], tile["gb_depth"]
            out["albedo"].append(a[..., :3])
            out["metallic"].append(a[..., 3])
            out["normal"].append(oct_decode(nr[..., :2]))
            out["roughness"].append(nr[..., 2])
            out["shadow"].append(nr[..., 3])
            out["depth"].append(d[..., 0])
    return {k: np.stack(v) for k, v in out.items()}


def default_poses(W: int, H: int) -> dict[str, ViewPose]:
    """The five views of the default camera rig around a character at the origin."""
    from stages.core.cameras import CameraRigConfig, compute_tracks

    rig = CameraRigConfig(width=W, height=H)
    rows = compute_tracks([(0.0, 0.0, 0.0)], [0.0], 1.8, rig, None, body_radius=0.3)
    return {row["view"]: ViewPose((row["pos_x"], row["pos_y"], row["pos_z"]),
                                  (row["rot_w"], row["rot_x"], row["rot_y"], row["rot_z"]),
                                  row["fov_deg"]) for row in rows}


def render_gl(level_model, char_model, char_path: str, lighting: dict, W: int, H: int,
              char_pos=(0.0, 0.0, 0.0), yaw_deg: float = 0.0, look=None,
              views: dict[str, ViewPose] | None = None, clip: str | None = None,
              clip_time: float = 0.0, spatial: int = 1, temporal: int = 1,
              step_m: float = 0.0) -> tuple[ReplayRenderer, SamplePose]:
    """A deferred ReplayRenderer with the level and character loaded and one frame drawn;
    returns it (still open: its scene is what the compute renderer reads) and the exact pose.
    Temporal sample t places the character ``t * step_m`` further along +x."""
    from tests.looks import look as make_look

    r = ReplayRenderer(W, H, spatial, temporal, "p3headlessgl", 1,
                       look=look or make_look(shadow_map_size=1024, shading="deferred"))
    r.load_level(level_model, lighting)
    r.load_character(char_model, char_path, {}, 0.0)
    poses = default_poses(W, H)
    if views:
        poses.update(views)
    h = math.radians(yaw_deg) / 2
    cp = CharacterPose(tuple(char_pos), (math.cos(h), 0.0, 0.0, math.sin(h)), (1.0, 1.0, 1.0),
                       clip, clip_time)
    sp = SamplePose(cp, poses)
    samples = [SamplePose(CharacterPose((char_pos[0] + t * step_m, *char_pos[1:]), cp.quat,
                                        cp.scale, clip, clip_time + 0.1 * t), poses)
               for t in range(temporal)]
    r.render(samples, sp, 0.0)  # a first frame: the shadow map follows one frame behind
    r.render(samples, sp, 0.0)
    return r, sp
