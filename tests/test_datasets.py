"""Captions, WebDataset shards, LeRobot v3 export and the dataset card, on real Stage II renders
(the session's `rendered` fixture: three 24-frame trajectories on AlpineMeadow)."""

from __future__ import annotations

import hashlib
import io
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pandas as pd
import pytest

from stages.caption import caption_clips
from stages.config import load_params
from stages.core.actions import ACTIONS, NON_FORWARD
from stages.core.trajectory import VIEWS
from stages.datasets.clip_spans import ClipError, clip_spans, list_clips
from stages.datasets.grounded_caption import holds
from stages.inventory import run_inventory
from stages.media.video import EncodeSettings, VideoWriter, copy_clip, read_frames
from stages.shard import write_shards


@pytest.fixture(scope="module")
def inventory(sample_library):
    cfg = load_params()
    return run_inventory(sample_library, cfg.inventory, "overrides.yaml")


@pytest.fixture(scope="module")
def clips(rendered):
    root, index, fails = rendered
    assert fails.empty
    return list_clips(root, index, 0.0, 1.0)


@pytest.fixture(scope="module")
def captions(clips, inventory):
    return caption_clips(clips, inventory.levels, inventory.characters, load_params())


def _axis(r) -> tuple[float, float]:
    """World x, y of a camera's optical axis (+z of an OpenCV camera) from its quaternion."""
    w, x, y, z = r.rot_w, r.rot_x, r.rot_y, r.rot_z
    return 2 * (x * z + w * y), 2 * (y * z - w * x)


def _decode_bytes(data: bytes) -> list[np.ndarray]:
    import av

    with av.open(io.BytesIO(data)) as c:
        return [f.to_ndarray(format="rgb24") for f in c.decode(video=0)]


# ------------------------------------------------------------------------------ captions

def test_grounded_caption_names_level_character_views_and_each_recorded_hold(clips, captions):
    assert captions["key"].tolist() == [c.key for c in clips]
    for clip, row in zip(clips, captions.to_dict("records"), strict=True):
        cap = row["caption"]
        assert "AlpineMeadow" in cap and "nature" in cap and "day lighting" in cap
        assert "Alex" in cap and "humanoid" in cap
        assert "Five synchronized views" in cap
        for v in VIEWS:
            assert row[f"caption_{v}"].startswith(cap.split(" Over ")[0])
        frames = pd.read_parquet(clip.render_dir / "frames.parquet").sort_values("frame")
        hs = holds(frames["action"].tolist())
        phrases = json.loads(row["phrases_json"])
        # one phrase per recorded hold, covering every frame, in order
        assert [(p["frame"], p["end"]) for p in phrases] == [(h.start, h.end) for h in hs]
        words = {"W": "forward", "S": "backward", "A": "strafes left", "D": "strafes right",
                 "WA": "forward-left", "WD": "forward-right", "SA": "backs away to the left",
                 "SD": "backs away to the right", "IDLE": "stands still"}
        pos = 0
        for h in hs:
            at = cap.find(words[h.action], pos)
            assert at >= 0, (h, cap)
            pos = at
        assert "top-down camera looks straight down" in row["caption_top"]


class _StandInVLM(BaseHTTPRequestHandler):
    """A local stand-in for a hosted OpenAI-compatible VLM: answers from the request content."""

    calls: list[dict] = []
    fail_first: list[int] = []

    def log_message(self, *a):
        pass

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).calls.append({"auth": self.headers.get("Authorization"), "body": body})
        if self.fail_first:
            self.fail_first.pop()
            self.send_response(503)
            self.end_headers()
            return
        parts = body["messages"][0]["content"]
        img = next(p for p in parts if p["type"] == "image_url")["image_url"]["url"]
        facts = next(p for p in parts if p["type"] == "text")["text"]
        h = hashlib.sha256(img.encode()).hexdigest()[:8]
        text = f"stand-in caption of image {h}; facts seen: {'forward' in facts}"
        out = json.dumps({"choices": [{"message": {"role": "assistant", "content": text}}]})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out.encode())


