"""The sample humanoids are people: one skinned mesh (head, torso, arms, legs) with smooth
weights and inverse bind matrices, clips for walking, running, idling, strafing and walking
back whose stance foot stays planted at the character's walk speed, posed by Stage II's
GltfPoser through panda3d-gltf."""

import json
import math
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from stages.core.actions import DIRECTIONS
from stages.core.gltf import read_accessor, read_gltf
from stages.engine.clips import read_gltf_clips

CHARS = "CharacterPack/Content/Characters"
HUMANS = ("Alex", "Bea", "Cole")


def _accessor(doc: dict, binary: bytes, i: int) -> np.ndarray:
    """(count, components) array of an accessor, as stored."""
    return np.array(read_accessor(doc, binary, i))


def _quat(q):  # (w, x, y, z) → 3x3
    w, x, y, z = q
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def _world(doc: dict, values: dict) -> dict[str, np.ndarray]:
    """Z-up world matrices of every node: rest TRS from the file, overridden by ``values``
    {(node name, path): Z-up value as GltfPoser receives it}."""
    nodes = doc["nodes"]
    parent = {c: i for i, n in enumerate(nodes) for c in n.get("children", [])}
    out: dict[int, np.ndarray] = {}

    def get(i: int) -> np.ndarray:
        if i not in out:
            n = nodes[i]
            t = n.get("translation", [0, 0, 0])
            r = n.get("rotation", [0, 0, 0, 1])
            tr = np.array(values.get((n["name"], "translation"), (t[0], -t[2], t[1])))
            rot = _quat(values.get((n["name"], "rotation"), (r[3], r[0], -r[2], r[1])))
            m = np.eye(4)
            m[:3, :3], m[:3, 3] = rot, tr
            out[i] = get(parent[i]) @ m if i in parent else m
        return out[i]

    return {n["name"]: get(i) for i, n in enumerate(nodes)}


def _pose(doc, clip, t):
    tt = math.fmod(t, clip.duration)
    return _world(doc, {(c.node, c.path): c.sample(tt) for c in clip.channels})


def _load(lib: Path, name: str):
    path = lib / CHARS / name / f"{name}.glb"
    doc, binary = read_gltf(path)
    manifest = json.loads((path.parent / "character.json").read_text())
    return path, doc, binary, manifest


@pytest.mark.parametrize("name", HUMANS)
def test_humanoid_is_one_skinned_mesh_with_smooth_weights(sample_library, name):
    _, doc, binary, _ = _load(sample_library, name)
    skinned = [n for n in doc["nodes"] if "skin" in n]
    assert len(doc["meshes"]) == 1 and len(skinned) == 1 and len(doc["skins"]) == 1
    skin = doc["skins"][0]
    joint_names = [doc["nodes"][j]["name"] for j in skin["joints"]]
    for part in ("head", "chest", "hips", "upper_arm_l", "forearm_r", "hand_l", "thigh_r",
                 "shin_l", "foot_r"):
        assert part in joint_names
    # inverse bind matrices undo each joint's bind (rest) world transform
    rest = _world(doc, {})
    c = np.array([[1.0, 0, 0, 0], [0, 0, 1, 0], [0, -1, 0, 0], [0, 0, 0, 1]])  # Z up → Y up
    ibm = np.array(_accessor(doc, binary, skin["inverseBindMatrices"])).reshape(-1, 4, 4)
    for k, j in enumerate(joint_names):
        bind_y_up = c @ rest[j] @ c.T
        assert np.allclose(ibm[k].T @ bind_y_up, np.eye(4), atol=1e-5), j
    index = {j: k for k, j in enumerate(joint_names)}
    blends: set[tuple[str, str]] = set()
    lo, hi = np.full(3, np.inf), np.full(3, -np.inf)
    for prim in doc["meshes"][0]["primitives"]:
        a = prim["attributes"]
        joints = np.array(_accessor(doc, binary, a["JOINTS_0"]))
        weights = np.array(_accessor(doc, binary, a["WEIGHTS_0"]))
        pos = np.array(_accessor(doc, binary, a["POSITION"]))
        lo, hi = np.minimum(lo, pos.min(0)), np.maximum(hi, pos.max(0))
        assert np.allclose(weights.sum(1), 1.0, atol=1e-5)
        mixed = (weights[:, 0] > 0.2) & (weights[:, 1] > 0.2)
        blends |= {(joint_names[a_], joint_names[b_]) for a_, b_ in joints[mixed, :2]}
    for pair in (("thigh_l", "shin_l"), ("upper_arm_r", "forearm_r"), ("hips", "thigh_r"),
                 ("chest", "upper_arm_l"), ("spine", "hips"), ("chest", "spine"),
                 ("neck", "chest"), ("shin_r", "foot_r"), ("forearm_l", "hand_l")):
        assert pair in blends, f"{name}: no vertex blends {pair} (weights are not smooth)"
    assert len(index) == len(joint_names)
    height = {"Alex": 1.8, "Bea": 1.62, "Cole": 1.95}[name]
    assert abs((hi[1] - lo[1]) - height) < 0.05  # glTF Y is up


