"""render.yuv=device on the GL backend (issue #30 item 2, the GL half): a GL pass after the
resolve packs every view's yuv420p planes (and the labelled preview's) into one RGBA8 buffer,
read back through the pixel-pack ring instead of the RGB strip, and the encoders take the
planes as they are. On the real engine (Mesa llvmpipe here) at 96x54, the sample level.

What must hold: the planes are what the encoders' own conversion (swscale, and
``compute.yuv``'s reference of it) makes of the very same frame's RGB, within one code; the
preview's planes are those of ``media.video.tile_preview``; the videos look the same as the
RGB path's, the meter and the gate see the same, and the bytes repeat."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from stages.cluster.keys import render_settings
from stages.config import ConfigError, load_params
from stages.core.trajectory import VIEWS
from stages.engine.compute.yuv import rgb_to_yuv420
from stages.engine.gl_yuv import buffer_size, stream_bytes, unpack
from stages.engine.instance_render import InstanceRenderer
from stages.engine.render_settings import RenderSettings, RenderSettingsError
from stages.media.video import Yuv420, read_frames, tile_preview
from tests.conftest import make_trajectories, small_render_cfg
from tests.posed_frames import PosedFrames

FRAMES = 8
W, H = 96, 54  # H / 2 = 27 chroma rows: an odd count, the vertical filter's edge case


def _cfg(yuv: str, preview: str = "true", width: int = W, height: int = H):
    return small_render_cfg(width=width, height=height, spatial_samples=2, temporal_samples=1,
                            mask_scale=1, meter_frames=2, warmup_frames=1, preview=preview,
                            yuv=yuv)


@pytest.fixture(scope="module")
def traj(sample_library, tmp_path_factory) -> Path:
    out = make_trajectories(sample_library, tmp_path_factory.mktemp("traj"), 1, FRAMES)
    return out / "NatureValley__AlpineMeadow" / "traj_0000"


def _render(traj: Path, out: Path, yuv: str, name: str = "t") -> tuple[dict, dict]:
    ir = InstanceRenderer(out, render_settings(_cfg(yuv), 30), "p3headlessgl", Path.cwd(),
                          readback="pbo")
    try:
        meta = ir.render(traj, name, "k" * 16)
    finally:
        ir.close()
    frames = {v: read_frames(out / name / f"{v}.mp4") for v in (*VIEWS, "preview")}
    return meta, frames


def _swscale(rgb: np.ndarray) -> tuple[np.ndarray, ...]:
    """The encoders' own conversion of an RGB picture (PyAV → swscale, rgb24 → yuv420p)."""
    import av

    f = av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb), format="rgb24")
    y = f.reformat(format="yuv420p")
    h, w = rgb.shape[:2]
    planes = []
    for k, (ph, pw) in enumerate(((h, w), (h // 2, w // 2), (h // 2, w // 2))):
        p = y.planes[k]
        a = np.frombuffer(memoryview(p), np.uint8).reshape(-1, p.line_size)
        planes.append(a[:ph, :pw])
    return tuple(planes)


def _planes(p: Yuv420) -> tuple[np.ndarray, ...]:
    return p.y, p.u, p.v


@pytest.mark.parametrize("size", [(W, H), (100, 50), (98, 54), (64, 36)])
def test_the_gl_pass_makes_the_encoders_planes_of_the_same_frame(sample_library, traj,
                                                                  tmp_path, size):
    """One frame read back both ways at once (the RGB strip and the packed planes, behind one
    fence): every view's planes and the preview's are the conversion of that RGB within one
    code, almost all exact; the read-back is 1.5 bytes a pixel plus the preview's."""
    w, h = size
    ir = InstanceRenderer(tmp_path, render_settings(_cfg("device", width=w, height=h), 30),
                          "p3headlessgl", Path.cwd(), readback="pbo")
    try:
        pf = PosedFrames(ir, traj)
        t = ir.r.targets
        assert t.yuv and t.yuv_pass is not None
        for f in (0, FRAMES - 1):
            pose = pf.pose(f, 0.1 * f)
            ir.r._place_frame([pose], pose, 0.0)
            t.pbo.submit(("colour", "yuv", "mask"))
            got = t.pbo.collect()
            rgb = t._split(got["colour"][::-1], got["mask"][::-1, :, 0])[0]
            pics = t.yuv_pass.unpack(got["yuv"], with_preview=True)
            assert rgb["back"].std() > 5  # a real picture
            refs = {v: rgb[v] for v in VIEWS}
            refs["preview"] = tile_preview(refs, VIEWS)
            for name, ref in refs.items():
                mine = _planes(pics[name])
                torch_ref = [p.numpy() for p in rgb_to_yuv420(torch.from_numpy(
                    np.ascontiguousarray(ref)))]
                for k, (a, b, c) in enumerate(zip(mine, torch_ref, _swscale(ref),
                                                  strict=True)):
                    assert a.shape == b.shape == c.shape, (name, k)
                    d_ref = np.abs(a.astype(int) - b.astype(int))
                    d_sws = np.abs(a.astype(int) - c.astype(int))
                    assert d_ref.max() <= 1 and d_sws.max() <= 1, (name, k, d_ref.max(),
                                                                   d_sws.max())
                    assert (d_ref == 0).mean() > 0.99, (name, k, (d_ref == 0).mean())
        assert got["yuv"].nbytes == 4 * np.prod(buffer_size(w, h))
        assert got["yuv"].nbytes - stream_bytes(w, h) < 4 * buffer_size(w, h)[0]
    finally:
        ir.close()


def test_videos_meter_gate_and_bytes_match_the_rgb_path(traj, tmp_path):
    """A whole trajectory with yuv=device against yuv=encoder: the same exposure (the meter
    still reads RGB codes), the same gate, every view and the preview within 40 dB of the
    RGB path's decoded frames, and a second device run gives the same MP4 bytes."""
    meta_e, frames_e = _render(traj, tmp_path / "e", "encoder")
    meta_d, frames_d = _render(traj, tmp_path / "d", "device")
    assert meta_e["yuv"] == "encoder" and meta_d["yuv"] == "device"
    assert meta_d["settings"]["yuv"] == "device" and meta_e["settings"]["yuv"] == "encoder"
    assert meta_d["exposure"] == meta_e["exposure"]
    assert meta_d["alignment"] == meta_e["alignment"]
    for v in (*VIEWS, "preview"):
        assert len(frames_d[v]) == len(frames_e[v]) == FRAMES, v
        a = np.stack(frames_d[v]).astype(float)
        b = np.stack(frames_e[v]).astype(float)
        assert a.shape == b.shape, v
        psnr = 10 * np.log10(255.0 ** 2 / max(((a - b) ** 2).mean(), 1e-12))
        assert psnr > 40, (v, psnr)
        assert abs(a.mean() - b.mean()) < 0.5, v
    meta_2, _ = _render(traj, tmp_path / "d2", "device")
    assert meta_2["sha256"] == meta_d["sha256"]


def test_auto_is_the_encoder_on_a_software_rasterizer(traj, tmp_path):
    """render.yuv auto: a GPU's driver converts (device), a software rasterizer (llvmpipe
    here, which would run the pass on the CPU) leaves it to the encoders; the render key is the
    one it was before render.yuv existed."""
    ir = InstanceRenderer(tmp_path, render_settings(_cfg("auto", "false"), 30),
                          "p3headlessgl", Path.cwd(), readback="pbo")
    try:
        PosedFrames(ir, traj)
        t = ir.r.targets
        renderer = str(t.host.getGsg().getDriverRenderer()).lower()
        assert t.software == ("llvmpipe" in renderer or "softpipe" in renderer)
        assert t.yuv == (not t.software)
        assert (t.yuv_pass is None) == (not t.yuv) and ("yuv" in t.pbo.shape) == t.yuv
    finally:
        ir.close()
    assert "yuv" not in render_settings(_cfg("auto"), 30).as_dict()
    assert render_settings(_cfg("device"), 30).as_dict()["yuv"] == "device"


def test_bad_yuv_settings_are_named():
    with pytest.raises(ConfigError, match=r"render\.yuv is 'gpu'; expected auto, device or "
                                          "encoder"):
        load_params(overrides=["render.yuv=gpu"])
    with pytest.raises(ConfigError, match=r"render\.yuv=device with the gl backend needs "
                                          r"render\.readback=pbo"):
        load_params(overrides=["render.yuv=device", "render.readback=sync"])
    # backend auto is the GL backend (compute.backend.choose_backend): refused as early
    with pytest.raises(ConfigError, match=r"render\.yuv=device with the gl backend needs "
                                          r"render\.readback=pbo"):
        load_params(overrides=["render.backend=auto", "render.yuv=device",
                               "render.readback=sync"])
    assert load_params(overrides=[]).render.yuv == "auto"
    d = render_settings(_cfg("auto"), 30).as_dict()
    with pytest.raises(RenderSettingsError, match=r"s\.json: yuv 'rgb'; expected one of auto, "
                                                  "device, encoder"):
        RenderSettings.from_dict({**d, "yuv": "rgb"}, "s.json")
    from stages.engine.look import Look
    from stages.engine.render_targets import RenderTargets

    look = Look.from_settings(render_settings(_cfg("auto"), 30))
    with pytest.raises(ValueError, match="render.readback is sync"):
        RenderTargets(64, 36, look=look, readback="sync", yuv=True)


def test_unpack_names_a_short_read():
    with pytest.raises(ValueError, match=r"read back 100 bytes; the planes of 96x54 views and "
                                         r"their preview need \d+"):
        unpack(np.zeros(100, np.uint8), W, H)
    # 720p: five views and the 3 x 2 preview at 1.5 bytes a pixel, packed 4 to a texel
    assert stream_bytes(1280, 720) == 5 * 1280 * 720 * 3 // 2 + 1920 * 720 * 3 // 2
    tw, th = buffer_size(1280, 720)
    assert tw == 4096 and tw * th * 4 >= stream_bytes(1280, 720) > tw * (th - 1) * 4
