"""The torch lighting and resolve (the compute Stage II) give GL's pictures: G-buffer planes
read back from the real deferred renderer (llvmpipe here) are lit and resolved in torch and
compared with GL's own lit atlas and resolved views."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from stages.core.trajectory import VIEWS  # noqa: E402
from stages.engine.compute.resolve import (  # noqa: E402
    exposure_from_codes,
    meter_codes,
    resolve,
)
from stages.engine.compute.shade import (  # noqa: E402
    oct_decode,
    oct_encode,
    quantize_r11g11b10,
    shade,
)
from tests.engine.compute.gl_reference import (  # noqa: E402
    render_reference,
    sky_poses,
    write_sample_assets,
)

T = torch.from_numpy


@pytest.fixture(scope="module")
def assets(tmp_path_factory):
    return write_sample_assets(tmp_path_factory.mktemp("compute_shade"), "Downtown")


@pytest.fixture(scope="module")
def gl_frame(assets):
    """Downtown at dusk (the sun, three point lights, the sky), the humanoid Alex, 96x54 x 2
    spatial samples."""
    return render_reference(*assets, width=96, height=54, spatial=2)


@pytest.fixture(scope="module")
def gl_outpost(tmp_path_factory):
    """The Outpost at night from its north-east platform, facing a glowing beacon: the
    emission path (and a metered exposure of ~40x)."""
    import math

    assets = write_sample_assets(tmp_path_factory.mktemp("compute_outpost"), "Outpost")
    return render_reference(*assets, width=96, height=54, spatial=1, at=(12.5, 12.5, 2.0),
                            yaw=math.radians(45))


@pytest.fixture(scope="module")
def gl_sky(assets):
    from stages.engine.level_render import load_level_lighting
    from stages.engine.pbr import sky_settings

    sun = sky_settings(load_level_lighting(str(assets[0])))["sun_dir"]
    return render_reference(*assets, width=96, height=54, spatial=1, poses=sky_poses(sun))


def _shade(f):
    rad = shade(T(f.emission), T(f.albedo), T(f.metallic), oct_decode(T(f.oct_normal)),
                T(f.roughness), T(f.shadow), T(f.depth), T(f.inv_view_proj), T(f.eye),
                f.lighting)
    return quantize_r11g11b10(rad)


def _psnr(a, b):
    mse = float(((a.astype(float) - b.astype(float)) ** 2).mean())
    return 10 * np.log10(255.0 ** 2 / mse) if mse > 0 else float("inf")


def _luma(img):
    return float((img.astype(float) @ np.array([0.2126, 0.7152, 0.0722])).mean())


def _compare(f, ours):
    rows = []
    for v, view in enumerate(VIEWS):
        p, dl = _psnr(ours[v], f.colors[v]), abs(_luma(ours[v]) - _luma(f.colors[v]))
        rows.append((view, p, dl))
        print(f"{view}: PSNR {p:.1f} dB, mean luma {_luma(f.colors[v]):.2f} (GL) vs "
              f"{_luma(ours[v]):.2f}, max |d| {np.abs(ours[v].astype(int) - f.colors[v]).max()}")
        assert p >= 35.0 and dl <= 2.0, (view, p, dl)
    return rows


def test_sample_level_lit_and_resolved_in_torch_is_gl_picture(gl_frame):
    f = gl_frame
    assert f.lighting.num_lights >= 2 and f.lighting.shadow_light == 0
    surf = f.depth < 1.0
    assert 0.3 < surf.mean() < 0.99  # surfaces and sky both in view
    assert (f.shadow[surf] < 0.5).any() and (f.shadow[surf] > 0.5).any()  # sun and shade
    lit = _shade(f).numpy()
    # the lit atlas within one R11G11B10 step of GL's (llvmpipe: the very same values)
    rel = np.abs(lit - f.lit) / np.maximum(f.lit, 2.0 ** -14)
    print(f"lit atlas: {np.mean(lit == f.lit):.4f} of values identical to GL's, "
          f"max relative diff {rel.max():.2e}")
    assert rel.max() <= 2.0 ** -5
    ours = resolve(T(lit), f.exposure, f.tone_map).numpy()
    assert all(ours[v].std() > 5 for v in range(len(VIEWS)))  # pictures, not flat colours
    _compare(f, ours)


def test_emissive_night_level_is_gl_picture(gl_outpost):
    f = gl_outpost
    glow = f.emission.max(-1) > 0
    assert glow.mean() > 0.005  # the beacons are in view
    lit = _shade(f).numpy()
    rel = np.abs(lit - f.lit) / np.maximum(f.lit, 2.0 ** -14)
    assert rel.max() <= 2.0 ** -5 and rel[glow].max() <= 2.0 ** -5
    _compare(f, resolve(T(lit), f.exposure, f.tone_map).numpy())


def test_resolve_of_gl_atlas_is_gl_resolve(gl_frame):
    """The resolve alone: GL's own lit atlas resolved in torch (mean of 2 samples, exposure,
    ACES, sRGB, 8 bits) gives GL's bytes, and the meter frame's atlas GL's meter codes."""
    f = gl_frame
    ours = resolve(T(f.lit), f.exposure, f.tone_map).numpy()
    d = np.abs(ours.astype(int) - f.colors.astype(int))
    print(f"resolve: {np.mean(d == 0):.5f} of bytes identical, max |d| {d.max()}")
    assert d.max() <= 1 and d.mean() < 0.01
    codes = meter_codes(T(f.meter_lit)).numpy()
    gl_codes = np.stack(np.split(f.meter, len(VIEWS), axis=1))
    assert np.abs(codes.astype(int) - gl_codes.astype(int)).max() <= 1
    key = 0.18
    assert exposure_from_codes(T(codes), key) == exposure_from_codes(T(gl_codes), key)


