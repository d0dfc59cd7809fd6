"""RGB → YUV420 on the device gives the planes the encoder's own conversion (PyAV's reformat
through libswscale, as ``VideoWriter`` hands frames to x264) makes."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from stages.engine.compute.yuv import rgb_to_yuv420, yuv420_frame  # noqa: E402


def _swscale(img):
    import av

    f = av.VideoFrame.from_ndarray(np.ascontiguousarray(img), format="rgb24")
    y = f.reformat(format="yuv420p")
    h, w = img.shape[:2]
    sizes = ((h, w), (h // 2, w // 2), (h // 2, w // 2))
    return [np.frombuffer(p, np.uint8).reshape(-1, p.line_size)[:hh, :ww]
            for p, (hh, ww) in zip(y.planes, sizes, strict=True)]


def _images():
    rng = np.random.default_rng(7)
    noise = rng.integers(0, 256, (36, 64, 3), dtype=np.uint8)
    yy, xx = np.mgrid[0:90, 0:160]
    smooth = np.stack([xx * 255 // 159, yy * 255 // 89, (xx + yy) * 255 // 248], -1)
    edges = np.where(((xx // 7 + yy // 5) % 2)[..., None] == 1, [250, 30, 200], [10, 220, 40])
    return {"noise": noise, "smooth": smooth.astype(np.uint8), "edges": edges.astype(np.uint8)}


@pytest.mark.parametrize("name", ["noise", "smooth", "edges"])
def test_planes_match_swscale_within_one(name):
    img = _images()[name]
    ours = [p.numpy() for p in rgb_to_yuv420(torch.from_numpy(img))]
    ref = _swscale(img)
    for k, (a, b) in enumerate(zip(ours, ref, strict=True)):
        assert a.shape == b.shape, (k, a.shape, b.shape)
        d = np.abs(a.astype(int) - b.astype(int))
        assert d.max() <= 1, (name, "YUV"[k], d.max(), d.mean())
        assert d.mean() < 0.5, (name, "YUV"[k], d.mean())


def test_batched_views_and_the_frame_pyav_encodes(tmp_path):
    """Five views at once give each view's planes; the planes go into a yuv420p frame that
    x264 encodes with no conversion left, and it decodes back to the picture."""
    import av

    img = _images()["smooth"]
    views = torch.from_numpy(np.stack([img, img[::-1].copy(), img[:, ::-1].copy()]))
    y, u, v = rgb_to_yuv420(views)
    assert tuple(y.shape) == (3, 90, 160) and tuple(u.shape) == (3, 45, 80)
    one = rgb_to_yuv420(views[1])
    assert all(torch.equal(a[1], b) for a, b in zip((y, u, v), one, strict=True))
    frame = yuv420_frame(y[0].numpy(), u[0].numpy(), v[0].numpy())
    out = tmp_path / "v.mp4"
    with av.open(str(out), "w", format="mp4") as c:
        st = c.add_stream("libx264", rate=30, options={"crf": "0", "preset": "ultrafast"})
        st.width, st.height, st.pix_fmt = 160, 90, "yuv420p"
        frame.pts = 0
        for pkt in st.encode(frame):
            c.mux(pkt)
        for pkt in st.encode():
            c.mux(pkt)
    with av.open(str(out)) as c:
        dec = next(c.decode(video=0))
    planes = [np.frombuffer(p, np.uint8).reshape(-1, p.line_size)[:hh, :ww]
              for p, (hh, ww) in zip(dec.planes, ((90, 160), (45, 80), (45, 80)), strict=True)]
    assert np.array_equal(planes[0], y[0].numpy())  # lossless: the very planes
    assert np.array_equal(planes[1], u[0].numpy()) and np.array_equal(planes[2], v[0].numpy())


def test_odd_size_and_wrong_dtype_are_refused():
    with pytest.raises(ValueError, match="odd side"):
        rgb_to_yuv420(torch.zeros((35, 64, 3), dtype=torch.uint8))
    with pytest.raises(ValueError, match="uint8"):
        rgb_to_yuv420(torch.zeros((36, 64, 3), dtype=torch.float32))


def test_device_preview_is_the_encoders_preview_byte_for_byte():
    from stages.engine.compute.yuv import tile_preview as device_tile
    from stages.media.video import label_bitmap, tile_preview

    rng = np.random.default_rng(3)
    views = ("front", "back", "left", "right", "top")
    for h, w in ((54, 96), (90, 160), (36, 64)):
        imgs = rng.integers(0, 256, (5, h, w, 3), dtype=np.uint8)
        hh = h // 2 // 2 * 2
        labels = [label_bitmap(v, max(10, hh // 12)) for v in views]
        ours = device_tile(torch.from_numpy(imgs), labels).numpy()
        ref = tile_preview(dict(zip(views, imgs, strict=True)), views)
        assert ours.shape == ref.shape and np.array_equal(ours, ref), (h, w)


def test_packed_planes_round_trip_and_the_writer_checks_sizes(tmp_path):
    from stages.engine.compute.yuv import packed_planes, unpack_planes
    from stages.media.video import EncodeSettings, VideoWriter

    img = torch.from_numpy(np.stack([_images()["smooth"], _images()["edges"]]))
    pics = unpack_planes(packed_planes(img).numpy(), 2, 90, 160)
    for k, pic in enumerate(pics):
        want = rgb_to_yuv420(img[k])
        for got, ref in zip((pic.y, pic.u, pic.v), want, strict=True):
            assert np.array_equal(got, ref.numpy())
    w = VideoWriter(tmp_path / "a.mp4", 160, 90, 30, EncodeSettings())
    w.write(pics[0])
    with pytest.raises(ValueError, match="160x90 yuv420 picture for a 96x54 stream"):
        VideoWriter(tmp_path / "b.mp4", 96, 54, 30, EncodeSettings()).write(pics[1])
    assert w.close(1).exists()
