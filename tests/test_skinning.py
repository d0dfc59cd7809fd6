"""Egg characters are skinned by wmforge in a fixed joint order (stages/engine/fixed_order_skin.py,
called by the posers of stages/engine/clips.py): the result must be Panda3D's own skinning, to
float32 rounding, and Panda3D must no longer skin the drawn geometry itself (its order follows
the heap: renders differed between processes)."""

import json
import subprocess
import sys
import textwrap


def test_fixed_order_skinning_reproduces_panda3d_skinning(sample_library):
    script = textwrap.dedent(f"""
        import json, sys
        import numpy as np
        from pathlib import Path
        from panda3d.core import (Filename, Loader, LoaderOptions, NodePath, Thread,
                                  loadPrcFileData)
        loadPrcFileData("", "window-type none\\naudio-library-name null\\nmodel-cache-dir\\n")
        import stages.engine.clips as clips
        d = next(Path({str(sample_library)!r}).rglob("panda-model.egg.pz")).parent
        model = NodePath(Loader.getGlobalPtr().loadSync(
            Filename.fromOsSpecific(str(d / "panda-model.egg.pz")),
            LoaderOptions(LoaderOptions.LF_no_cache)))
        anims = {{"walk": str(d / "panda-walk4.egg.pz")}}
        ref, ours = model.copyTo(NodePath("a")), model.copyTo(NodePath("b"))
        keep = clips.skinned_geoms
        clips.skinned_geoms = lambda m: []
        pr = clips.EggPoser(ref, anims)  # Panda3D's own skinning
        clips.skinned_geoms = keep
        po = clips.EggPoser(ours, anims)

        def drawn(c):
            out = []
            for gn in c.findAllMatches("**/+GeomNode"):
                for g in gn.node().getGeoms():
                    vd = g.getVertexData()
                    anim = vd.animateVertices(True, Thread.getCurrentThread())
                    a = np.frombuffer(anim.getArray(0).getHandle().getData(), np.float32)
                    out.append((vd.getTransformBlendTable() is not None,
                                a.reshape(vd.getNumRows(), -1)))
            return out

        res = {{"skins": len(po.skins), "frames": []}}
        for t in (0.0, 0.3, 0.7, 1.1, 2.3):
            pr.pose("walk", t)
            ref.find("**/+Character").node().forceUpdate()
            po.pose("walk", t)
            (rb, ra), = drawn(ref)
            (ob, oa), = drawn(ours)
            res["frames"].append({{
                "ref_blended": rb, "ours_blended": ob,
                "pos_err": float(np.abs(ra[:, :3] - oa[:, :3]).max()),
                "nrm_err": float(np.abs(ra[:, 4:7] - oa[:, 4:7]).max()),
                "extent": float(np.abs(ra[:, :3]).max()),
                "pos": ra[:, :3].mean(axis=0).tolist()}})
        print(json.dumps(res))
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res["skins"] == 1
    frames = res["frames"]
    # the clip really moves the model between these times
    assert len({tuple(round(v, 3) for v in f["pos"]) for f in frames}) >= 4
    for f in frames:
        assert f["ref_blended"] and not f["ours_blended"]
        # float32 rounding on coordinates up to ~665 (ULP 6e-5)
        assert f["pos_err"] < 1e-3 * max(1.0, f["extent"] / 100), f
        assert f["nrm_err"] < 5e-3, f
