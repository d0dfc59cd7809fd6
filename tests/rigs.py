"""Skinned glTF rigs with the quirks real exporters leave in, built for tests (numpy here, never in
stages/): Blender's / Mixamo's armature root at +90 deg about X with a 0.01 scale (joints in
centimetres, the mesh's POSITION already the metre bind pose), T-pose and A-pose bipeds, joint
names in the Mixamo, Unreal, Godot/Unity and nameless conventions, a four-legged rig with a tail,
clips with and without root motion, and skeleton-only clip files (Mixamo "without skin").

These are inputs we make ourselves: the real files in tests/data/real_assets/ are the other half
of the evidence. No real Blender/Mixamo export with the rotated, scaled armature could be had
on this machine (only PyPI, npm and Debian are reachable; none of their packages we found ships
one), so the quirk is reproduced here from FACTS.md's description of those files.
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

import numpy as np

# T-pose biped, metres, glTF frame (Y up), facing +Z, its left at +X
BIPED = {
    "Hips": (None, (0.0, 0.95, 0.0)),
    "Spine": ("Hips", (0.0, 1.15, 0.0)),
    "Chest": ("Spine", (0.0, 1.35, 0.0)),
    "Neck": ("Chest", (0.0, 1.55, 0.0)),
    "Head": ("Neck", (0.0, 1.65, 0.02)),
    "HeadTop_End": ("Head", (0.0, 1.80, 0.02)),
    "LeftUpLeg": ("Hips", (0.1, 0.92, 0.0)),
    "LeftLeg": ("LeftUpLeg", (0.1, 0.5, 0.0)),
    "LeftFoot": ("LeftLeg", (0.1, 0.08, 0.0)),
    "LeftToeBase": ("LeftFoot", (0.1, 0.02, 0.12)),
    "LeftToe_End": ("LeftToeBase", (0.1, 0.0, 0.2)),
    "RightUpLeg": ("Hips", (-0.1, 0.92, 0.0)),
    "RightLeg": ("RightUpLeg", (-0.1, 0.5, 0.0)),
    "RightFoot": ("RightLeg", (-0.1, 0.08, 0.0)),
    "RightToeBase": ("RightFoot", (-0.1, 0.02, 0.12)),
    "RightToe_End": ("RightToeBase", (-0.1, 0.0, 0.2)),
    "LeftShoulder": ("Chest", (0.08, 1.45, 0.0)),
    "LeftArm": ("LeftShoulder", (0.18, 1.45, 0.0)),
    "LeftForeArm": ("LeftArm", (0.45, 1.45, 0.0)),
    "LeftHand": ("LeftForeArm", (0.72, 1.45, 0.0)),
    "LeftHandEnd": ("LeftHand", (0.88, 1.45, 0.0)),
    "RightShoulder": ("Chest", (-0.08, 1.45, 0.0)),
    "RightArm": ("RightShoulder", (-0.18, 1.45, 0.0)),
    "RightForeArm": ("RightArm", (-0.45, 1.45, 0.0)),
    "RightHand": ("RightForeArm", (-0.72, 1.45, 0.0)),
    "RightHandEnd": ("RightHand", (-0.88, 1.45, 0.0)),
}
UNREAL_NAMES = {"Hips": "pelvis", "Spine": "spine_01", "Chest": "spine_02", "Neck": "neck_01",
                "Head": "head", "HeadTop_End": "head_end", "LeftUpLeg": "thigh_l",
                "LeftLeg": "calf_l", "LeftFoot": "foot_l", "LeftToeBase": "ball_l",
                "LeftToe_End": "ball_l_end", "LeftShoulder": "clavicle_l",
                "LeftArm": "upperarm_l", "LeftForeArm": "lowerarm_l", "LeftHand": "hand_l",
                "LeftHandEnd": "hand_l_end"}
UNREAL_NAMES.update({k.replace("Left", "Right"): v.replace("_l", "_r")
                     for k, v in UNREAL_NAMES.items() if k.startswith("Left")})

# a fox-like quadruped, 0.7 m long, glTF frame, facing +Z
QUADRUPED = {
    "b_Root": (None, (0.0, 0.0, 0.0)),
    "b_Hip": ("b_Root", (0.0, 0.45, -0.25)),
    "b_Spine01": ("b_Hip", (0.0, 0.47, 0.0)),
    "b_Spine02": ("b_Spine01", (0.0, 0.48, 0.2)),
    "b_Neck": ("b_Spine02", (0.0, 0.55, 0.3)),
    "b_Head": ("b_Neck", (0.0, 0.62, 0.38)),
    "b_HeadEnd": ("b_Head", (0.0, 0.6, 0.5)),
    "b_Tail01": ("b_Hip", (0.0, 0.45, -0.35)),
    "b_Tail02": ("b_Tail01", (0.0, 0.4, -0.6)),
    "b_LeftUpperArm": ("b_Spine02", (0.08, 0.4, 0.2)),
    "b_LeftForeArm": ("b_LeftUpperArm", (0.08, 0.2, 0.2)),
    "b_LeftHand": ("b_LeftForeArm", (0.08, 0.02, 0.22)),
    "b_RightUpperArm": ("b_Spine02", (-0.08, 0.4, 0.2)),
    "b_RightForeArm": ("b_RightUpperArm", (-0.08, 0.2, 0.2)),
    "b_RightHand": ("b_RightForeArm", (-0.08, 0.02, 0.22)),
    "b_LeftLeg01": ("b_Hip", (0.08, 0.4, -0.25)),
    "b_LeftLeg02": ("b_LeftLeg01", (0.08, 0.2, -0.27)),
    "b_LeftFoot": ("b_LeftLeg02", (0.08, 0.02, -0.22)),
    "b_RightLeg01": ("b_Hip", (-0.08, 0.4, -0.25)),
    "b_RightLeg02": ("b_RightLeg01", (-0.08, 0.2, -0.27)),
    "b_RightFoot": ("b_RightLeg02", (-0.08, 0.02, -0.22)),
}


def a_pose(skel: dict) -> dict:
    """The T-pose biped with its arms 45 deg down (an A-pose)."""
    out = dict(skel)
    for side in ("Left", "Right"):
        sx, sy, sz = skel[f"{side}Arm"][1]
        for j in ("ForeArm", "Hand", "HandEnd"):
            parent, (x, y, z) = skel[f"{side}{j}"]
            d = abs(x - sx)
            out[f"{side}{j}"] = (parent, (sx + math.copysign(d / math.sqrt(2), sx),
                                          sy - d / math.sqrt(2), z))
    return out


def _rot_x(deg: float) -> np.ndarray:
    c, s = math.cos(math.radians(deg)), math.sin(math.radians(deg))
    return np.array([[1, 0, 0], [0, c, -s], [0, s, c]])


def _rot_y(deg: float) -> np.ndarray:
    c, s = math.cos(math.radians(deg)), math.sin(math.radians(deg))
    return np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]])


def _quat(m: np.ndarray) -> list[float]:
    """(x, y, z, w) of a rotation matrix."""
    w = math.sqrt(max(0.0, 1 + m[0, 0] + m[1, 1] + m[2, 2])) / 2
    if w > 1e-6:
        return [(m[2, 1] - m[1, 2]) / (4 * w), (m[0, 2] - m[2, 0]) / (4 * w),
                (m[1, 0] - m[0, 1]) / (4 * w), w]
    x = math.sqrt(max(0.0, 1 + m[0, 0] - m[1, 1] - m[2, 2])) / 2
    return [x, (m[0, 1] + m[1, 0]) / (4 * x), (m[0, 2] + m[2, 0]) / (4 * x),
            (m[2, 1] - m[1, 2]) / (4 * x)]


def _box(a, b, r: float) -> tuple[list, list]:
    """A box of half-width ``r`` around segment a-b (8 vertices, 12 triangles)."""
    lo = np.minimum(a, b) - r
    hi = np.maximum(a, b) + r
    v = [(x, y, z) for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])]
    f = [(0, 1, 3), (0, 3, 2), (4, 6, 7), (4, 7, 5), (0, 4, 5), (0, 5, 1), (2, 3, 7), (2, 7, 6),
         (0, 2, 6), (0, 6, 4), (1, 5, 7), (1, 7, 3)]
    return v, f


class _Glb:
    def __init__(self) -> None:
        self.bin = bytearray()
        self.doc: dict = {"asset": {"version": "2.0", "generator": "wmforge tests/rigs.py"},
                          "bufferViews": [], "accessors": []}

    def acc(self, arr: np.ndarray, ctype: int, typ: str, minmax: bool = False) -> int:
        fmt = {5126: np.float32, 5125: np.uint32, 5123: np.uint16, 5121: np.uint8}[ctype]
        data = np.ascontiguousarray(arr, dtype=fmt).tobytes()
        while len(self.bin) % 4:
            self.bin.append(0)
        self.doc["bufferViews"].append({"buffer": 0, "byteOffset": len(self.bin),
                                        "byteLength": len(data)})
        self.bin.extend(data)
        a = {"bufferView": len(self.doc["bufferViews"]) - 1, "componentType": ctype,
             "count": int(arr.shape[0]), "type": typ}
        if minmax:
            a["min"] = [float(x) for x in arr.min(axis=0)]
            a["max"] = [float(x) for x in arr.max(axis=0)]
        self.doc["accessors"].append(a)
        return len(self.doc["accessors"]) - 1

    def write(self, path: Path) -> Path:
        while len(self.bin) % 4:
            self.bin.append(0)
        self.doc["buffers"] = [{"byteLength": len(self.bin)}]
        js = json.dumps(self.doc).encode()
        js += b" " * (-len(js) % 4)
        out = struct.pack("<4sII", b"glTF", 2, 12 + 8 + len(js) + 8 + len(self.bin))
        out += struct.pack("<I4s", len(js), b"JSON") + js
        out += struct.pack("<I4s", len(self.bin), b"BIN\x00") + bytes(self.bin)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(out)
        return path


def write_rig(path: Path, skel: dict | None = None, names: dict | None = None,
              prefix: str = "", armature_quirk: bool = True, facing_yaw_deg: float = 0.0,
              clips: dict | None = None, mesh: bool = True, scale: float = 1.0,
              hat_m: float = 0.0) -> Path:
    """A GLB of ``skel`` (default: the T-pose biped). ``names`` renames joints (prefix
    'mixamorig:' etc.); ``armature_quirk`` puts the joints under an 'Armature' node at +90 deg
    about X with scale 0.01 (joints in cm), the mesh node beside them under it, as Blender's
    exporter writes Mixamo rigs; ``facing_yaw_deg`` turns the character about the up axis
    (0: faces +Z, the glTF convention); ``clips`` maps clip name → root travel (x, y, z) in
    metres over one second (glTF frame, before the turn); ``mesh=False`` writes a
    skeleton-only clip file; ``scale`` multiplies every length (cm models: 100); ``hat_m``
    > 0 adds an unskinned mesh (a hat that tall) parented under the head-top joint, its
    vertices in that joint's frame (cm, rotated, as the armature leaves it)."""
    skel = skel or BIPED
    names = names or {}
    turn = _rot_y(facing_yaw_deg)
    order = list(skel)
    idx = {j: i for i, j in enumerate(order)}
    pos = {j: turn @ np.array(p) * scale for j, (_, p) in skel.items()}
    g = _Glb()
    arm_lin = _rot_x(90.0) * 0.01 if armature_quirk else np.eye(3)
    nodes: list[dict] = []
    base = 1 if armature_quirk else 0
    if armature_quirk:
        nodes.append({"name": "Armature", "rotation": [math.sqrt(0.5), 0, 0, math.sqrt(0.5)],
                      "scale": [0.01, 0.01, 0.01], "children": []})
    inv_lin = np.linalg.inv(arm_lin)
    for j in order:
        parent = skel[j][0]
        origin = pos[parent] if parent else np.zeros(3)
        local_t = inv_lin @ (pos[j] - origin)
        nodes.append({"name": prefix + names.get(j, j),
                      "translation": [float(x) for x in local_t]})
    for j in order:
        parent = skel[j][0]
        if parent:
            nodes[base + idx[parent]].setdefault("children", []).append(base + idx[j])
    roots = [base + idx[j] for j in order if skel[j][0] is None]
    if armature_quirk:
        nodes[0]["children"] = roots
        scene_roots = [0]
    else:
        scene_roots = roots
    if mesh:
        verts, faces, joints = [], [], []
        for j in order:
            parent = skel[j][0]
            if parent is None:
                continue
            r = 0.07 * scale if "Head" in j else 0.04 * scale
            v, f = _box(pos[parent], pos[j], r)
            faces.extend(tuple(k + len(verts) for k in tri) for tri in f)
            verts.extend(v)
            joints.extend([idx[parent]] * len(v))
        va = np.array(verts, dtype=np.float32)
        ja = np.zeros((len(verts), 4), dtype=np.uint16)
        ja[:, 0] = joints
        wa = np.zeros((len(verts), 4), dtype=np.float32)
        wa[:, 0] = 1.0
        ia = np.array(faces, dtype=np.uint16).reshape(-1)
        prim = {"attributes": {"POSITION": g.acc(va, 5126, "VEC3", True),
                               "JOINTS_0": g.acc(ja, 5123, "VEC4"),
                               "WEIGHTS_0": g.acc(wa, 5126, "VEC4")},
                "indices": g.acc(ia, 5123, "SCALAR")}
        g.doc["meshes"] = [{"name": "Body", "primitives": [prim]}]
        # world matrices of the joints: the armature's linear part, at each joint's position
        ibm = []
        for j in order:
            w = np.eye(4)
            w[:3, :3] = arm_lin
            w[:3, 3] = pos[j]
            ibm.append(np.linalg.inv(w).T.reshape(-1))  # column-major
        ibm_acc = g.acc(np.array(ibm), 5126, "MAT4")
        mesh_node = len(nodes)
        nodes.append({"name": "Body", "mesh": 0, "skin": 0})
        g.doc["skins"] = [{"inverseBindMatrices": ibm_acc,
                           "joints": [base + idx[j] for j in order]}]
        if armature_quirk:
            nodes[0]["children"].append(mesh_node)
        else:
            scene_roots.append(mesh_node)
    if hat_m > 0:
        top = next(j for j in order if j.startswith("HeadTop"))
        w = np.eye(4)
        w[:3, :3] = arm_lin
        w[:3, 3] = pos[top]
        inv = np.linalg.inv(w)
        v, f = _box(pos[top] + np.array([0, hat_m / 2, 0]), pos[top] + np.array([0, hat_m / 2, 0]),
                    hat_m / 2)
        local = np.array([(inv @ np.array([*q, 1.0]))[:3] for q in v], dtype=np.float32)
        prim = {"attributes": {"POSITION": g.acc(local, 5126, "VEC3", True)},
                "indices": g.acc(np.array(f, dtype=np.uint16).reshape(-1), 5123, "SCALAR")}
        g.doc.setdefault("meshes", []).append({"name": "Hat", "primitives": [prim]})
        nodes.append({"name": "Hat", "mesh": len(g.doc["meshes"]) - 1})
        nodes[base + idx[top]].setdefault("children", []).append(len(nodes) - 1)
    root_joint = next(j for j in order if skel[j][0] is None)
    anims = []
    for name, travel in (clips or {}).items():
        t = g.acc(np.array([[0.0], [0.5], [1.0]]), 5126, "SCALAR", True)
        start = pos[root_joint]
        d = turn @ np.array(travel) * scale
        keys = np.array([inv_lin @ (start + d * u) for u in (0.0, 0.5, 1.0)])
        keys[1] += inv_lin @ np.array([0.0, 0.02 * scale, 0.0])  # a bob
        out = g.acc(keys, 5126, "VEC3")
        anims.append({"name": name, "samplers": [{"input": t, "output": out}],
                      "channels": [{"sampler": 0, "target": {"node": base + idx[root_joint],
                                                             "path": "translation"}}]})
    if anims:
        g.doc["animations"] = anims
    g.doc["nodes"] = nodes
    g.doc["scenes"] = [{"nodes": scene_roots}]
    g.doc["scene"] = 0
    return g.write(path)