@pytest.mark.parametrize("name", HUMANS)
def test_stance_foot_stays_planted_at_walk_speed(sample_library, name):
    """Over two cycles of every locomotion clip, with the root moving at the character's walk
    speed in its action's direction (run: at the speed its clip declares), each foot joint's
    world position stands still while it is down; the same foot plants one cycle's travel
    (walk speed x cycle) further on and the other foot half a cycle after it (a step of walk
    speed x half the cycle)."""
    path, doc, _, manifest = _load(sample_library, name)
    clips = read_gltf_clips(path)
    speed = manifest["walk_speed"]
    cases = [(clip, DIRECTIONS[a], speed) for a, clip in manifest["animations"].items()]
    run = next(a for a in doc["animations"] if a["name"] == "run")
    vel = run["extras"]["wmforge"]["root_velocity_mps"]
    cases.append(("run", (vel[0] / math.hypot(*vel), vel[1] / math.hypot(*vel)),
                  math.hypot(*vel)))
    # Bea and Cole lack some clips on purpose: the animation fallback chain is tested on them
    want = {"Alex": {"walk", "run", "idle", "strafe_left", "strafe_right", "walk_back",
                     "walk_left", "walk_right", "walk_back_left", "walk_back_right"},
            "Bea": {"walk", "run", "idle", "walk_back"},
            "Cole": {"walk", "run", "idle"}}[name]
    assert want <= set(clips)
    if name == "Alex":  # every one of the nine actions has its own clip
        assert set(manifest["animations"]) == set(DIRECTIONS)
    for clip_name, d, v in cases:
        clip = clips[clip_name]
        cycle = clip.duration
        per_cycle = 120
        ts = np.linspace(0.0, 3 * cycle, 3 * per_cycle + 1)
        vel3 = np.array([d[0], d[1], 0.0]) * v
        poses = [_pose(doc, clip, t) for t in ts]
        starts = {}
        for foot in ("foot_l", "foot_r"):
            pos = np.array([p[foot][:3, 3] + vel3 * t for p, t in zip(poses, ts, strict=True)])
            down = pos[:, 2] < pos[:, 2].min() + 0.003
            edges = np.flatnonzero(np.diff(down.astype(int)))
            runs = np.split(np.arange(len(ts)), edges + 1)
            runs = [r for r in runs if down[r[0]]]
            if clip_name == "idle":
                assert np.ptp(pos, axis=0).max() < 1e-3, (name, clip_name, foot)
                continue
            whole = [r for r in runs if r[0] > 0 and r[-1] < len(ts) - 1]
            assert len(whole) >= 2, (name, clip_name, foot)
            for r in whole:
                spread = np.ptp(pos[r, :2], axis=0).max()
                assert spread < 0.005, (name, clip_name, foot, spread)
                assert len(r) / per_cycle > 0.25  # down for a real share of the cycle
            # stride: the same foot's consecutive plants are one cycle's travel apart
            for a, b in zip(whole, whole[1:], strict=False):
                gap = pos[b].mean(0)[:2] - pos[a].mean(0)[:2]
                assert np.abs(gap - vel3[:2] * cycle).max() < 0.01, (name, clip_name, gap)
            starts[foot] = ts[whole[0][0]]
        if clip_name != "idle":
            # step: the other foot plants half a cycle later (half the stride: v x T / 2)
            lag = (starts["foot_r"] - starts["foot_l"]) % cycle
            assert abs(lag - cycle / 2) < 2 * cycle / per_cycle, (name, clip_name, lag, cycle)