def test_vlm_backend_against_a_local_stand_in_server_retries_caches_and_reuses_keyframes(
        clips, inventory, tmp_path, monkeypatch):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _StandInVLM)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    monkeypatch.setenv("WMFORGE_VLM_API_KEY", "sk-test")
    cfg = load_params(overrides=["caption.backend=vlm", f"caption.vlm.base_url={url}",
                                 "caption.vlm.keyframe_s=0.2", "caption.vlm.max_retries=2",
                                 f"caption.vlm.cache_dir={tmp_path / 'cache'}"])
    _StandInVLM.calls, _StandInVLM.fail_first = [], [1]
    import stages.datasets.vlm_caption as vc

    monkeypatch.setattr(vc.time, "sleep", lambda s: None)
    table = caption_clips(clips[:2], inventory.levels, inventory.characters, cfg)
    kf = [json.loads(x) for x in table["keyframes_json"]]
    # 24 frames at 30 fps, a key frame every 0.2 s (6 frames): frames 0, 6, 12, 18
    assert [[k["frame"] for k in ks] for ks in kf] == [[0, 6, 12, 18]] * 2
    assert len(_StandInVLM.calls) == 8 + 1  # one 503 retried
    assert _StandInVLM.calls[0]["auth"] == "Bearer sk-test"
    assert all(c["body"]["model"] == cfg.caption.vlm.model for c in _StandInVLM.calls)
    assert table["caption"].iloc[0].startswith("[0.0 s] stand-in caption of image")
    assert "[0.6 s]" in table["caption"].iloc[0]
    # a re-run never asks twice
    again = caption_clips(clips[:2], inventory.levels, inventory.characters, cfg)
    assert len(_StandInVLM.calls) == 9
    assert again["caption"].tolist() == table["caption"].tolist()
    server.shutdown()
    server.server_close()
    # an unreachable endpoint: a clear error naming it, after the bounded retries
    cfg2 = load_params(overrides=["caption.backend=vlm", f"caption.vlm.base_url={url}",
                                  "caption.vlm.max_retries=1", "caption.vlm.timeout_s=2",
                                  f"caption.vlm.cache_dir={tmp_path / 'cache2'}"])
    with pytest.raises(vc.VLMError, match=r"unreachable after 2 attempts.*caption.backend"):
        caption_clips(clips[:1], inventory.levels, inventory.characters, cfg2)


# ------------------------------------------------------------------------------ clips

def test_clip_cut_at_keyframes_is_exact_and_not_re_encoded(tmp_path):
    rng = np.random.default_rng(0)
    src = tmp_path / "src.mp4"
    w = VideoWriter(src, 64, 48, 30, EncodeSettings(gop=8, crf=18))
    for i in range(24):
        img = np.full((48, 64, 3), (i * 10) % 256, np.uint8)
        img[:, :8] = rng.integers(0, 255, (48, 8, 3))
        w.write(img)
    w.close(24)
    ref = read_frames(src)
    dst = copy_clip(src, tmp_path / "c.mp4", 8, 8, 30)
    got = read_frames(dst)
    assert len(got) == 8
    for a, b in zip(got, ref[8:16], strict=True):
        assert np.array_equal(a, b)  # same packets: bit-identical decode
    with pytest.raises(ValueError, match="keyframe"):
        copy_clip(src, tmp_path / "bad.mp4", 4, 8, 30)
    assert clip_spans(100, 30, 1.0, 0.5, 30) == [(0, 30), (30, 60), (60, 90)]
    assert clip_spans(100, 30, 0.0, 1.0, 30) == [(0, 100)]
    with pytest.raises(ClipError, match="clips.clip_s"):
        clip_spans(100, 30, 0.5, 0.5, 30)


# ------------------------------------------------------------------------------ shards