def test_sky_only_along_exact_view_rays(gl_sky):
    f = gl_sky
    assert (f.depth >= 1.0).all()
    lit = _shade(f).numpy()
    assert np.abs(lit - f.lit).max() <= 2.0 ** -5 * max(float(f.lit.max()), 1.0)
    ours = resolve(T(lit), f.exposure, f.tone_map).numpy()
    sun_view = ours[-1].astype(int)
    assert sun_view.max() >= 250 and sun_view.max() - np.median(sun_view) > 40  # the disc
    _compare(f, ours)


def test_same_bytes_twice_and_in_blocks(gl_frame):
    f = gl_frame
    a = resolve(_shade(f), f.exposure, f.tone_map).numpy()
    b = resolve(_shade(f), f.exposure, f.tone_map).numpy()
    assert a.tobytes() == b.tobytes()
    blocks = shade(T(f.emission), T(f.albedo), T(f.metallic), oct_decode(T(f.oct_normal)),
                   T(f.roughness), T(f.shadow), T(f.depth), T(f.inv_view_proj), T(f.eye),
                   f.lighting, block_px=2000)  # 1 row of 96 px x 10 tiles at a time
    whole = shade(T(f.emission), T(f.albedo), T(f.metallic), oct_decode(T(f.oct_normal)),
                  T(f.roughness), T(f.shadow), T(f.depth), T(f.inv_view_proj), T(f.eye),
                  f.lighting)
    assert torch.equal(blocks, whole)


def test_octahedral_normals_round_trip(gl_frame):
    """oct_encode is GBUF_FRAG's: GL's stored codes decode and encode back to themselves, and
    their half-float storage moves a normal by less than 0.1 degree."""
    e = T(gl_frame.oct_normal)
    n = oct_decode(e)
    assert torch.allclose(oct_encode(n), e, atol=1e-6)
    stored = oct_decode(oct_encode(n).half().float())
    cos = (stored * n).sum(-1).clamp(-1, 1)
    assert float(torch.rad2deg(torch.acos(cos)).max()) < 0.1


def test_bad_planes_are_refused(gl_frame):
    f = gl_frame
    with pytest.raises(ValueError, match="emission, albedo and normal"):
        shade(T(f.emission[..., :2]), T(f.albedo), T(f.metallic), oct_decode(T(f.oct_normal)),
              T(f.roughness), T(f.shadow), T(f.depth), T(f.inv_view_proj), T(f.eye),
              f.lighting)
    with pytest.raises(ValueError, match=r"\[views, samples, H, W, 3\]"):
        resolve(T(f.lit[0]))
    with pytest.raises(ValueError, match="tone_map"):
        resolve(T(f.lit), 1.0, "reinhard")


@pytest.mark.slow
def test_compiled_chain_gives_the_same_bytes(gl_frame):
    """torch.compile of the whole chain (fused kernels: what makes it fast) gives GL's bytes
    too (compiling takes a minute or more on this 2-core machine, hence slow)."""
    f = gl_frame

    def chain(*planes):
        return resolve(quantize_r11g11b10(shade(*planes, f.lighting)), f.exposure, f.tone_map)

    args = (T(f.emission), T(f.albedo), T(f.metallic), oct_decode(T(f.oct_normal)),
            T(f.roughness), T(f.shadow), T(f.depth), T(f.inv_view_proj), T(f.eye))
    compiled = torch.compile(chain)(*args).numpy()
    assert compiled.tobytes() == f.colors.tobytes()
    assert compiled.tobytes() == chain(*args).numpy().tobytes()