def test_skinned_humanoid_poses_through_gltf_poser(sample_library):
    """Loaded as Stage II loads it (panda3d-gltf), posed by GltfPoser: the drawn (skinned)
    vertices move with the clip, the left sole stands still in the world while down (root at
    walk speed), and posing is deterministic."""
    script = textwrap.dedent(f"""
        import json, math
        import numpy as np
        from pathlib import Path
        from panda3d.core import loadPrcFileData
        loadPrcFileData("", "window-type none\\naudio-library-name null\\nmodel-cache-dir\\n")
        from stages.engine.clips import GltfPoser, read_gltf_clips
        from stages.engine.models import load_model
        path = Path({str(sample_library)!r}) / {CHARS!r} / "Alex" / "Alex.glb"
        clips = read_gltf_clips(path)
        a, b = load_model(str(path)), load_model(str(path))
        pa, pb = GltfPoser(a, clips), GltfPoser(b, clips)

        def drawn(m):
            out = []
            for gn in m.findAllMatches("**/+GeomNode"):
                for g in gn.node().getGeoms():
                    vd = g.getVertexData()
                    arr = np.frombuffer(vd.getArray(0).getHandle().getData(), np.float32)
                    out.append((vd.getTransformBlendTable() is not None,
                                arr.reshape(vd.getNumRows(), -1)[:, :3].astype(float)))
            return out

        rest = drawn(a)
        soles = [np.flatnonzero((r[:, 2] < 0.005) & (r[:, 1] > 0)) for _, r in rest]
        T = clips["walk"].duration
        res = {{"joints": len(pa.nodes), "blended": any(bl for bl, _ in rest), "sole": [],
                "same": True, "moved": 0.0}}
        for k in range(97):
            t = 2 * T * k / 96
            pa.pose("walk", t)
            pb.pose("walk", t)
            va, vb = drawn(a), drawn(b)
            res["same"] &= all(np.array_equal(x, y) for (_, x), (_, y) in zip(va, vb))
            s = np.concatenate([v[i] for (_, v), i in zip(va, soles)])
            res["sole"].append((s.mean(0) + np.array([1.6 * t, 0.0, 0.0])).tolist())
            res["moved"] = max(res["moved"], max(float(np.abs(v - r).max())
                                                 for (_, v), (_, r) in zip(va, rest)))
        print(json.dumps(res))
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res["joints"] >= 15  # every animated joint found and controlled
    assert not res["blended"]  # skinned by wmforge in a fixed order, not by Panda3D
    assert res["same"]
    assert res["moved"] > 0.2  # the pose is not the bind pose
    sole = np.array(res["sole"])
    down = sole[:, 2] < sole[:, 2].min() + 0.004
    edges = np.flatnonzero(np.diff(down.astype(int)))
    runs = [r for r in np.split(np.arange(len(sole)), edges + 1)
            if down[r[0]] and r[0] > 0 and r[-1] < len(sole) - 1]
    assert runs
    for run in runs:
        assert len(run) >= 10
        assert np.ptp(sole[run, :2], axis=0).max() < 0.01, sole[run].tolist()