def test_shards_read_back_with_webdataset_one_action_per_decoded_frame_byte_identical(
        clips, captions, inventory, tmp_path):
    import webdataset as wds

    cfg = load_params().shard
    idx1 = write_shards(clips, captions, inventory.levels, tmp_path / "a", cfg)
    idx2 = write_shards(clips, captions, inventory.levels, tmp_path / "b", cfg)
    tars = sorted(p.name for p in (tmp_path / "a").glob("*.tar"))
    assert tars == ["shard-000000.tar"] and idx1.equals(idx2)
    for t in tars:  # same inputs, same config: same bytes
        assert (tmp_path / "a" / t).read_bytes() == (tmp_path / "b" / t).read_bytes()
    samples = list(wds.WebDataset(str(tmp_path / "a" / tars[0]), shardshuffle=False))
    assert [s["__key__"] for s in samples] == [c.key for c in clips]
    turned: list[float] = []
    for s, clip in zip(samples, clips, strict=True):
        assert "." not in s["__key__"]
        assert set(s) >= {f"{v}.mp4" for v in VIEWS} | {"json", "txt", "frames.parquet",
                                                          "cameras.parquet"} | {
            f"{v}.camera.json" for v in VIEWS}
        meta = json.loads(s["json"])
        assert meta["schema_version"] == 2 and meta["clip_id"] == s["__key__"]
        assert meta["caption_backend"] == "grounded" and meta["caption_keyframes"] == []
        # lineage: the engine and its version, the code that made the bytes, the seed, light
        src = meta["source"]
        assert src["engine"] == "embedded" and src["engine_version"].startswith("panda3d ")
        assert re.fullmatch(r"\d[\w.]*\+[0-9a-f]{16}", src["code_version"])
        assert re.fullmatch(r"\d[\w.]*\+[0-9a-f]{16}", src["stage1_code_version"])
        assert src["trajectory_seed"] == 0 and src["lighting"] in ("day", "dusk", "night",
                                                                   "interior")
        seq = meta["controls"]["action_sequence"]
        frames = pd.read_parquet(io.BytesIO(s["frames.parquet"]))
        assert [a["action"] for a in seq] == frames["action"].tolist()
        # turning is in the labels: the yaw deltas sum to the net yaw change of the clip
        yaw = frames["yaw_deg"].to_numpy(np.float64)
        net = (yaw[-1] - yaw[0] + 180) % 360 - 180
        assert sum(a["yaw_delta_deg"] for a in seq) == pytest.approx(net, abs=1e-3)
        turned.append(max(abs(a["yaw_delta_deg"]) for a in seq))
        cams = pd.read_parquet(io.BytesIO(s["cameras.parquet"]))
        b = cams[cams["view"] == "back"].sort_values("frame")
        fwd = [np.degrees(np.arctan2(_axis(r)[1], _axis(r)[0])) for r in b.itertuples()]
        vnet = (fwd[-1] - fwd[0] + 180) % 360 - 180
        assert sum(a["view_yaw_delta_deg"] for a in seq) == pytest.approx(vnet, abs=1e-3)
        fx = meta["camera"]["intrinsics"][0][0]
        for a in seq:  # a right turn (clockwise, negative yaw change) moves the mouse right
            assert a["mouse_delta"][0] == pytest.approx(
                -fx * np.tan(np.radians(a["view_yaw_delta_deg"])), abs=1e-3)
        for v in VIEWS:
            decoded = _decode_bytes(s[f"{v}.mp4"])
            assert len(decoded) == len(seq) == clip.frames  # one action per decoded frame
            assert len(meta["views"][v]["extrinsics_world_from_camera"]) == len(decoded)
        assert meta["duration"] == pytest.approx(clip.frames / 30)
        assert meta["resolution"] == [192, 108]
        k = np.array(meta["camera"]["intrinsics"])
        assert k.shape == (3, 3) and k[0, 2] == 96 and k[1, 2] == 54
        assert s["txt"].decode().strip() == captions.set_index("key").loc[clip.key, "caption"]
        # an extrinsic is the recorded camera pose: its translation is the recorded position
        cams = pd.read_parquet(io.BytesIO(s["cameras.parquet"]))
        back = cams[cams["view"] == "back"].sort_values("frame")
        ext = np.array(meta["views"]["back"]["extrinsics_world_from_camera"])
        assert np.allclose(ext[:, :3, 3], back[["pos_x", "pos_y", "pos_z"]], atol=1e-5)
        assert np.allclose(np.linalg.det(ext[:, :3, :3]), 1, atol=1e-4)
        assert [p["frame"] for p in meta["character"]["poses"]] == list(range(clip.frames))
        for v in ("back", "left", "right", "top"):  # §6.3: each view says when it collapsed
            col = cams[cams["view"] == v].sort_values("frame")["collapsed"]
            assert meta["views"][v]["collapsed"] == [bool(x) for x in col]
            assert meta["views"][v]["collapsed_share"] == pytest.approx(col.mean(), abs=1e-6)
    assert max(turned) > 0.1  # some clip turns, and its turning is in its labels
    row = idx1.set_index("key").loc[clips[0].key]
    assert row["shard"] == "shard-000000.tar" and row["category"] == "nature"
    assert row["frames"] == 24 and row["duration_s"] == pytest.approx(0.8)


def test_shards_split_at_the_size_limit_and_every_sample_lands_once(clips, captions, inventory,
                                                                     tmp_path):
    import webdataset as wds

    one = sum((clips[0].render_dir / f"{v}.mp4").stat().st_size for v in VIEWS)
    cfg = load_params().shard
    cfg.max_shard_bytes = int(one * 1.5)  # tiny test renders: below the config's 1 MB floor
    idx = write_shards(clips, captions, inventory.levels, tmp_path, cfg)
    tars = sorted(tmp_path.glob("*.tar"))
    assert len(tars) == len(clips)  # each sample alone: two do not fit under the limit
    seen = []
    for t in tars:
        keys = [s["__key__"] for s in wds.WebDataset(str(t), shardshuffle=False)]
        assert idx[idx["shard"] == t.name]["key"].tolist() == keys
        seen += keys
    assert sorted(seen) == sorted(c.key for c in clips)


