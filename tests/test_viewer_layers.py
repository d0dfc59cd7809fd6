"""The viewer's per-view ground-truth toggles (#33) in Debian's headless Chromium driven by
Playwright: a real render with layers (the stand-in planes of tests/fakes/fake_layers.py,
written by the real LayerWriter), each toggle shows that layer's colourised frame for the
current frame, and RGB comes back."""

from __future__ import annotations

import shutil
import threading

import numpy as np
import pytest

from stages.media.layers import read_layer
from stages.media.video import read_frames
from stages.viewer.layer_previews import colour_depth, colour_flow, colour_ids, colour_normals
from stages.viewer.server import make_server

from .test_viewer import CHROMIUM, CHROMIUM_ARGS, _video_pixels, _wait_all_videos_on


@pytest.fixture(scope="module")
def layered_dir(rendered, tmp_path_factory):
    from tests.fakes.fake_layers import write_fake_layers

    root, index, fails = rendered
    assert fails.empty
    d = tmp_path_factory.mktemp("view_layers") / "traj"
    shutil.copytree(root / index["path"].iloc[0], d)
    write_fake_layers(d, ("depth", "normals", "ids", "flow_fwd"))
    return d


@pytest.fixture(scope="module")
def page(layered_dir):
    from playwright.sync_api import sync_playwright

    server = make_server(layered_dir)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    host, port = server.server_address[:2]
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        pg = browser.new_page(viewport={"width": 1400, "height": 900})
        errors: list[str] = []
        pg.on("pageerror", lambda e: errors.append(str(e)))
        pg.goto(f"http://{host}:{port}/")
        pg.wait_for_function("window.wmforgeViewer && window.wmforgeViewer.ready",
                             timeout=30_000)
        pg.errors = errors  # type: ignore[attr-defined]
        yield pg
        browser.close()
    server.shutdown()
    server.server_close()


def test_each_view_toggles_rgb_depth_normals_ids_and_flow_on_the_current_frame(page,
                                                                                 layered_dir):
    assert page.locator(".toggles").count() == 5
    labels = page.locator('.toggles[data-view="back"] button').all_inner_texts()
    assert labels == ["RGB", "depth", "normals", "ids", "flow"]
    target = 9
    page.locator("#scrubber").fill(str(target))
    _wait_all_videos_on(page, target)
    rgb = _video_pixels(page, "back").astype(int)
    want = {"depth": colour_depth(read_layer(layered_dir, "back", "depth"))[target],
            "normals": colour_normals(read_layer(layered_dir, "back", "normals"))[target],
            "ids": colour_ids(read_layer(layered_dir, "back", "ids"))[target],
            "flow": colour_flow(read_layer(layered_dir, "back", "flow_fwd"))[target]}
    for toggle, ref in want.items():
        page.locator(f'.toggles[data-view="back"] button[data-toggle="{toggle}"]').click()
        page.wait_for_function(
            "t => window.wmforgeViewer.shown.back === t && "
            "window.wmforgeViewer.videos.back.src.includes('/layer/back.' + t)", arg=toggle)
        assert _wait_all_videos_on(page, target) == [target] * 6
        got = _video_pixels(page, "back").astype(int)
        err = np.abs(got - ref).mean()
        assert err < 8, (toggle, err)  # the colourised layer of this frame (H.264 preview)
        assert np.abs(got - rgb).mean() > 4 * err, toggle  # not the RGB picture
        assert got[:20].max() < 40, toggle  # sky rows: no surface / not valid → black
        print(f"{toggle}: err {err:.2f} against the colourised layer")
    # the ids toggle follows the scrubber like the RGB does
    page.locator('.toggles[data-view="back"] button[data-toggle="ids"]').click()
    page.wait_for_function("window.wmforgeViewer.shown.back === 'ids'")
    page.locator("#scrubber").fill("20")
    _wait_all_videos_on(page, 20)
    ids20 = colour_ids(read_layer(layered_dir, "back", "ids"))[20]
    assert np.abs(_video_pixels(page, "back").astype(int) - ids20).mean() < 8
    page.locator('.toggles[data-view="back"] button[data-toggle="rgb"]').click()
    page.wait_for_function("window.wmforgeViewer.shown.back === 'rgb' && "
                           "window.wmforgeViewer.videos.back.src.endsWith('/video/back.mp4')")
    _wait_all_videos_on(page, 20)
    ref = read_frames(layered_dir / "back.mp4")[20]
    assert np.abs(_video_pixels(page, "back").astype(int) - ref).mean() < 6
    # the other views kept their RGB all along
    assert page.evaluate("window.wmforgeViewer.shown") == {v: "rgb" for v in
                                                            ("back", "left", "right", "top",
                                                             "fp")}
    assert page.errors == []
