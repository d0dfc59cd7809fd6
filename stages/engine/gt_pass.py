"""Stage II's ground-truth pass (issue #33): per view one un-jittered sample at each pixel centre,
rendered into float32 planes beside the RGB, never averaged with its samples.

The pass draws a scene graph of its own (``gt_root``), so nothing in the RGB scene changes
when it is on: a copy of the level (textures and geoms shared, nodes copied; its prop pivots
follow the RGB ones) with an instance id per mesh, and the character baked each frame from a
copy posed exactly as the alignment gate's mask copy. One camera per view at the frame's
recorded pose (film offset 0: the pixel centre). Its shader writes, per pixel:

- plane 0: z-depth along the camera's forward axis (m), instance id (float: exact below 2^24),
  the surface point's z-depth in the previous and in the next frame's camera;
- plane 1: the normal in camera space, OpenCV axes (interpolated vertex normal, no normal maps,
  turned toward the camera);
- plane 2: the point's pixel displacement to the previous and to the next frame's image.

Motion for the flow comes from geometry: the previous / next frame's camera (per view), each
prop pivot's previous / next transform (``delta_prev`` / ``delta_next``: world now → world then)
and, for the character, its skinned vertices posed at the previous / next frame's clip time
and transform (vertex columns ``prev_pos`` / ``next_pos``, world space). Occlusion and
out-of-frame tests happen per view afterwards (``gt_views``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.trajectory import VIEWS
from .gt_character import CharacterBake, mat_np, mat_panda
from .replay_poses import ViewPose, cv_to_panda_mat

CHARACTER_ID = 1   # the character's instance id; level meshes follow from 2
GT_EXT_BIT = 0     # camera bits inside the ground-truth scene: external views see the
GT_FP_BIT = 1      # character, the first-person view does not (as in the RGB)
MAX_FLOAT_ID = 1 << 24

_VERT_HEAD = """#version 330
uniform mat4 p3d_ModelViewProjectionMatrix;
uniform mat4 p3d_ModelViewMatrix;
uniform mat4 p3d_ModelMatrix;
uniform mat3 p3d_NormalMatrix;
uniform mat4 vp_prev;     // world -> clip of this view's camera in the previous frame
uniform mat4 vp_next;     // ... and in the next frame
in vec4 p3d_Vertex;
in vec3 p3d_Normal;
in vec4 p3d_Color;
in vec2 p3d_MultiTexCoord0;
out vec4 v_clip_now;
out vec4 v_clip_prev;
out vec4 v_clip_next;
out vec3 v_view_pos;
out vec3 v_view_normal;
out vec4 v_color;
out vec2 v_texcoord;
"""
LEVEL_VERT = _VERT_HEAD + """
uniform mat4 delta_prev;  // world now -> world in the previous frame (props; identity)
uniform mat4 delta_next;
void main() {
    vec4 world = p3d_ModelMatrix * p3d_Vertex;
    v_clip_now = p3d_ModelViewProjectionMatrix * p3d_Vertex;
    v_clip_prev = vp_prev * (delta_prev * world);
    v_clip_next = vp_next * (delta_next * world);
    v_view_pos = (p3d_ModelViewMatrix * p3d_Vertex).xyz;
    v_view_normal = p3d_NormalMatrix * p3d_Normal;
    v_color = p3d_Color;
    v_texcoord = p3d_MultiTexCoord0;
    gl_Position = v_clip_now;
}
"""
CHARACTER_VERT = _VERT_HEAD + """
in vec3 prev_pos;  // the vertex in world space, posed at the previous frame
in vec3 next_pos;  // ... at the next frame
void main() {
    v_clip_now = p3d_ModelViewProjectionMatrix * p3d_Vertex;
    v_clip_prev = vp_prev * vec4(prev_pos, 1.0);
    v_clip_next = vp_next * vec4(next_pos, 1.0);
    v_view_pos = (p3d_ModelViewMatrix * p3d_Vertex).xyz;
    v_view_normal = p3d_NormalMatrix * p3d_Normal;
    v_color = vec4(1.0);
    v_texcoord = vec2(0.0);
    gl_Position = v_clip_now;
}
"""
GT_FRAG = """#version 330
uniform struct p3d_MaterialParameters { vec4 baseColor; } p3d_Material;
uniform vec4 p3d_ColorScale;
uniform vec4 p3d_TexAlphaOnly;
uniform sampler2D p3d_TextureModulate;
uniform float gt_id;
uniform float cut_alpha;  // 1: cut out where the base colour's alpha is below 0.5
uniform vec2 size;        // the view's image, px
in vec4 v_clip_now;
in vec4 v_clip_prev;
in vec4 v_clip_next;
in vec3 v_view_pos;
in vec3 v_view_normal;
in vec4 v_color;
in vec2 v_texcoord;
layout(location = 0) out vec4 o_depth;  // z, id, z in the previous frame, z in the next
layout(location = 1) out vec4 o_normal; // camera-space normal (OpenCV axes), 1
layout(location = 2) out vec4 o_flow;   // to the previous frame dx, dy; to the next dx, dy
vec2 px(vec4 c) {  // clip -> pixel, x right, y down (pixel centres at +0.5)
    vec2 ndc = c.xy / c.w;
    return vec2((ndc.x * 0.5 + 0.5) * size.x, (0.5 - 0.5 * ndc.y) * size.y);
}
void main() {
    if (cut_alpha > 0.5) {
        vec4 base = p3d_Material.baseColor * v_color * p3d_ColorScale
                    * (texture(p3d_TextureModulate, v_texcoord) + p3d_TexAlphaOnly);
        if (base.a < 0.5) discard;
    }
    vec3 n = v_view_normal;
    if (dot(n, n) < 1e-12) n = cross(dFdx(v_view_pos), dFdy(v_view_pos));
    n = normalize(n);
    if (dot(n, -v_view_pos) < 0.0) n = -n;  // the side that is seen
    vec2 here = px(v_clip_now);
    o_depth = vec4(v_clip_now.w, gt_id, v_clip_prev.w, v_clip_next.w);
    o_normal = vec4(n.x, -n.y, -n.z, 1.0);  // GL eye (y up, z back) -> OpenCV
    o_flow = vec4(px(v_clip_prev) - here, px(v_clip_next) - here);
}
"""


@dataclass
class Instance:
    id: int
    kind: str     # character | level | prop
    name: str
    source: str


class GroundTruthPass:
    """The pass's buffer, scene, cameras and per-frame inputs (see the module docstring)."""

    def __init__(self, targets: Any, want_normals: bool, want_flow: bool):
        from panda3d.core import (
            BitMask32,
            Camera,
            DepthTestAttrib,
            DepthWriteAttrib,
            FrameBufferProperties,
            GraphicsPipe,
            Material,
            NodePath,
            Shader,
            Texture,
            TransparencyAttrib,
            WindowProperties,
        )

        t = self.t = targets
        self.W, self.H = t.W, t.H
        self.want_normals, self.want_flow = want_normals, want_flow
        p = FrameBufferProperties()
        p.setRgbColor(True)
        p.setFloatColor(True)
        p.setRgbaBits(32, 32, 32, 32)
        p.setAuxFloat(2 if want_flow else 1 if want_normals else 0)
        p.setDepthBits(24)
        self.buf = t.engine.makeOutput(t.pipe, "ground_truth", 3, p,
                                       WindowProperties.size(self.W * len(VIEWS), self.H),
                                       GraphicsPipe.BF_refuse_window
                                       | GraphicsPipe.BF_refuse_parasite, t.gsg, t.atlas)
        if self.buf is None:
            raise RuntimeError("render: could not create the float32 ground-truth buffer "
                               "(render.ground_truth needs RGBA32F render targets)")
        self.buf.setClearColor((0, 0, 0, 0))
        self.planes = [("depth", self.buf.RTP_color)]
        if want_normals:
            self.planes.append(("normal", self.buf.RTP_aux_float_0))
        if want_flow:
            self.planes.append(("flow", self.buf.RTP_aux_float_1))
        for pl in (self.buf.RTP_aux_float_0, self.buf.RTP_aux_float_1):
            self.buf.setClearActive(pl, True)
            self.buf.setClearValue(pl, (0, 0, 0, 0))
        self.texs = {}
        for name, pl in self.planes:
            tex = Texture(f"gt_{name}")
            self.buf.addRenderTexture(tex, self.buf.RTM_copy_ram, pl)
            self.texs[name] = tex
        root = self.root = NodePath("ground_truth")
        root.setShader(Shader.make(Shader.SL_GLSL, LEVEL_VERT, GT_FRAG))
        ident = mat_panda(np.eye(4))
        # vp_prev / vp_next live in each camera's initial state (set here and per frame): an
        # input on the root would override them (a child's input wins at equal priority)
        for k, v in (("delta_prev", ident), ("delta_next", ident), ("gt_id", 0.0),
                     ("cut_alpha", 1.0),
                     ("size", (float(self.W), float(self.H)))):
            root.setShaderInput(k, v)
        fallback = Material("wmforge-fallback")
        fallback.setBaseColor((1, 1, 1, 1))
        root.setMaterial(fallback)
        # one surface per pixel: no blending (it would mix ids), every surface writes depth
        root.setTransparency(TransparencyAttrib.M_none, 1000)
        root.setAttrib(DepthWriteAttrib.make(DepthWriteAttrib.M_on), 1000)
        root.setAttrib(DepthTestAttrib.make(DepthTestAttrib.M_less), 1000)
        self.cams: dict[str, Any] = {}
        for v, view in enumerate(VIEWS):
            dr = self.buf.makeDisplayRegion(v / len(VIEWS), (v + 1) / len(VIEWS), 0, 1)
            cam = Camera(f"gt_{view}", t._lens())
            cam.setCameraMask(BitMask32.bit(GT_FP_BIT if view == "fp" else GT_EXT_BIT))
            np_ = root.attachNewNode(cam)
            dr.setCamera(np_)
            self.cams[view] = np_
            self._set_view_matrices(view, ident, ident)
        self.level: Any = None
        self.pivots: list[Any] = []
        self.instances: list[Instance] = []
        self.level_instances: list[Instance] = []
        self.character: CharacterBake | None = None
        self._scratch = NodePath("gt_scratch_camera")
        self._lens = t._lens()

    # ------------------------------------------------------------------ scene

    def set_level(self, level_np: Any, pivots: list[Any], source: str) -> None:
        """Copy the loaded level (after sanitising) into the pass, one id per mesh."""
        if self.level is not None:
            self.level.removeNode()
        self.level = level_np.copyTo(self.root)
        self.pivots = [_follow(self.level, _index_path(level_np, p)) for p in pivots]
        if any(p.isEmpty() for p in self.pivots):
            raise RuntimeError("render: a prop pivot was not found in the ground-truth copy")
        pivot_keys = {p.getKey() for p in self.pivots}
        self.level_instances = []
        for gnp in self.level.findAllMatches("**/+GeomNode"):
            nid = CHARACTER_ID + 1 + len(self.level_instances)
            if nid >= MAX_FLOAT_ID:
                raise RuntimeError(f"render: more than {MAX_FLOAT_ID - 2} meshes in the level; "
                                   "the ground-truth pass carries ids as exact floats")
            gnp.setShaderInput("gt_id", float(nid))
            prop = any(a.getKey() in pivot_keys for a in _ancestors(gnp))
            self.level_instances.append(Instance(nid, "prop" if prop else "level",
                                                 _name_path(self.level, gnp), source))

    def set_character(self, holder: Any, name: str, source: str) -> None:
        """The posed, never drawn character copy under ``holder`` (``CharacterBake``)."""
        from panda3d.core import Shader

        if self.character is not None:
            self.character.remove()
        self.character = CharacterBake(
            holder, self.root, Shader.make(Shader.SL_GLSL, CHARACTER_VERT, GT_FRAG),
            CHARACTER_ID, GT_EXT_BIT)
        self.char_instance = Instance(CHARACTER_ID, "character", name, source)

    def instance_rows(self) -> list[Instance]:
        rows = [self.char_instance] if self.character is not None else []
        return rows + self.level_instances

    # ------------------------------------------------------------------ frames

    def _view_proj(self, vp: ViewPose) -> np.ndarray:
        """World -> clip of a camera at ``vp`` (row-vector convention, as Panda3D)."""
        from panda3d.core import LMatrix3f, LMatrix4f, LVecBase3f

        r = cv_to_panda_mat(vp.quat)
        self._scratch.setMat(LMatrix4f(LMatrix3f(*r[0], *r[1], *r[2]), LVecBase3f(*vp.pos)))
        self._lens.setFocalLength((self.W / 2) / math.tan(math.radians(vp.fov_deg) / 2))
        m = LMatrix4f(self._scratch.getMat())
        m.invertInPlace()
        return mat_np(m * self._lens.getProjectionMat())

    def _set_view_matrices(self, view: str, vp_prev: Any, vp_next: Any) -> None:
        from panda3d.core import RenderState, ShaderAttrib

        attr = ShaderAttrib.make().setShaderInput("vp_prev", vp_prev).setShaderInput(
            "vp_next", vp_next)
        self.cams[view].node().setInitialState(RenderState.make(attr))

    def prepare(self, now: Any, prev: Any, nxt: Any, place_camera: Any,
                props: tuple[Any, Any, Any] | None, bake: tuple | None) -> None:
        """Place the pass for one frame: ``now`` / ``prev`` / ``nxt`` are the exact
        SamplePoses of this, the previous and the next frame (``now`` where there is none),
        ``props`` the (prev, now, next) prop transforms, ``bake`` the character's
        (now, prev, next) read-backs."""
        for view in VIEWS:
            place_camera(self.cams[view], now.views[view], (0.0, 0.0))
            if self.want_flow:
                self._set_view_matrices(view, mat_panda(self._view_proj(prev.views[view])),
                                        mat_panda(self._view_proj(nxt.views[view])))
        if props is not None:
            from panda3d.core import LQuaternionf

            for k, pivot in enumerate(self.pivots):
                mats = []
                for pos, q in (props[0][k], props[1][k], props[2][k]):
                    pivot.setPosQuat(self.root, pos, LQuaternionf(*q))
                    mats.append(mat_np(pivot.getMat(self.root)))
                # now placed; world(t) -> world(t±1) = inverse(now) then other (row vectors)
                inv_now = np.linalg.inv(mats[1])
                pivot.setShaderInput("delta_prev", mat_panda(inv_now @ mats[0]))
                pivot.setShaderInput("delta_next", mat_panda(inv_now @ mats[2]))
        if bake is not None and self.character is not None:
            self.character.update(*bake)

    def read(self) -> dict[str, dict[str, np.ndarray]]:
        """This frame's planes per view (copied out of the textures' RAM images):
        ``plane`` (H, W, 4) float32 for depth / normal / flow, rows top-down, RGBA order."""
        out: dict[str, dict[str, np.ndarray]] = {v: {} for v in VIEWS}
        for name, tex in self.texs.items():
            a = np.frombuffer(memoryview(tex.getRamImage()), np.float32)
            if a.size != self.W * len(VIEWS) * self.H * 4:
                raise RuntimeError(f"render: ground-truth plane {name} read back {a.size} "
                                   "floats")
            a = a.reshape(self.H, self.W * len(VIEWS), 4)[::-1]
            for i, view in enumerate(VIEWS):
                # RAM images are BGRA: back to the shader's RGBA order
                out[view][name] = a[:, i * self.W:(i + 1) * self.W, [2, 1, 0, 3]]
        return out

    def close(self) -> None:
        self.root.removeNode()


def _ancestors(np_: Any) -> list[Any]:
    out = []
    p = np_.getParent()
    while not p.isEmpty():
        out.append(p)
        p = p.getParent()
    return out


def _index_path(root: Any, node: Any) -> list[int]:
    """``node``'s child indices below ``root`` (names need not be unique)."""
    idx = []
    n = node
    while n != root and not n.isEmpty():
        parent = n.getParent()
        idx.append(next(i for i in range(parent.getNumChildren()) if parent.getChild(i) == n))
        n = parent
    return idx[::-1]


def _follow(root: Any, idx: list[int]) -> Any:
    n = root
    for i in idx:
        n = n.getChild(i)
    return n


def _name_path(root: Any, node: Any) -> str:
    """``node``'s names below ``root``, joined by "/" (the id table's ``name``)."""
    names = []
    n = node
    while n != root and not n.isEmpty():
        names.append(n.getName())
        n = n.getParent()
    return "/".join(reversed(names))