def test_clips_shorter_than_the_trajectory_are_cut_and_labelled_per_clip(trajs, inventory,
                                                                          tmp_path):
    """Render one trajectory with a 6-frame GOP and cut 12-frame clips."""
    from stages.render import run_render

    from .conftest import small_render_cfg

    sub = tmp_path / "t" / "NatureValley__AlpineMeadow"
    import shutil

    shutil.copytree(trajs / "NatureValley__AlpineMeadow" / "traj_0002", sub / "traj_0002")
    index, fails = run_render(small_render_cfg(gop_s=0.2, preview=False), tmp_path / "t",
                              tmp_path / "r")
    assert fails.empty
    cl = list_clips(tmp_path / "r", index, 0.4, 0.1)
    assert [(c.start, c.end) for c in cl] == [(0, 12), (12, 24)]
    assert [c.key for c in cl] == ["NatureValley__AlpineMeadow__traj_0002__c000",
                                   "NatureValley__AlpineMeadow__traj_0002__c001"]
    caps = caption_clips(cl, inventory.levels, inventory.characters, load_params())
    idx = write_shards(cl, caps, inventory.levels, tmp_path / "s", load_params().shard)
    assert idx["frames"].tolist() == [12, 12] and idx["start_frame"].tolist() == [0, 12]
    import webdataset as wds

    full = read_frames(cl[0].render_dir / "back.mp4")
    frames = pd.read_parquet(cl[0].render_dir / "frames.parquet").sort_values("frame")
    for s, c in zip(wds.WebDataset(str(tmp_path / "s" / "shard-000000.tar"),
                                   shardshuffle=False), cl, strict=True):
        meta = json.loads(s["json"])
        got = _decode_bytes(s["back.mp4"])
        assert len(got) == 12 and all(np.array_equal(a, b)
                                      for a, b in zip(got, full[c.start:c.end], strict=True))
        assert [a["action"] for a in meta["controls"]["action_sequence"]] == \
            frames["action"].tolist()[c.start:c.end]
        assert meta["source"]["start_frame"] == c.start


# ------------------------------------------------------------------------------ LeRobot

def test_lerobot_v3_export_layout_reads_back(clips, captions, tmp_path):
    """lerobot itself is not installed here (it pulls a CUDA torch and a torchvision that does
    not load beside the CPU build): check the documented v3.0 layout and read every file back."""
    from stages.datasets.lerobot_v3 import export_lerobot

    tasks = dict(zip(captions["key"], captions["caption"], strict=True))
    info = export_lerobot(clips, tasks, tmp_path / "lr")
    root = tmp_path / "lr"
    on_disk = json.loads((root / "meta" / "info.json").read_text())
    assert on_disk == info and info["codebase_version"] == "v3.0"
    assert info["total_episodes"] == len(clips) and info["total_frames"] == 24 * len(clips)
    assert info["features"]["observation.images.back"]["shape"] == [108, 192, 3]
    assert info["features"]["action"]["names"] == [*ACTIONS, "view_yaw_delta_deg"]
    eps = pd.read_parquet(root / "meta" / "episodes" / "chunk-000" / "file-000.parquet")
    data = pd.read_parquet(root / info["data_path"].format(chunk_index=0, file_index=0))
    assert len(data) == info["total_frames"] and data["index"].tolist() == list(range(len(data)))
    tasks_df = pd.read_parquet(root / "meta" / "tasks.parquet")
    assert sorted(tasks_df.index) == sorted(set(tasks.values()))
    for ep in eps.to_dict("records"):
        rows = data.iloc[ep["dataset_from_index"]:ep["dataset_to_index"]]
        assert (rows["episode_index"] == ep["episode_index"]).all() and len(rows) == ep["length"]
        clip = clips[ep["episode_index"]]
        frames = pd.read_parquet(clip.render_dir / "frames.parquet").sort_values("frame")
        got = [ACTIONS[int(np.argmax(a[:-1]))] for a in rows["action"]]
        rec = frames["action"].tolist()  # action[t]: the input applied after frame t
        assert got == rec[1:] + rec[-1:] and rows["action.valid"].tolist()[-1] is False
        # the mouse: the back view's yaw change from t to t+1, summing to its net turn
        turn = np.array([a[-1] for a in rows["action"]], np.float64)
        pose = np.stack(list(rows["observation.camera.back.pose"])).astype(np.float64)
        w, x, y, z = pose[:, 3], pose[:, 4], pose[:, 5], pose[:, 6]
        fwd = np.degrees(np.arctan2(2 * (y * z - w * x), 2 * (x * z + w * y)))
        assert turn[-1] == 0
        assert turn.sum() == pytest.approx((fwd[-1] - fwd[0] + 180) % 360 - 180, abs=0.05)
        assert np.allclose(np.stack(list(rows["observation.state"]))[:, :3],
                           frames[["pos_x", "pos_y", "pos_z"]], atol=1e-5)
        assert tasks_df.loc[ep["tasks"][0], "task_index"] == rows["task_index"].iloc[0]
        for v in VIEWS:
            key = f"observation.images.{v}"
            p = root / info["video_path"].format(
                video_key=key, chunk_index=ep[f"videos/{key}/chunk_index"],
                file_index=ep[f"videos/{key}/file_index"])
            assert len(read_frames(p)) == ep["length"]
            assert ep[f"videos/{key}/to_timestamp"] == pytest.approx(ep["length"] / 30)
        k = np.stack(list(rows["observation.camera.back.intrinsics"]))
        assert np.allclose(k[0], [96 / np.tan(np.radians(45)), 96 / np.tan(np.radians(45)),
                                  96, 54], atol=1e-3)
    stats = json.loads((root / "meta" / "stats.json").read_text())
    assert set(stats) >= {"action", "observation.state", "observation.images.back"}
    assert stats["observation.state"]["count"] == [info["total_frames"]]


