"""`wmforge view` end to end: the real server over a real Stage II render, driven in Debian's
headless Chromium by Playwright. Scrub to a frame and check the page shows the recorded action
and that every video element shows that frame — by its clock and by its decoded pixels."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from stages.core.trajectory import VIEWS
from stages.media.video import read_frames
from stages.viewer.server import ViewerError, make_server, trajectory_payload

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--autoplay-policy=no-user-gesture-required"]


@pytest.fixture(scope="module")
def render_dir(rendered) -> Path:
    root, index, fails = rendered
    assert fails.empty
    return root / index.set_index("trajectory").loc["traj_0001", "path"]


@pytest.fixture(scope="module")
def served(render_dir):
    server = make_server(render_dir)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    host, port = server.server_address[:2]
    yield f"http://{host}:{port}/"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def page(served):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        pg = browser.new_page(viewport={"width": 1400, "height": 900})
        errors: list[str] = []
        pg.on("pageerror", lambda e: errors.append(str(e)))
        pg.goto(served)
        pg.wait_for_function("window.wmforgeViewer && window.wmforgeViewer.ready",
                             timeout=30_000)
        pg.errors = errors  # type: ignore[attr-defined]
        yield pg
        browser.close()


def _wait_all_videos_on(page, frame: int) -> list[int]:
    page.wait_for_function(
        "f => window.wmforgeViewer.allVideos().every(v => window.wmforgeViewer.frameOf(v) === f)",
        arg=frame, timeout=20_000)
    return page.evaluate("() => window.wmforgeViewer.allVideos().map(v => "
                         "window.wmforgeViewer.frameOf(v))")


def _video_pixels(page, view: str) -> np.ndarray:
    """The picture a video element shows now, read back through a canvas (RGB)."""
    flat = page.evaluate("""view => {
        const v = window.wmforgeViewer.videos[view];
        const c = document.createElement('canvas');
        c.width = v.videoWidth; c.height = v.videoHeight;
        const g = c.getContext('2d');
        g.drawImage(v, 0, 0);
        return [c.width, c.height, Array.from(g.getImageData(0, 0, c.width, c.height).data)];
    }""", view)
    w, h, data = flat
    return np.array(data, dtype=np.uint8).reshape(h, w, 4)[..., :3]


def test_scrubbing_moves_every_view_to_the_recorded_frame_and_its_action(page, render_dir):
    frames = pd.read_parquet(render_dir / "frames.parquet").sort_values("frame")
    actions = frames["action"].tolist()
    n = len(actions)
    assert page.locator("#frame-count").inner_text() == str(n - 1)
    assert page.locator("video").count() == len(VIEWS) + 1  # five views + the tiled preview

    decoded = {v: read_frames(render_dir / f"{v}.mp4") for v in ("back", "left", "top")}
    for target in (17, 5, n - 1):
        page.locator("#scrubber").fill(str(target))
        shown = _wait_all_videos_on(page, target)
        assert shown == [target] * (len(VIEWS) + 1)
        assert page.locator("#frame-number").inner_text() == str(target)
        assert page.locator("#action-label").inner_text() == actions[target]
        lit = sorted(page.locator(".key.on").all_inner_texts())
        want = {"IDLE": []}.get(actions[target], sorted(actions[target]))
        assert lit == want, (target, actions[target], lit)
        # the pixels on screen are that frame's pixels (PyAV decode of the same file)
        for view, ref in decoded.items():
            got = _video_pixels(page, view).astype(int)
            err = np.abs(got - ref[target]).mean()
            assert err < 6, (view, target, err)
            others = [np.abs(got - ref[f]).mean() for f in range(n)
                      if f != target and np.abs(ref[f].astype(int) - ref[target]).mean() > 3]
            if view != "top":  # the chase views change from frame to frame; the top one less
                assert len(others) > n // 2, (view, target)
            assert all(e > err for e in others), (view, target, err, min(others))
            print(f"{view} frame {target}: err {err:.2f}, "
                  f"nearest other frame {min(others, default=0):.2f}")
    assert page.errors == []


def test_clicking_an_event_jumps_to_it(page, render_dir):
    frames = pd.read_parquet(render_dir / "frames.parquet").sort_values("frame")
    events = frames[frames["event"] != "none"]
    assert len(events) >= 1 and events["event"].iloc[0] == "spawn"
    page.locator("#scrubber").fill("20")
    _wait_all_videos_on(page, 20)
    first = events.iloc[0]
    page.locator(f"#events button[data-frame='{int(first['frame'])}']").first.click()
    assert _wait_all_videos_on(page, int(first["frame"])) == [int(first["frame"])] * 6
    assert page.locator("#action-label").inner_text() == first["action"]


def test_play_runs_all_views_in_sync_and_pause_snaps_them_to_one_frame(page):
    page.locator("#scrubber").fill("0")
    _wait_all_videos_on(page, 0)
    page.locator("#play").click()
    page.wait_for_function("window.wmforgeViewer.frame >= 6", timeout=20_000)
    page.locator("#play").click()  # pause
    f = page.evaluate("window.wmforgeViewer.frame")
    assert f >= 6
    assert _wait_all_videos_on(page, f) == [f] * 6


def test_3d_plot_and_timeline_are_drawn(page, tmp_path):
    """Non-blank canvases; a screenshot of the whole page for the README."""
    for cid in ("plot3d", "timeline"):
        colours = page.evaluate("""id => {
            const c = document.getElementById(id), g = c.getContext('2d');
            const d = g.getImageData(0, 0, c.width, c.height).data, seen = new Set();
            for (let i = 0; i < d.length; i += 4 * 7) seen.add(d[i] << 16 | d[i+1] << 8 | d[i+2]);
            return seen.size;
        }""", cid)
        assert colours > 8, (cid, colours)
    page.screenshot(path=str(tmp_path / "viewer.png"))
    print("screenshot:", tmp_path / "viewer.png")
    assert (tmp_path / "viewer.png").stat().st_size > 10_000


def test_payload_matches_the_trajectory_files(render_dir):
    p = trajectory_payload(render_dir)
    frames = pd.read_parquet(render_dir / "frames.parquet").sort_values("frame")
    cams = pd.read_parquet(render_dir / "cameras.parquet")
    assert p["frames"] == len(frames) and p["action"] == frames["action"].tolist()
    assert sorted(p["videos"]) == sorted(VIEWS) and p["preview"] == "/video/preview.mp4"
    top = cams[cams["view"] == "top"].sort_values("frame")
    # the top camera looks down: its viewing direction is -Z
    assert all(fw[2] < -0.9 for fw in p["cameras"]["top"]["fwd"])
    assert p["cameras"]["top"]["pos"][3] == pytest.approx(
        top[["pos_x", "pos_y", "pos_z"]].iloc[3].tolist(), abs=1e-4)


def test_server_answers_range_requests_and_refuses_other_files(served, render_dir):
    size = (render_dir / "back.mp4").stat().st_size
    req = urllib.request.Request(served + "video/back.mp4", headers={"Range": "bytes=100-199"})
    with urllib.request.urlopen(req) as r:
        assert r.status == 206 and r.headers["Content-Range"] == f"bytes 100-199/{size}"
        assert r.read() == (render_dir / "back.mp4").read_bytes()[100:200]
    for bad in ("video/meta.json", "static/../server.py", "video/..%2Fmeta.json"):
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(served + bad)
        assert err.value.code == 404
    with urllib.request.urlopen(served + "static/viewer.js") as r:
        body = r.read().decode()
    assert "http://" not in body and "https://" not in body  # nothing from a CDN


def test_cli_names_a_directory_that_is_not_a_trajectory(tmp_path):
    with pytest.raises(ViewerError, match="frames.parquet"):
        trajectory_payload(tmp_path)
    r = subprocess.run([sys.executable, "-m", "stages.cli", "view", str(tmp_path)],
                       capture_output=True, text=True)
    assert r.returncode == 2 and str(tmp_path) in r.stderr


def test_cli_serves_and_prints_its_address(render_dir):
    proc = subprocess.Popen([sys.executable, "-m", "stages.cli", "view", str(render_dir),
                             "--port", "0"], stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        url = line.split(" at ")[1].split()[0]
        deadline = time.time() + 10
        while True:
            try:
                with urllib.request.urlopen(url + "api/trajectory") as r:
                    data = json.loads(r.read())
                break
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(0.1)
        assert data["name"] == render_dir.name and data["rendered"]
    finally:
        proc.terminate()
        proc.wait(10)
