"""The compute rasterizer and G-buffer (issue #30, part A) on the CPU: exact visibility on a
synthetic occlusion, near-plane clipping with perspective-correct barycentrics, alpha
cut-out letting the next surface win, the same bytes twice, and agreement with GL's own
deferred G-buffer on a generated sample level (96x54 per view, 1 sample)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from stages.engine.compute.gbuffer import GBufferRenderer
from stages.engine.compute.raster import CullNone, rasterize

W, H = 96, 54


@pytest.fixture(autouse=True)
def _one_thread():
    # two shared cores: torch's thread pool contends with the other test processes and small
    # ops get 100x slower (measured); one thread is faster here
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _inside(tri, px, py):
    (x0, y0), (x1, y1), (x2, y2) = tri
    e = [(x2 - x1) * (py - y1) - (y2 - y1) * (px - x1),
         (x0 - x2) * (py - y2) - (y0 - y2) * (px - x2),
         (x1 - x0) * (py - y0) - (y1 - y0) * (px - x0)]
    return all(v > 0 for v in e) or all(v < 0 for v in e)


def test_two_triangles_occlude_with_exact_ids():
    """A near triangle in front of a far one (clip = world, w = 1): every pixel's id is the
    nearest triangle whose inside holds the pixel centre; depth and barycentrics exact."""
    far = [[-0.93, -0.91, 0.5], [0.87, -0.83, 0.5], [0.03, 0.89, 0.5]]
    near = [[-0.41, -0.47, -0.2], [0.53, -0.37, -0.2], [0.07, 0.61, -0.2]]
    tris = torch.tensor([far, near], dtype=torch.float32)
    out = rasterize(tris, torch.eye(4)[None], 32, 16)
    want = np.full((16, 32), -1)
    for y in range(16):
        for x in range(32):
            p = ((x + 0.5) / 32 * 2 - 1, (y + 0.5) / 16 * 2 - 1)
            for i, t in ((0, far), (1, near)):  # the near one last: it wins
                if _inside([v[:2] for v in t], *p):
                    want[y, x] = i
    got = out.tri[0].numpy()
    assert (got == want).all(), np.argwhere(got != want)
    assert (want == 1).sum() > 20 and (want == 0).sum() > 20
    z = {0: 0.5 * 0.5 + 0.5, 1: -0.2 * 0.5 + 0.5}
    for i in (0, 1):
        assert np.allclose(out.depth[0].numpy()[want == i], z[i], atol=1e-6)
    assert (out.depth[0].numpy()[want == -1] == 1.0).all()
    # barycentrics give back the pixel centre
    ys, xs = np.nonzero(want >= 0)
    b = out.bary[0, ys, xs].numpy()
    corners = tris.numpy()[want[ys, xs]][..., :2]
    pos = np.einsum("nk,nkc->nc", b, corners)
    centre = np.stack([(xs + 0.5) / 32 * 2 - 1, (ys + 0.5) / 16 * 2 - 1], 1)
    assert np.abs(pos - centre).max() < 1e-5


def _perspective(fov_deg, aspect, near, far):
    f = 1 / math.tan(math.radians(fov_deg) / 2)
    return torch.tensor([[f / aspect, 0, 0, 0], [0, f, 0, 0],
                         [0, 0, (far + near) / (near - far), 2 * far * near / (near - far)],
                         [0, 0, -1, 0]], dtype=torch.float32)


def test_a_triangle_through_the_near_plane_is_clipped_and_perspective_correct():
    """A ground triangle reaching behind the camera: covered pixels reproject onto their own
    centres through the barycentrics of the *original* triangle, and depth matches."""
    P = _perspective(60, 2, 0.1, 100)
    tri = torch.tensor([[[-30.0, -1.0, 8.0], [30.0, -1.0, 8.0], [0.0, -1.0, -60.0]]])
    out = rasterize(tri, P[None], 64, 32, cull=torch.tensor([CullNone]))
    hit = out.tri[0] == 0
    assert hit.sum() > 500  # the lower half, the horizon above
    b = out.bary[0][hit]
    world = b @ tri[0]
    clip = torch.cat([world, torch.ones(len(world), 1)], 1) @ P.T
    ndc = clip[:, :3] / clip[:, 3:]
    ys, xs = torch.nonzero(hit, as_tuple=True)
    assert torch.allclose((ndc[:, 0] + 1) / 2 * 64, xs.float() + 0.5, atol=2e-3)
    assert torch.allclose((ndc[:, 1] + 1) / 2 * 32, ys.float() + 0.5, atol=2e-3)
    assert torch.allclose(ndc[:, 2] * 0.5 + 0.5, out.depth[0][hit], atol=1e-5)
    assert bool((b >= -1e-4).all())  # inside the original triangle, not an extrapolation


def test_cut_fragments_let_the_next_surface_win():
    """The near triangle's fragments left of x = 0 are cut (raster level) and the far one
    shows there; elsewhere the near one still wins."""
    far = [[-1.5, -1.5, 0.5], [1.5, -1.5, 0.5], [0.0, 1.5, 0.5]]
    near = [[-1.2, -1.2, 0.0], [1.2, -1.2, 0.0], [0.0, 1.2, 0.0]]
    tris = torch.tensor([far, near], dtype=torch.float32)

    def cut(src, bary):
        x = torch.einsum("nk,nk->n", bary, tris[src][..., 0])
        return (src == 1) & (x < 0)
    out = rasterize(tris, torch.eye(4)[None], 32, 32, cut_tris=torch.tensor([False, True]),
                    cut_fn=cut)
    xs = (torch.arange(32) + 0.5) / 32 * 2 - 1
    row = out.tri[0, 16]
    assert (row[(xs < -0.1) & (xs > -0.5)] == 0).all()
    assert (row[(xs > 0.1) & (xs < 0.5)] == 1).all()


def _card_scene():
    """Two cards seen head-on: a front one whose texture's left half has alpha 0, a red
    emissive one behind it."""
    from panda3d.core import (
        CardMaker,
        Material,
        NodePath,
        PNMImage,
        Texture,
        TextureStage,
    )

    root = NodePath("scene")
    img = PNMImage(8, 8, 4)
    for x in range(8):
        for y in range(8):
            img.setXelA(x, y, 0.2, 0.9, 0.2, 0.0 if x < 4 else 1.0)
    tex = Texture("leaf")
    tex.load(img)
    tex.setMinfilter(Texture.FT_nearest)
    tex.setMagfilter(Texture.FT_nearest)
    for name, y, colour, textured in (("front", 2.0, (1, 1, 1, 1), True),
                                      ("back", 4.0, (1, 0, 0, 1), False)):
        cm = CardMaker(name)
        cm.setFrame(-1, 1, -1, 1)
        card = root.attachNewNode(cm.generate())
        card.setY(y)
        m = Material(name)
        m.setBaseColor(colour)
        m.setRoughness(0.5)
        if not textured:
            m.setEmission((0.2, 0.8, 1.0, 1.0))
        card.setMaterial(m)
        if textured:
            card.setTexture(TextureStage.getDefault(), tex)
    return root


def test_alpha_cut_out_shows_the_surface_behind():
    """Through the scene path (Panda3D material + RGBA texture): where the front card's
    alpha is below 0.5 the G-buffer holds the red card behind it."""
    from panda3d.core import Camera, NodePath, PerspectiveLens

    from stages.engine.compute.cameras import cameras_from_nodes
    from stages.engine.compute.gbuffer import GBufferRenderer
    from stages.engine.compute.scene_geometry import SceneGeometry

    root = _card_scene()
    lens = PerspectiveLens()
    lens.setFilmSize(32, 32)
    lens.setFov(40)
    cam = root.attachNewNode(Camera("cam", lens))
    del NodePath
    geo = SceneGeometry(root)
    gb = GBufferRenderer(geo, 32, 32).render(cameras_from_nodes([cam], root, 1))
    row = gb.albedo[0, 16]
    left, right = row[6:14], row[18:26]
    assert torch.allclose(left, torch.tensor([1.0, 0.0, 0.0]).expand_as(left))
    # the back card's emission (factor x the default white texture), none on the front one
    glow = gb.emission[0, 16]
    assert torch.allclose(glow[6:14], torch.tensor([0.2, 0.8, 1.0]).expand(8, 3))
    assert (glow[18:26] == 0).all()
    green = torch.tensor([51, 230, 51]) / 255.0  # the texture's 8-bit texels (linear RGBA)
    assert torch.allclose(right, green.expand_as(right), atol=1e-6)
    assert (gb.depth[0, 16, 18:26] < gb.depth[0, 16, 6:14]).all()  # the front card, nearer


@pytest.fixture(scope="module")
def sample_level_pair(tmp_path_factory):
    """GL's deferred G-buffer and the compute one of the same frame: the generated
    AlpineMeadow level, the skinned humanoid Alex mid-walk, the default five-view rig."""
    from stages.assetgen import characters, levels
    from stages.engine.compute.cameras import cameras_from_targets, sun_from_node
    from stages.engine.compute.gbuffer import GBufferRenderer
    from stages.engine.compute.scene_geometry import SceneGeometry
    from stages.engine.level_render import load_level_lighting
    from stages.engine.models import load_model
    from tests.engine.compute.gl_gbuffer import read_gl_gbuffer, render_gl
    from tests.looks import look as make_look

    d = tmp_path_factory.mktemp("compute")
    lv, ch = d / "AlpineMeadow.glb", d / "Alex.glb"
    lv.write_bytes(levels.RECIPES["AlpineMeadow"](7, 24, 64).to_glb())
    ch.write_bytes(characters.humanoid("Alex", 1.8, 1.0, "fabric", 3, 64, ["idle", "walk"]))
    look = make_look(shadow_map_size=512, shading="deferred")
    r, _ = render_gl(load_model(str(lv)), load_model(str(ch)), str(ch),
                     load_level_lighting(str(lv)), W, H, look=look, clip="walk",
                     clip_time=0.3, yaw_deg=30.0)
    gl = read_gl_gbuffer(r)
    torch.set_num_threads(1)
    skins = [sk for p in r.char_posers for sk in getattr(p, "skins", [])]
    geo = SceneGeometry(r.scene, dynamic=r.level.prop_pivots, animated=r.char_copies,
                        skins=skins)
    assert geo._skins, "the humanoid's skins are posed in torch"
    gr = GBufferRenderer(geo, W, H)
    cams = cameras_from_targets(r.targets)
    sun = sun_from_node(r.sun, r.scene, look.shadow_map_size, look.shadow_pcf_taps)
    gb = gr.render(cams, sun)
    gb2 = gr.render(cams, sun)
    yield gl, gb, gb2, geo, r, cams, sun
    r.close()


def test_the_gbuffer_matches_gl_on_a_sample_level(sample_level_pair):
    gl, gb, _, geo, *_ = sample_level_pair
    assert geo.moving, "the character copies and props are dynamic pieces"
    cov_c, cov_g = gb.depth.numpy() < 1, gl["depth"] < 1
    both = cov_c & cov_g
    figures = {"coverage_agree": float((cov_c == cov_g).mean()),
               "covered": float(cov_g.mean())}
    dz = np.abs(gb.depth.numpy() - gl["depth"])[both]
    figures["depth_within_1e-5"] = float((dz < 1e-5).mean())
    da = np.abs(gb.albedo.numpy() - gl["albedo"]).max(-1)[both]
    figures["albedo_within_0.02"] = float((da < 0.02).mean())
    dot = (gb.normal.numpy() * gl["normal"]).sum(-1)[both]
    figures["normal_dot_above_0.99"] = float((dot > 0.99).mean())
    dr = np.abs(gb.roughness.numpy() - gl["roughness"])[both]
    dm = np.abs(gb.metallic.numpy() - gl["metallic"])[both]
    figures["rough_metal_within_0.02"] = float(((dr < 0.02) & (dm < 0.02)).mean())
    ds = np.abs(gb.shadow.numpy() - gl["shadow"])[both]
    figures["shadow_within_0.1"] = float((ds < 0.1).mean())
    figures["shadowed_share"] = float((gl["shadow"][both] < 0.5).mean())
    print("compute vs GL G-buffer:", {k: round(v, 4) for k, v in figures.items()})
    assert 0.3 < figures["covered"] < 0.99  # sky and ground both in view
    assert figures["shadowed_share"] > 0.005  # the sun's shadow is part of the comparison
    assert figures["coverage_agree"] >= 0.995
    assert figures["depth_within_1e-5"] >= 0.98
    assert figures["albedo_within_0.02"] >= 0.98
    assert figures["normal_dot_above_0.99"] >= 0.98
    assert figures["rough_metal_within_0.02"] >= 0.98
    assert figures["shadow_within_0.1"] >= 0.98
    # sky pixels: depth 1 and the G-buffer's neutral values
    sky = ~cov_c
    assert (gb.shadow.numpy()[sky] == 1).all() and (gb.albedo.numpy()[sky] == 0).all()


def test_the_same_frame_gives_the_same_bytes(sample_level_pair):
    _, gb, gb2, *_ = sample_level_pair
    for name in ("emission", "albedo", "metallic", "normal", "roughness", "shadow", "depth"):
        a, b = getattr(gb, name), getattr(gb2, name)
        assert a.numpy().tobytes() == b.numpy().tobytes(), name


def test_world_positions_rebuild_from_depth(sample_level_pair):
    """The lighting pass rebuilds positions from depth and inv_view_proj: they land on the
    surface the rasterizer found (its eye distance agrees)."""
    _, gb, *_ = sample_level_pair
    pos = gb.world_position()
    cov = gb.covered
    dist = (pos - gb.eye[:, None, None, :]).norm(dim=-1)[cov]
    assert bool(torch.isfinite(dist).all()) and float(dist.min()) > 0.04
    # without eye (part B may build a GBuffer from the planes alone) the centres still follow
    bare = dataclasses.replace(gb, eye=None)
    assert torch.allclose(bare.camera_positions(), gb.eye, atol=1e-3)


def test_cameras_and_sun_from_poses_are_the_gl_paths(sample_level_pair):
    """Without any GL object: the cameras built from the replayed poses and the sun placed
    around the character give the matrices of the GL renderer's own nodes."""
    from stages.engine.compute.cameras import cameras_from_poses, sun_for_target
    from tests.engine.compute.gl_gbuffer import default_poses

    *_, r, cams, sun = sample_level_pair
    from stages.engine.replay_render import CharacterPose, SamplePose

    cp = CharacterPose((0.0, 0.0, 0.0), (1.0, 0.0, 0.0, 0.0), (1.0, 1.0, 1.0), None, 0.0)
    mine = cameras_from_poses([SamplePose(cp, default_poses(W, H))], W, H, 1)
    assert torch.allclose(mine.view_proj, cams.view_proj, rtol=1e-5, atol=1e-5)
    assert torch.equal(mine.bit, cams.bit)
    s2 = sun_for_target(r.level.sun_dir, (0.0, 0.0, 0.0), r.look.shadow_extent_m, sun.size,
                        sun.pcf_taps)
    assert torch.allclose(s2.view_proj, sun.view_proj, rtol=1e-5, atol=1e-5)


