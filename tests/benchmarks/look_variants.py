"""Stage II renderer variants for measuring what the look costs (issue #20's speed check).

Run in place of the render worker: ``python -m tests.benchmarks.look_variants VARIANT INSTANCE``.
Each variant patches the renderer in this process only (never the product), then runs the real
render worker on the instance, so a variant's speed is measured through the same code path as
``bench_render.py``. ``bench_render.py --variants a,b,c`` runs them side by side.

Variants (comma-free names; ``a+b`` applies both):
  base            the renderer as committed (render.shading auto: deferred on GPUs, forward
                  on llvmpipe)
  forward         the whole look in the fragment shader (render.shading=forward); the
                  shader-patching variants below patch the forward shader: combine them with
                  it (forward+no_ibl)
  deferred        G-buffer + compute lighting (render.shading=deferred)
  const_fs        a fragment shader that writes a constant (vertex, raster, ROP and CPU costs only)
  albedo_fs       base colour texture only (one fetch, no lighting)
  no_shadow_taps  PBR without the shadow-map lookups (the shadow pass still runs)
  no_shadow       PBR without shadow lookups and without the shadow pass
  taps1           one shadow tap per pixel instead of the look's default (since the taps are
                  spread over the samples, the same cost per sample at 8 samples)
  front_to_back   opaque geometry drawn nearest first (early depth rejection)
  no_sky_spec     image-based specular from the SH irradiance only (no sky evaluation)
  legacy          the shaders of pbr.py at LEGACY_REV (for before and after in one run)
  one_light       only the first light (the sun) is evaluated
  no_ibl          no image-based light (sky diffuse and specular)
  no_mr_nm        no metallic-roughness and no normal-map texture fetches
  bilinear_mips   every level texture sampled with the nearest mip level (not trilinear)
  shadow1024      a 1024 px sun shadow map (the look's default is 2048)
  overdraw        prints shaded fragments per pixel (draw order, front-to-back) and exits
                  (reads the mask texture's RAM image: render.readback sync, bench_render's
                  default)
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

CONST_FS = """#version 330
out vec4 o_color;
void main() { o_color = vec4(0.5, 0.5, 0.5, 1.0); }
"""

ALBEDO_FS = """#version 330
uniform sampler2D p3d_TextureModulate;
in vec2 v_texcoord;
in vec4 v_color;
out vec4 o_color;
void main() { o_color = texture(p3d_TextureModulate, v_texcoord) * v_color; }
"""

def _must(s: str, old: str, new: str) -> str:
    if old not in s:
        raise SystemExit(f"look_variants: {old!r} is not in the shader")
    return s.replace(old, new)


def _must_sub(s: str, pattern: str, new: str) -> str:
    out, n = re.subn(pattern, new, s)
    if not n:
        raise SystemExit(f"look_variants: {pattern!r} matches nothing in the shader")
    return out


def _patch_frag(fn: Any) -> None:
    from stages.engine import pbr

    pbr.PBR_FRAG = fn(pbr.PBR_FRAG)


def _after_init(fn: Any) -> None:
    from stages.engine.replay_render import ReplayRenderer

    orig = ReplayRenderer.__init__

    def init(self: Any, *a: Any, **k: Any) -> None:
        orig(self, *a, **k)
        fn(self)

    ReplayRenderer.__init__ = init  # type: ignore[method-assign]


def _front_to_back(_r: Any = None) -> None:
    from panda3d.core import CullBinManager

    bins = CullBinManager.getGlobalPtr()
    bins.setBinType(bins.findBin("opaque"), CullBinManager.BT_front_to_back)


def _no_shadow_pass() -> None:
    from stages.engine.level_render import LevelScene

    orig = LevelScene._make_sun

    def make_sun(self: Any, sun_np: Any) -> None:
        orig(self, sun_np)
        sun_np.node().setShadowCaster(False)

    LevelScene._make_sun = make_sun  # type: ignore[method-assign]


def _overdraw() -> None:
    """After some frames: fragments per pixel, counted by additive blending into the (8-bit)
    mask pass with the level and the sky shown to it, in Panda's draw order and front to
    back; prints both and exits."""
    import numpy as np
    from panda3d.core import (
        BitMask32,
        ColorAttrib,
        ColorBlendAttrib,
        RenderState,
        ShaderAttrib,
        TextureAttrib,
    )

    from stages.engine.replay_render import ReplayRenderer
    from stages.engine.scene_targets import FP_MASK_BIT, MASK_BIT

    orig = ReplayRenderer.render
    orig_submit = ReplayRenderer.submit  # what the frame loop calls per frame
    calls = {"n": 0}

    def submit(self: Any, samples: Any, exact: Any, dz: float) -> Any:
        out = orig_submit(self, samples, exact, dz)
        calls["n"] += 1
        if calls["n"] == 20:
            bits = BitMask32.bit(MASK_BIT) | BitMask32.bit(FP_MASK_BIT)
            self.level_np.show(bits)
            self.sky_np.show(bits)
            state = RenderState.make(
                ColorAttrib.makeFlat((1 / 255, 0, 0, 1)), TextureAttrib.makeAllOff(),
                ShaderAttrib.makeOff(), ColorBlendAttrib.make(
                    ColorBlendAttrib.M_add, ColorBlendAttrib.O_one, ColorBlendAttrib.O_one),
                1000)
            for cam in self.targets.mask_cams.values():
                cam.node().setInitialState(state)
            res = {}
            for mode in ("draw_order", "front_to_back"):
                if mode == "front_to_back":
                    _front_to_back()
                _, masks, _ = orig(self, samples, exact, dz)
                a = self.targets.mask_tex.getRamImageAs("R")
                arr = np.frombuffer(memoryview(a), np.uint8).astype(float)
                res[mode] = float(arr.mean())
                hist = np.bincount(arr.astype(int), minlength=8)[:8] / arr.size
                print("overdraw", mode, "share of pixels with 0..7 fragments:", np.round(hist, 3),
                      flush=True)
            print("overdraw (fragments per pixel, mask pass):", res, flush=True)
            raise SystemExit(0)
        return out

    ReplayRenderer.submit = submit  # type: ignore[method-assign]


LEGACY_REV = "46ba8b4"  # the look as of 2026-12-03 (README: the look's cost on the H200)


def _legacy() -> None:
    """Shaders of an earlier pbr.py: $WMFORGE_LEGACY_PBR, else .h200/pbr_legacy.py (the device
    copy has no git history: make it with `git show 46ba8b4:stages/engine/pbr.py >
    .h200/pbr_legacy.py`), else from git."""
    import importlib.util
    import os
    import subprocess
    import tempfile

    from stages.engine import pbr

    path = Path(os.environ.get("WMFORGE_LEGACY_PBR", ROOT / ".h200" / "pbr_legacy.py"))
    if not path.exists():
        try:
            text = subprocess.run(["git", "show", f"{LEGACY_REV}:stages/engine/pbr.py"],
                                  cwd=ROOT, check=True, capture_output=True, text=True).stdout
        except (OSError, subprocess.CalledProcessError) as exc:
            raise SystemExit(f"look_variants: legacy needs {path} or git history ({exc})"
                             ) from None
        path = Path(tempfile.mkdtemp()) / "pbr_legacy.py"
        path.write_text(text)
    spec = importlib.util.spec_from_file_location("pbr_legacy", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    pbr.PBR_FRAG, pbr.PBR_VERT = mod.PBR_FRAG, mod.PBR_VERT


def _bilinear_mips() -> None:
    from panda3d.core import SamplerState

    from stages.engine.replay_render import ReplayRenderer

    orig = ReplayRenderer.load_level

    def load_level(self: Any, model: Any, lighting: Any = None) -> Any:
        rep = orig(self, model, lighting)
        texs = model.findAllTextures()
        for i in range(texs.getNumTextures()):
            t = texs.getTexture(i)
            if t.usesMipmaps():
                t.setMinfilter(SamplerState.FT_linear_mipmap_nearest)
        return rep

    ReplayRenderer.load_level = load_level  # type: ignore[method-assign]


def apply(variants: str) -> None:
    """Apply ``a+b+…`` (each a variant above) in order."""
    for v in variants.split("+"):
        _apply_one(v)


def _apply_one(variant: str) -> None:
    if variant == "base":
        return
    if variant == "const_fs":
        _patch_frag(lambda _src: CONST_FS)
    elif variant == "albedo_fs":
        _patch_frag(lambda _src: ALBEDO_FS)
    elif variant in ("no_shadow_taps", "no_shadow"):
        _patch_frag(lambda s: _must(
            s, "float sun_shadow = shadow_light >= 0 ? shadow_pcf(sun.shadowMap, v_shadow_pos) "
            ": 1.0;", "float sun_shadow = 1.0;"))
        if variant == "no_shadow":
            _no_shadow_pass()
    elif variant == "taps1":
        _after_init(lambda r: r.scene.setShaderInput("pcf_taps", 1))
    elif variant == "front_to_back":
        _after_init(_front_to_back)
    elif variant == "no_sky_spec":
        _patch_frag(lambda s: _must_sub(s, r"vec3 spec_env = .*?;", "vec3 spec_env = irr / PI;"))
    elif variant == "legacy":
        _legacy()
    elif variant == "one_light":
        _patch_frag(lambda s: _must(s, "if (i >= num_lights) break;",
                                    "if (i >= min(num_lights, 1)) break;"))
    elif variant == "no_ibl":
        _patch_frag(lambda s: _must_sub(s, r"\n    color \+= ibl_strength \*[^;]*;", "\n"))
    elif variant == "no_mr_nm":
        _patch_frag(lambda s: _must(_must(s, "texture(p3d_TextureSelector, v_texcoord)",
                                          "vec4(1.0)"),
                                    "texture(p3d_TextureNormal, v_texcoord).rgb", "vec3(1.0)"))
    elif variant == "bilinear_mips":
        _bilinear_mips()
    elif variant in ("forward", "deferred"):  # render.shading forced either way
        from stages.engine.replay_render import ReplayRenderer

        orig_f = ReplayRenderer.__init__

        def init_f(self: Any, *a: Any, look: Any = None, **k: Any) -> None:
            if look is not None:
                look.shading = variant
            orig_f(self, *a, look=look, **k)

        ReplayRenderer.__init__ = init_f  # type: ignore[method-assign]
    elif variant == "shadow1024":
        from stages.engine.replay_render import ReplayRenderer

        orig = ReplayRenderer.__init__

        def init(self: Any, *a: Any, look: Any = None, **k: Any) -> None:
            if look is not None:
                look.shadow_map_size = 1024
            orig(self, *a, look=look, **k)

        ReplayRenderer.__init__ = init  # type: ignore[method-assign]
    elif variant == "overdraw":
        _overdraw()
    else:
        raise SystemExit(f"look_variants: unknown variant {variant!r}")


def main() -> int:
    variant, inst = sys.argv[1], sys.argv[2]
    apply(variant)
    from stages.engine.render_worker import worker

    return worker(Path(inst))


if __name__ == "__main__":
    raise SystemExit(main())