# ------------------------------------------------------------------------------ report

def test_report_metrics_match_the_recorded_actions_and_plots_are_written(rendered, trajs,
                                                                         sample_library,
                                                                         tmp_path):
    from stages.report import main as report_main

    root, index, _ = rendered
    inv = tmp_path / "inv"
    cfg = load_params()
    r = run_inventory(sample_library, cfg.inventory, "overrides.yaml")
    from stages.inventory import write_parquet

    write_parquet(r.levels, inv / "levels.parquet")
    out = tmp_path / "report"
    assert report_main(["--renders", str(root), "--trajectories", str(trajs), "--inventory",
                        str(inv), "--out", str(out)]) == 0
    m = json.loads((out / "metrics.json").read_text())
    acts = []
    for row in index.to_dict("records"):
        acts += pd.read_parquet(root / row["path"] / "frames.parquet")["action"].tolist()
    assert m["frames"] == len(acts) == 72 and m["clips"] == 3
    for a in ACTIONS:
        assert m["action_share"][a] == pytest.approx(acts.count(a) / len(acts), abs=1e-6)
    assert m["non_forward_share"] == pytest.approx(
        sum(acts.count(a) for a in NON_FORWARD) / len(acts), abs=1e-6)
    assert m["levels_by_category"] == {"nature": 1}
    assert m["hours_by_resolution"] == {"192x108": pytest.approx(72 / 30 / 3600, abs=1e-6)}
    assert m["pass_rate"]["stage2"] == 1.0
    card = (out / "card" / "README.md").read_text()
    assert "46.6%" in card and "AlpineMeadow" in card
    assert "## Views" in card
    assert "applied after observing frame t" in card and "<view>.camera.json" in card
    cams = [pd.read_parquet(root / r["path"] / "cameras.parquet") for r in
            index.to_dict("records")]
    for v in ("back", "left", "right", "top"):  # the per-view collapsed share, from the data
        want = np.mean([c[c["view"] == v]["collapsed"].mean() for c in cams])
        assert m["views"][v]["collapsed_share_mean"] == pytest.approx(want, abs=1e-6)
        assert f"| {v} | {100 * want:.1f}% |" in card
    for png in ("hours_by_resolution_view", "levels_by_category", "action_shares",
                "transitions", "hold_lengths", "pass_rates", "coverage"):
        data = (out / "card" / f"{png}.png").read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 3000, png
        assert f"({png}.png)" in card


def test_quality_score_is_the_levels_selection_pass_rate(clips, captions, inventory, tmp_path):
    import webdataset as wds

    sel = pd.DataFrame({"level_id": ["NatureValley/AlpineMeadow"], "pass_rate": [0.6],
                        "aes_mean": [41.5], "lum_mean": [60.2], "retained": [True]})
    write_shards(clips[:1], captions, inventory.levels, tmp_path, load_params().shard, sel,
                 "brisque")
    s = next(iter(wds.WebDataset(str(tmp_path / "shard-000000.tar"), shardshuffle=False)))
    meta = json.loads(s["json"])
    assert meta["quality_score"] == 0.6
    assert meta["quality"]["level_aes_mean"] == 41.5 and meta["quality"]["scorer"] == "brisque"
    assert meta["quality"]["aligned_fraction"] >= 0.95