def test_torch_skinning_matches_the_cpu_poser(sample_level_pair):
    """The character skinned in torch from its joint matrices lands where the project's CPU
    skinning (fixed_order_skin.FixedOrderSkin, re-read from Panda3D) put it this frame."""
    from stages.engine.compute.scene_geometry import SceneGeometry

    *_, r, _, _ = sample_level_pair
    gpu = SceneGeometry(r.scene, dynamic=r.level.prop_pivots, animated=r.char_copies,
                        skins=[sk for p in r.char_posers for sk in getattr(p, "skins", [])])
    cpu = SceneGeometry(r.scene, dynamic=r.level.prop_pivots, animated=r.char_copies)
    a, b = gpu.frame(), cpu.frame()
    assert a.pos.shape == b.pos.shape
    assert float((a.pos - b.pos).abs().max()) < 1e-5
    assert float((a.nrm - b.nrm).abs().max()) < 1e-4
    moved = sum(len(p.pos) for p in gpu.moving if id(p) in gpu._skins)
    assert moved > 100


def test_the_batched_scene_step_is_each_piece_on_its_own(sample_level_pair):
    """The scene step poses every skin as one batch and places every moving piece in one
    pass: the same triangles as one skin (TorchSkin) and one piece (its own matrix) at a
    time, the way it was done before."""
    import numpy as np

    from stages.engine.compute.scene import _mat4
    from stages.engine.compute.scene_geometry import (
        SceneGeometry,
        _corner_frame,
        normal_matrix,
    )
    from stages.engine.compute.skinning import TorchSkin

    *_, r, _, _ = sample_level_pair
    skins = [sk for p in r.char_posers for sk in getattr(p, "skins", [])]
    geo = SceneGeometry(r.scene, dynamic=r.level.prop_pivots, animated=r.char_copies,
                        skins=skins)
    assert geo._batch is not None and len(geo._batch.skins) == len(skins) > 1
    v, nv = geo._batch.pose()
    one = [TorchSkin(sk, geo.device).pose() for sk in geo._batch.skins]
    assert torch.equal(v, torch.cat([o[0] for o in one]))
    assert nv is not None and torch.equal(nv, torch.cat([o[1] for o in one]))
    fr = geo.frame()
    ns = len(geo._static["pos"])
    rows = {id(sk): k for k, sk in enumerate(geo._batch.skins)}
    by_data = {sk.static.this: sk for sk in skins}
    ref_p, ref_n, ref_t = [], [], []
    for pc in geo.moving:
        if id(pc) in geo._skins:
            vd = pc.np_.node().getGeom(pc.geom_index).getVertexData()
            pv, pn = one[rows[id(by_data[vd.this])]]
            c = torch.from_numpy(pc.corners)
            lp, ln = pv[c].float(), pn[c].float()
        else:
            lp, ln = torch.from_numpy(pc.pos), torch.from_numpy(pc.nrm)
        m = torch.from_numpy(_mat4(pc.np_.getMat(geo.root))).float()
        p, n, t = _corner_frame(lp, ln, torch.from_numpy(pc.tan), m, normal_matrix(m))
        ref_p.append(p)
        ref_n.append(n)
        ref_t.append(t)
    assert len(geo.moving) > 3 and len(geo._skins) > 1
    for key, ref in (("pos", ref_p), ("nrm", ref_n), ("tan", ref_t)):
        got, ref_all = getattr(fr, key), torch.cat(ref)
        assert got[ns:].shape == ref_all.shape
        np.testing.assert_allclose(got[ns:].numpy(), ref_all.numpy(), rtol=0, atol=2e-5)
        assert torch.equal(got[:ns], geo._static[key])  # the static triangles as placed once
    mv = geo.moving  # the constant columns of the moving triangles, one piece at a time
    assert torch.equal(fr.uv[ns:], torch.cat([torch.from_numpy(pc.uv) for pc in mv]))
    assert torch.equal(fr.col[ns:], torch.cat([torch.from_numpy(pc.col) for pc in mv]))
    for key, attr in (("mat", "material"), ("cull", "cull"), ("bits", "bits")):
        ref = torch.cat([torch.full((len(pc.pos),), getattr(pc, attr)) for pc in mv])
        assert torch.equal(getattr(fr, key)[ns:], ref), key
    cut = torch.cat([torch.full((len(pc.pos),), geo._may_cut[pc.material]
                                or bool((pc.col[..., 3] < 0.5).any())) for pc in mv])
    assert torch.equal(fr.cut[ns:], cut)
    again = geo.frame()  # the constant columns are stacked once and reused
    assert again.uv is fr.uv and again.mat is fr.mat
    assert torch.equal(again.pos, fr.pos)