def write_level(path: Path, boxes: list[tuple[tuple, tuple]], images: list[dict] | None = None,
                extensions_used: list[str] | None = None, textures: list[dict] | None = None
                ) -> Path:
    """A static GLB level: one mesh node per box ((min xyz), (max xyz), glTF frame, metres);
    ``images``/``textures``/``extensions_used`` are written as given (Godot's
    EXT_texture_webp, percent-escaped URIs)."""
    g = _Glb()
    nodes, meshes = [], []
    for k, (lo, hi) in enumerate(boxes):
        v, f = _box(np.array(lo, dtype=float), np.array(hi, dtype=float), 0.0)
        prim = {"attributes": {"POSITION": g.acc(np.array(v, dtype=np.float32), 5126, "VEC3",
                                                 True)},
                "indices": g.acc(np.array(f, dtype=np.uint16).reshape(-1), 5123, "SCALAR")}
        meshes.append({"primitives": [prim]})
        nodes.append({"name": f"Box{k}", "mesh": k})
    g.doc.update(nodes=nodes, meshes=meshes, scenes=[{"nodes": list(range(len(nodes)))}],
                 scene=0)
    if images:
        g.doc["images"] = images
    if textures:
        g.doc["textures"] = textures
    if extensions_used:
        g.doc["extensionsUsed"] = extensions_used
    return g.write(path)


