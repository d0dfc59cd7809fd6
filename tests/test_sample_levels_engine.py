"""The generated levels and characters load in the real engine (Panda3D + panda3d-gltf)."""

import subprocess
import sys
import textwrap


def test_levels_load_in_panda3d(sample_library):
    script = textwrap.dedent(f"""
        import json, sys
        from pathlib import Path
        from panda3d.core import loadPrcFileData, Filename
        loadPrcFileData("", "window-type none\\naudio-library-name null\\nmodel-cache-dir\\n")
        from direct.showbase.ShowBase import ShowBase
        base = ShowBase()
        root = Path({str(sample_library)!r})
        out = {{}}
        for f in sorted(root.rglob("*.glb")) + sorted(root.rglob("*.egg.pz")):
            if f.parent.name == "Maps" and f.name == "Ruins.glb":
                continue  # the deliberately corrupt file
            m = base.loader.loadModel(Filename.fromOsSpecific(str(f)), noCache=True)
            b = m.getTightBounds()  # None for geometry-free files (clips, lighting sub-level)
            names = [n.getName() for n in m.findAllMatches("**")]
            parts = [ch.node().getBundle(0) for ch in m.findAllMatches("**/+Character")]
            while parts:  # skinned models: the joints are parts of the character's bundle
                part = parts.pop()
                names.append(part.getName())
                parts += [part.getChild(i) for i in range(part.getNumChildren())]
            size = [b[1][i] - b[0][i] for i in range(3)] if b else None
            out[f.name] = {{"size": size, "names": names}}
        print(json.dumps(out))
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    loaded = __import__("json").loads(r.stdout.strip().splitlines()[-1])
    for level in ("AlpineMeadow", "Downtown", "Apartment", "Outpost", "Courtyard", "Canyon"):
        info = loaded[f"{level}.glb"]
        assert min(info["size"][:2]) >= 40, (level, info["size"])  # Z up after loading
        assert info["size"][2] < max(info["size"][:2])
    outpost = loaded["Outpost.glb"]["names"]
    assert {"Ramp_20deg", "Ramp_55deg_steep", "Stairs_0p2"} <= set(outpost)
    alex = loaded["Alex.glb"]
    assert 1.7 < alex["size"][2] < 1.95 and {"thigh_l", "upper_arm_r", "head"} <= set(alex["names"])
    assert loaded["Bat.glb"]["size"][2] < 0.1