def test_the_triton_depth_kernel_gives_the_same_gbuffer(sample_level_pair, monkeypatch):
    """The sample level's G-buffer with the depth pass in the Triton kernel (under Triton's
    interpreter on this CPU) is the torch path's, byte for byte: skinned character, alpha
    cut-out leaves (kept on the torch path) and the shadow map included."""
    pytest.importorskip("triton")
    from stages.engine.compute import raster
    from stages.engine.compute.cameras import sun_from_node

    _, _, _, geo, r, cams, _ = sample_level_pair
    # a 128² shadow map (the look's is 512²: 262,144 texels against the five views' 25,920
    # pixels), rendered by the torch path and by the kernel under Triton's interpreter
    sun = sun_from_node(r.sun, r.scene, 128, r.look.shadow_pcf_taps)
    ref = GBufferRenderer(geo, W, H).render(cams, sun)
    monkeypatch.setattr(raster, "KERNEL", "interpret")
    gb = GBufferRenderer(geo, W, H).render(cams, sun)
    for name in ("depth", "albedo", "normal", "roughness", "metallic", "shadow", "emission"):
        assert getattr(gb, name).numpy().tobytes() == getattr(ref, name).numpy().tobytes(), name


def _on_cuda(r):
    """The GL pair's scene, cameras and sun on CUDA (the -m gpu tests)."""
    from stages.engine.compute.cameras import cameras_from_targets, sun_from_node
    from stages.engine.compute.scene_geometry import SceneGeometry

    dev = torch.device("cuda")
    geo = SceneGeometry(r.scene, dynamic=r.level.prop_pivots, animated=r.char_copies,
                        device=dev, skins=[sk for p in r.char_posers for sk in p.skins])
    return (geo, cameras_from_targets(r.targets, dev),
            sun_from_node(r.sun, r.scene, 512, r.look.shadow_pcf_taps, dev))