def with_json(path: Path, edit) -> Path:
    """Rewrite a GLB's JSON chunk through ``edit(doc)`` (a broken reference, a missing key)."""
    data = path.read_bytes()
    jlen = struct.unpack_from("<I", data, 12)[0]
    doc = json.loads(data[20:20 + jlen])
    binchunk = data[20 + jlen:]
    edit(doc)
    js = json.dumps(doc).encode()
    js += b" " * (-len(js) % 4)
    out = struct.pack("<4sII", b"glTF", 2, 12 + 8 + len(js) + len(binchunk))
    out += struct.pack("<I4s", len(js), b"JSON") + js + binchunk
    path.write_bytes(out)
    return path


def _sided(table: dict[str, str], left: str, right: str) -> dict[str, str]:
    out = {}
    for k, v in table.items():
        if "{s}" in v:
            out[f"Left{k}"] = v.format(s=left)
            out[f"Right{k}"] = v.format(s=right)
        else:
            out[k] = v
    return out


# the biped's joints in other naming conventions (keys: BIPED's Mixamo names)
CONVENTIONS = {
    "godot_unity": _sided({"Hips": "Hips", "Spine": "Spine", "Chest": "Chest", "Neck": "Neck",
                           "Head": "Head", "HeadTop_End": "HeadTop", "UpLeg": "{s}UpperLeg",
                           "Leg": "{s}LowerLeg", "Foot": "{s}Foot", "ToeBase": "{s}Toes",
                           "Toe_End": "{s}ToesEnd", "Shoulder": "{s}Shoulder",
                           "Arm": "{s}UpperArm", "ForeArm": "{s}LowerArm", "Hand": "{s}Hand",
                           "HandEnd": "{s}HandEnd"}, "Left", "Right"),
    "rigify": _sided({"Hips": "DEF-spine", "Spine": "DEF-spine.001", "Chest": "DEF-spine.003",
                      "Neck": "DEF-spine.004", "Head": "DEF-spine.006",
                      "HeadTop_End": "DEF-spine.006_end", "UpLeg": "DEF-thigh.{s}",
                      "Leg": "DEF-shin.{s}", "Foot": "DEF-foot.{s}", "ToeBase": "DEF-toe.{s}",
                      "Toe_End": "DEF-toe_end.{s}", "Shoulder": "DEF-shoulder.{s}",
                      "Arm": "DEF-upper_arm.{s}", "ForeArm": "DEF-forearm.{s}",
                      "Hand": "DEF-hand.{s}", "HandEnd": "DEF-hand_end.{s}"}, "L", "R"),
    "3dsmax_biped": _sided({"Hips": "Bip01 Pelvis", "Spine": "Bip01 Spine",
                            "Chest": "Bip01 Spine1", "Neck": "Bip01 Neck", "Head": "Bip01 Head",
                            "HeadTop_End": "Bip01 HeadNub", "UpLeg": "Bip01 {s} Thigh",
                            "Leg": "Bip01 {s} Calf", "Foot": "Bip01 {s} Foot",
                            "ToeBase": "Bip01 {s} Toe0", "Toe_End": "Bip01 {s} Toe0Nub",
                            "Shoulder": "Bip01 {s} Clavicle", "Arm": "Bip01 {s} UpperArm",
                            "ForeArm": "Bip01 {s} Forearm", "Hand": "Bip01 {s} Hand",
                            "HandEnd": "Bip01 {s} Finger0"}, "L", "R"),
    "unreal": UNREAL_NAMES,
}