@pytest.mark.gpu
def test_cuda_triton_depth_kernel_is_the_torch_path(sample_level_pair, monkeypatch):
    """On CUDA the Triton depth kernel and the torch ops give the same visibility bits."""
    if not torch.cuda.is_available():
        pytest.fail("no CUDA device: run the gpu tests on a GPU machine")
    from stages.engine.compute import raster

    geo, cams, sun = _on_cuda(sample_level_pair[4])
    out = {}
    for kernel in ("torch", "triton"):
        monkeypatch.setattr(raster, "KERNEL", kernel)
        out[kernel] = GBufferRenderer(geo, W, H).render(cams, sun)
    for name in ("depth", "albedo", "normal", "shadow"):
        assert torch.equal(getattr(out["torch"], name), getattr(out["triton"], name)), name


@pytest.mark.gpu
def test_cuda_gbuffer_matches_the_cpu_reference(sample_level_pair):
    """The same kernels on CUDA (-m gpu, the lent H200) give the CPU's G-buffer: same
    coverage and depth, the material planes within float rounding."""
    if not torch.cuda.is_available():
        pytest.fail("no CUDA device: run the gpu tests on a GPU machine")
    ref = sample_level_pair[1]
    geo, cams, sun = _on_cuda(sample_level_pair[4])
    gb = GBufferRenderer(geo, W, H).render(cams, sun)
    gb2 = GBufferRenderer(geo, W, H).render(cams, sun)
    assert torch.equal(gb.depth, gb2.depth) and torch.equal(gb.albedo, gb2.albedo)
    cov = (gb.depth.cpu() < 1) == (ref.depth < 1)
    assert float(cov.float().mean()) >= 0.999
    both = (gb.depth.cpu() < 1) & (ref.depth < 1)
    assert float((gb.depth.cpu() - ref.depth).abs()[both].max()) < 1e-5
    close = ((gb.albedo.cpu() - ref.albedo).abs().amax(-1) < 1e-3) & (
        (gb.normal.cpu() * ref.normal).sum(-1) > 0.9999) & (
        (gb.shadow.cpu() - ref.shadow).abs() < 1e-3)
    assert float(close[both].float().mean()) >= 0.995


def test_every_spatial_and_temporal_sample_matches_gl(tmp_path):
    """2 spatial x 2 temporal samples (Halton jitter; a character copy per temporal sample,
    seen only by that sample's cameras): each of the 20 (view, sample) tiles has GL's
    coverage and depth, in the G-buffer order view x 4 + t x 2 + s."""
    from stages.assetgen import characters, levels
    from stages.engine.compute.cameras import cameras_from_targets, sun_from_node
    from stages.engine.compute.gbuffer import GBufferRenderer
    from stages.engine.compute.scene_geometry import SceneGeometry
    from stages.engine.level_render import load_level_lighting
    from stages.engine.models import load_model
    from tests.engine.compute.gl_gbuffer import read_gl_gbuffer, render_gl
    from tests.looks import look as make_look

    lv, ch = tmp_path / "AlpineMeadow.glb", tmp_path / "Alex.glb"
    lv.write_bytes(levels.RECIPES["AlpineMeadow"](7, 16, 32).to_glb())
    ch.write_bytes(characters.humanoid("Alex", 1.8, 1.0, "fabric", 3, 32, ["idle", "walk"]))
    look = make_look(shadow_map_size=256, shading="deferred")
    w, h = 64, 36
    r, _ = render_gl(load_model(str(lv)), load_model(str(ch)), str(ch),
                     load_level_lighting(str(lv)), w, h, look=look, clip="walk",
                     spatial=2, temporal=2, step_m=0.4)
    try:
        gl = read_gl_gbuffer(r)
        geo = SceneGeometry(r.scene, dynamic=r.level.prop_pivots, animated=r.char_copies,
                            skins=[sk for p in r.char_posers for sk in p.skins])
        cams = cameras_from_targets(r.targets)
        sun = sun_from_node(r.sun, r.scene, look.shadow_map_size, look.shadow_pcf_taps)
        gb = GBufferRenderer(geo, w, h).render(cams, sun)
    finally:
        r.close()
    assert gb.depth.shape == (20, h, w) and cams.nsamples == 4
    cov_c, cov_g = gb.depth.numpy() < 1, gl["depth"] < 1
    per_tile = (cov_c == cov_g).mean(axis=(1, 2))
    both = cov_c & cov_g
    print("2x2 samples vs GL:", {"coverage_min_tile": round(float(per_tile.min()), 4),
          "depth_within_1e-5": round(float((np.abs(gb.depth.numpy() - gl["depth"])[both]
                                             < 1e-5).mean()), 4),
          "shadow_within_0.1": round(float((np.abs(gb.shadow.numpy() - gl["shadow"])[both]
                                             < 0.1).mean()), 4)})
    assert per_tile.min() >= 0.99, per_tile
    assert (np.abs(gb.depth.numpy() - gl["depth"])[both] < 1e-5).mean() >= 0.98
    assert (np.abs(gb.shadow.numpy() - gl["shadow"])[both] < 0.1).mean() >= 0.98
    # the temporal copies differ: the two temporal samples of the back view see the character
    # in different places (and spatial samples of one t differ only by sub-pixel jitter)
    back = 0  # VIEWS[0]
    for d in (gb.depth.numpy(), gl["depth"]):
        moved = np.abs(d[back * 4 + 0] - d[back * 4 + 2]) > 1e-3
        assert moved.sum() > 20, moved.sum()


def test_only_the_shown_child_of_a_switch_is_drawn():
    """A switch (or a flip-book held at one frame) draws one child, as GL does."""
    from panda3d.core import CardMaker, NodePath, SwitchNode

    from stages.engine.compute.scene_geometry import SceneGeometry

    root = NodePath("scene")
    sw = root.attachNewNode(SwitchNode("frames"))
    for k in range(3):
        cm = CardMaker(f"frame{k}")
        cm.setFrame(k, k + 1, 0, 1)
        sw.attachNewNode(cm.generate())
    sw.node().setVisibleChild(1)
    geo = SceneGeometry(root)
    assert geo.num_triangles == 2
    assert float(geo.frame().pos[..., 0].min()) == 1.0  # frame1's card, x from 1 to 2
