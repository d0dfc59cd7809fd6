"""Curation on the real engine: renderability screening (each detector tripped by a sample
level built to trip it), luminance and aesthetic scoring, selection, persistent pools."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from stages.config import SelectConfig, load_params
from stages.core.trajectory import VIEWS
from stages.inventory import run_inventory, write_parquet
from stages.media.video import read_frames
from stages.pools import assign, build_pools, pass_order
from stages.quality.scorers import BrisqueScorer, ScorerError, luminance
from stages.score import score_videos
from stages.screen import ReviewError, read_review, screen_levels
from stages.select import main as select_main
from stages.select import select_levels

TRAPS = {"QATraps/InvisibleFloor": "hovering", "QATraps/GhostHedges": "interpenetration",
         "QATraps/SpikeField": "no_walkable_region", "QATraps/MissingBuffers": "load_failure"}
GOOD = "NatureValley/AlpineMeadow"
SMALL = ["screen.clips=2", "screen.clip_s=1.0", "screen.width=96", "screen.height=54",
         "screen.characters=[CharacterPack/Alex]"]


@pytest.fixture(scope="module")
def screened(sample_library, tmp_path_factory):
    base = tmp_path_factory.mktemp("screen")
    overrides = SMALL + [f"library.root={sample_library}"]
    cfg = load_params(overrides=overrides)
    inv = run_inventory(sample_library, cfg.inventory, "overrides.yaml")
    lv = inv.levels[inv.levels["level_id"].isin([*TRAPS, GOOD])]
    assert len(lv) == 5 and lv["enabled"].all()  # the inventory cannot tell: only the engine can
    write_parquet(lv, base / "inv" / "levels.parquet")
    write_parquet(inv.characters, base / "inv" / "characters.parquet")

    clips, levels = screen_levels(cfg, base / "inv", base / "out", {}, sample_library)
    return cfg, base, clips, levels, overrides


def test_each_detector_trips_on_the_level_built_for_it_and_a_good_level_passes(screened):
    _, base, clips, levels, _ = screened
    by = levels.set_index("level_id")
    assert by.loc[GOOD, "verdict"] == "pass" and by.loc[GOOD, "reasons"] == ""
    for lid, reason in TRAPS.items():
        assert by.loc[lid, "verdict"] == "fail", lid
        assert by.loc[lid, "auto_reasons"].split(",") == [reason], (lid, by.loc[lid])
    c = clips.set_index(["level_id", "clip"])
    # the measurements behind the verdicts
    floor = clips[clips["level_id"] == "QATraps/InvisibleFloor"]
    assert (floor["median_gap_m"] > 0.7).all() and (floor["hover_gap_share"] > 0.9).all()
    hedges = clips[clips["level_id"] == "QATraps/GhostHedges"]
    assert (hedges["max_penetration_m"] > 0.3).any()
    good = clips[clips["level_id"] == GOOD]
    assert len(good) == 2 and (good["max_penetration_m"] < 0.05).all()
    assert (good["median_gap_m"].abs() < 0.1).all()
    assert c.loc[("QATraps/SpikeField", 0), "stage1"] == "no_walkable_region"
    assert c.loc[("QATraps/MissingBuffers", -1), "stage1"] == "load_failed"
    # the failure names the library's file, never the slot that happened to run it (which
    # slot ran a level is scheduling: the table's bytes must not depend on it)
    detail = by.loc["QATraps/MissingBuffers", "detail"]
    assert "slots" not in detail and "QATraps/Maps/MissingBuffers.bin" in detail, detail
    for lid in [*TRAPS, GOOD]:
        png = base / "out" / by.loc[lid, "contact_sheet"]
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", lid


def test_review_file_overrides_the_automatic_verdict(screened, sample_library, tmp_path):
    cfg, base, _, _, overrides = screened
    review = tmp_path / "screen.yaml"
    review.write_text("overrides:\n  QATraps/InvisibleFloor: {verdict: pass, note: 'glass "
                      "bridge, intended'}\n  NatureValley/AlpineMeadow: {verdict: fail, note: "
                      "texture flicker}\n")

    # a render of an older key beside the current one (code or settings changed since): the
    # rerun removes it, as `render --prune` does, and keeps the current clips
    lvl = base / "out" / "work" / "renders" / Path(GOOD)
    (cur,) = [d for d in lvl.iterdir() if d.is_dir()]
    stale = lvl / "local-19700101T000000Z-000000001"
    shutil.copytree(cur, stale)
    prog = stale / "progress.log"
    prog.write_text(re.sub(r"key=\w+", "key=0000000000000000", prog.read_text()))
    clips, levels = screen_levels(cfg, base / "inv", base / "out", read_review(review),
                                  sample_library)
    assert not stale.exists() and [d for d in lvl.iterdir() if d.is_dir()] == [cur]
    assert len(clips[clips["level_id"] == GOOD]) == 2
    by = levels.set_index("level_id")
    assert by.loc["QATraps/InvisibleFloor", "auto_verdict"] == "fail"
    assert by.loc["QATraps/InvisibleFloor", "verdict"] == "pass"
    assert by.loc["QATraps/InvisibleFloor", "review_note"] == "glass bridge, intended"
    assert by.loc[GOOD, "verdict"] == "fail" and by.loc[GOOD, "auto_verdict"] == "pass"
    bad = tmp_path / "bad.yaml"
    bad.write_text("overrides:\n  Some/Level: {verdict: maybe}\n")
    with pytest.raises(ReviewError, match=r"bad.yaml.*Some/Level.*pass\|fail"):
        read_review(bad)


def test_luminance_and_brisque_per_view_and_a_broken_video_is_a_row(screened, tmp_path):
    _, base, clips, _, _ = screened
    traj = clips[clips["level_id"] == GOOD]["trajectory"].iloc[0]
    d = next((base / "out" / "work" / "renders" / "NatureValley" / "AlpineMeadow").glob(
        f"*/{traj}"))
    videos = [{"level_id": GOOD, "clip": 0, "view": v, "video": d / f"{v}.mp4"} for v in VIEWS]
    broken = tmp_path / "broken.mp4"
    broken.write_bytes(b"\x00\x00\x00\x18ftypmp42" + b"\x00" * 500)
    videos.append({"level_id": GOOD, "clip": 1, "view": "back", "video": broken})
    table = score_videos(videos, BrisqueScorer(), 4)
    assert table["ok"].tolist() == [True] * 5 + [False]
    assert table["reason"].iloc[-1].startswith("decode_failed")
    frames = read_frames(d / "back.mp4")
    picks = [frames[round(i * (len(frames) - 1) / 3)] for i in range(4)]
    want = [float((f.astype(np.float64) @ np.array([0.2126, 0.7152, 0.0722])).mean())
            for f in picks]
    row = table.iloc[0]
    assert row["frames_sampled"] == 4
    assert row["lum_mean"] == pytest.approx(np.mean(want))
    assert row["lum_min"] == pytest.approx(min(want)) and row["lum_max"] == pytest.approx(
        max(want))
    assert 0 < row["aes"] < 150
    assert luminance(np.full((4, 4, 3), 255, np.uint8)) == pytest.approx(255)


def _numbered_video(path: Path, frames: int, gop: int, offset: int = 0) -> Path:
    """Frame i is a flat grey of level 5·i (+ offset), so a decoded frame says which it is."""
    from stages.media.video import EncodeSettings, VideoWriter

    w = VideoWriter(path, 64, 48, 30, EncodeSettings(gop=gop, threads=1))
    for i in range(frames):
        w.write(np.full((48, 64, 3), 5 * i + offset, np.uint8))
    return w.close(frames)


def test_frames_are_sampled_over_keyframes_and_fall_back_to_all_frames(tmp_path):
    from stages.quality.scorers import sample_frames

    video = _numbered_video(tmp_path / "v.mp4", 40, gop=5)  # keyframes 0, 5, …, 35

    def which(frames):
        return [round(float(f.mean()) / 5) for f in frames]

    # 4 wanted: times 0, 13, 26, 39 frames → the keyframes at or before them
    assert which(sample_frames(video, 4)) == [0, 10, 25, 35]
    assert which(sample_frames(video, 8)) == [0, 5, 10, 15, 20, 25, 30, 35]
    # more wanted than there are keyframes: spread over all 40, first and last included
    assert which(sample_frames(video, 10)) == [0, 4, 9, 13, 17, 22, 26, 30, 35, 39]
    assert which(sample_frames(video, 4, "even")) == [0, 13, 26, 39]
    # to the bit what a plain decode of the whole video gives at those frames
    import av

    with av.open(str(video)) as c:
        full = [f.to_ndarray(format="rgb24") for f in c.decode(video=0)]
    for got, i in zip(sample_frames(video, 4), [0, 10, 25, 35], strict=True):
        assert np.array_equal(got, full[i])
    for got, i in zip(sample_frames(video, 10), [0, 4, 9, 13, 17, 22, 26, 30, 35, 39],
                      strict=True):
        assert np.array_equal(got, full[i])
    with pytest.raises(ValueError, match="sample_at.*'sometimes'"):
        sample_frames(video, 4, "sometimes")


def test_scoring_in_parallel_chunks_gives_the_same_table_as_one_pass(tmp_path):
    """Decode workers and chunking change the speed, never a number or the row order."""
    videos = [{"level_id": f"L/{i % 3}", "clip": i, "view": "back",
               "video": _numbered_video(tmp_path / f"{i}.mp4", 12 + i, gop=3, offset=2 * i)}
              for i in range(7)]
    (tmp_path / "junk.mp4").write_bytes(b"not a video")
    videos.insert(3, {"level_id": "L/x", "clip": 9, "view": "top",
                      "video": tmp_path / "junk.mp4"})
    scorer = BrisqueScorer()
    one = score_videos(videos, scorer, 3, workers=1, chunk_views=len(videos))
    many = score_videos(videos, scorer, 3, workers=2, chunk_views=2)
    pd.testing.assert_frame_equal(one, many)
    assert one["clip"].tolist() == [v["clip"] for v in videos]
    assert one["ok"].tolist() == [True] * 3 + [False] + [True] * 4
    # 12 frames, keyframes 0, 3, 6, 9; times 0, 5.5, 11 frames → keyframes 0, 3, 9
    first = one.iloc[0]
    assert first["lum_mean"] == pytest.approx(5 * np.mean([0, 3, 9]), abs=1.5)

    class GreyLevelScorer:
        """A batched scorer (the LAION scorer's interface) whose score is a frame's grey
        level, so each view's aes must come out as that view's own mean level: frames are
        batched across views and chunks and must find their way back."""
        name, batched, batch_size = "grey", True, 4
        calls: list[int] = []

        def score(self, images):
            self.calls.append(len(images))
            return [float(im.mean()) for im in images]

    grey = GreyLevelScorer()
    a = score_videos(videos, grey, 3, workers=1, chunk_views=len(videos))
    b = score_videos(videos, grey, 3, workers=2, chunk_views=3)
    pd.testing.assert_frame_equal(a, b)
    ok = a[a["ok"]]
    assert ok["aes"].to_numpy() == pytest.approx(ok["lum_mean"].to_numpy(), abs=0.01)
    assert ok["aes"].round(1).nunique() == 7  # the views really differ
    assert grey.calls[0] == 21 and max(grey.calls[1:]) <= 9  # 7 views × 3; chunks of 3 views


@pytest.fixture
def weights_dir(tmp_path):
    """A folder for a 1.7 GB checkpoint: in RAM (/dev/shm) where there is one (writing it to
    this CI machine's disk takes 18 s), removed afterwards."""
    import tempfile

    shm = Path("/dev/shm")
    roomy = shm.is_dir() and shutil.disk_usage(shm).free > 4 << 30  # (Docker's is 64 MB)
    wd = Path(tempfile.mkdtemp(prefix="wmforge-weights-", dir=shm if roomy else tmp_path))
    yield wd
    shutil.rmtree(wd, ignore_errors=True)


def test_laion_scorer_loads_checkpoints_of_the_real_layouts_and_scores_end_to_end(weights_dir,
                                                                                    monkeypatch):
    """Random weights in exactly the published layouts (open_clip ViT-L-14-quickgelu state
    dict; the MLP's layers.0/2/4/6/7), loaded from a local directory as in production."""
    torch = pytest.importorskip("torch")
    open_clip = pytest.importorskip("open_clip")
    from stages.quality.scorers import LaionAestheticScorer, laion_mlp

    wd = weights_dir
    with pytest.raises(ScorerError, match=r"open_clip_pytorch_model.bin.*sac\+logos"):
        LaionAestheticScorer(wd, "open_clip_pytorch_model.bin",
                             "sac+logos+ava1-l14-linearMSE.pth")
    torch.manual_seed(0)
    clip = open_clip.create_model("ViT-L-14-quickgelu", pretrained=None)
    torch.save(clip.state_dict(), wd / "open_clip_pytorch_model.bin")
    mlp = laion_mlp()
    state = mlp.state_dict()
    assert sorted({k.rsplit(".", 1)[0] for k in state}) == [
        "layers.0", "layers.2", "layers.4", "layers.6", "layers.7"]
    torch.save(state, wd / "sac+logos+ava1-l14-linearMSE.pth")
    sc = LaionAestheticScorer(wd, "open_clip_pytorch_model.bin",
                              "sac+logos+ava1-l14-linearMSE.pth", batch_size=2)
    rng = np.random.default_rng(0)
    imgs = [rng.integers(0, 255, (54, 96, 3), dtype=np.uint8) for _ in range(3)]
    got = sc.score(imgs)
    # the same numbers by hand: embed, L2-normalise, MLP
    from PIL import Image

    clip.eval()
    mlp.eval()
    with torch.inference_mode():
        x = torch.stack([sc.preprocess(Image.fromarray(i)) for i in imgs])
        f = clip.encode_image(x).float()
        want = mlp(f / f.norm(dim=-1, keepdim=True)).squeeze(-1).tolist()
    assert got == pytest.approx(want, abs=1e-4)
    # the preprocessing a GPU uses (resize and crop as matrix products) against open_clip's
    # PIL transform, in normalised units (~0.015 a grey level)
    prep = sc._gpu_batch(imgs)
    assert prep.shape == x.shape and (prep - x).abs().mean() < 0.03
    # a batch large enough to be staged by several threads: every frame in its own place
    many = [np.roll(im, k, axis=1) for k in range(6) for im in imgs]
    assert torch.equal(sc._gpu_batch(many), torch.cat([sc._gpu_batch([m]) for m in many]))
    # a compiled tower gets every batch padded to batch_size (one shape, no recompiling):
    # the padding rows must not change the real rows' scores
    sc.compiled = True
    assert sc.score(imgs) == pytest.approx(got, abs=1e-6)
    # float8 linear layers (the GPU's fast path; float8 matmuls also run on the CPU): the
    # same ranking and numbers within 1 % of the fp32 ones on these weights
    sc8 = LaionAestheticScorer(wd, "open_clip_pytorch_model.bin",
                               "sac+logos+ava1-l14-linearMSE.pth", batch_size=2,
                               precision="fp8", compile=False)
    assert sc8.score(imgs) == pytest.approx(want, rel=1e-2)
    with pytest.raises(ScorerError, match="score.compile"):
        LaionAestheticScorer(wd, "open_clip_pytorch_model.bin",
                             "sac+logos+ava1-l14-linearMSE.pth", compile="sometimes")
    torch.save({"fc.weight": torch.zeros(1)}, wd / "wrong.pth")
    with pytest.raises(ScorerError, match="layers.0"):
        LaionAestheticScorer(wd, "open_clip_pytorch_model.bin", "wrong.pth")
    # the MLP is checked before the 1.7 GB tower loads: a wrong MLP fails without touching it
    calls = []
    monkeypatch.setattr(open_clip, "create_model_and_transforms",
                        lambda *a, **k: calls.append(a) or pytest.fail("the tower was loaded"))
    with pytest.raises(ScorerError, match="layers.0"):
        LaionAestheticScorer(wd, "open_clip_pytorch_model.bin", "wrong.pth")
    assert calls == []


def test_only_zip_checkpoints_are_memory_mapped(tmp_path):
    """torch.load memory-maps the tower's checkpoint where it can (torch's zip format); one
    in the legacy format (torch < 1.6) cannot be mapped and is read as before, and loads."""
    torch = pytest.importorskip("torch")
    from torch.utils.serialization import config

    from stages.quality.scorers import _mmap_loads

    state = {"w": torch.arange(6.0)}
    new, legacy = tmp_path / "new.bin", tmp_path / "legacy.bin"
    torch.save(state, new)
    torch.save(state, legacy, _use_new_zipfile_serialization=False)
    for path, mapped in ((new, True), (legacy, False)):
        with _mmap_loads(path):
            assert config.load.mmap is mapped, path
            assert torch.equal(torch.load(path, weights_only=True)["w"], state["w"])
    assert config.load.mmap is False


def _views(rows):
    return pd.DataFrame(rows, columns=["level_id", "clip", "view", "aes", "lum_mean", "ok"])


def test_select_thresholds_and_level_pass_share():
    screen = pd.DataFrame({"level_id": ["A/a", "B/b", "C/c"], "verdict": ["pass", "pass", "fail"],
                           "reasons": ["", "", "hovering"]})
    views = _views([("A/a", 0, v, 6.0 if i < 2 else 5.0, 80.0, True)
                    for i, v in enumerate(VIEWS)] +
                   [("B/b", 0, v, 6.5, 10.0 if i else 80.0, True) for i, v in enumerate(VIEWS)])
    cfg = SelectConfig()
    out = select_levels(views, screen, cfg, "laion").set_index("level_id")
    assert out.loc["A/a", "pass_rate"] == pytest.approx(0.4) and out.loc["A/a", "retained"]
    assert out.loc["B/b", "pass_rate"] == pytest.approx(0.2) and not out.loc["B/b", "retained"]
    assert out.loc["C/c", "reason"] == "screen:hovering"
    strict = select_levels(views, screen, SelectConfig(aes_min=6.2), "laion")
    assert not strict["retained"].any()
    # BRISQUE: lower is better, its own bar
    bq = views.assign(aes=20.0)
    assert select_levels(bq, screen, SelectConfig(brisque_max=30), "brisque").set_index(
        "level_id").loc["A/a", "retained"]
    assert not select_levels(bq, screen, SelectConfig(brisque_max=10), "brisque")[
        "retained"].any()


def test_all_levels_rejected_stops_at_select_naming_the_threshold(tmp_path, capsys):
    screen = pd.DataFrame({"level_id": ["A/a", "B/b"], "verdict": ["pass", "fail"],
                           "reasons": ["", "load_failure"]})
    views = _views([("A/a", 0, v, 60.0, 80.0, True) for v in VIEWS])
    write_parquet(views, tmp_path / "views.parquet")
    write_parquet(screen, tmp_path / "levels.parquet")
    rc = select_main(["--views", str(tmp_path / "views.parquet"), "--screen",
                      str(tmp_path / "levels.parquet"), "--out", str(tmp_path / "sel"),
                      "-S", "score.scorer=brisque", "-S", "select.brisque_max=45"])
    err = capsys.readouterr().err
    assert rc == 3
    assert "all 2 levels rejected" in err
    assert "select.brisque_max=45.0 alone rejects 1 of 1" in err
    assert "select.lum_min=25.0 alone rejects 0 of 1" in err
    assert "1 of 2 levels failed screening" in err
    m = json.loads((tmp_path / "sel" / "metrics.json").read_text())
    assert m["retained"] == 0 and m["levels_in"] == 2


def test_pools_are_stable_under_level_and_node_changes():
    levels = [f"P{i // 10}/L{i:03d}" for i in range(400)]
    nodes = [f"node{i}" for i in range(4)]
    a = assign(levels, nodes)
    sizes = pd.Series(a).value_counts()
    assert sizes.min() > 60  # balanced enough: 100 expected per node
    # adding or removing one level moves only that level
    b = assign(levels + ["P9/New"], nodes)
    assert {k: v for k, v in b.items() if k != "P9/New"} == a
    c = assign(levels[1:], nodes)
    assert all(c[k] == a[k] for k in c)
    # adding a node moves only levels onto it, about 1/5 of them
    d = assign(levels, nodes + ["node4"])
    moved = [k for k in levels if d[k] != a[k]]
    assert all(d[k] == "node4" for k in moved)
    assert 0.1 < len(moved) / len(levels) < 0.3
    # removing a node moves only that node's levels
    e = assign(levels, nodes[:3])
    assert [k for k in levels if e[k] != a[k]] == [k for k in levels if a[k] == "node3"]
    # every pass visits the same levels in its own order; a seed gives the same order again
    pools = build_pools(levels, nodes, 3, seed=0)
    n0 = pools[pools["node"] == "node0"]
    orders = [n0[n0["pass"] == p].sort_values("position")["level_id"].tolist()
              for p in range(3)]
    assert sorted(orders[0]) == sorted(orders[1]) == sorted(orders[2])
    assert orders[0] != orders[1] != orders[2]
    assert pass_order(orders[0], "node0", 1, 0) == orders[1]
    assert build_pools(levels, nodes, 3, seed=0).equals(pools)


def test_pools_stage_binds_each_node_to_one_pool(tmp_path):
    sel = pd.DataFrame({"level_id": [f"P/L{i}" for i in range(12)],
                        "retained": [i % 4 != 0 for i in range(12)]})
    write_parquet(sel, tmp_path / "levels.parquet")
    r = subprocess.run([sys.executable, "-m", "stages.pools", "--select",
                        str(tmp_path / "levels.parquet"), "--out", str(tmp_path),
                        "-S", "cluster.nodes=[a,b,c]", "-S", "cluster.passes=2"],
                       capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1])
    assert r.returncode == 0, r.stderr
    pools = pd.read_parquet(tmp_path / "pools.parquet")
    p0 = pools[pools["pass"] == 0]
    assert sorted(p0["level_id"]) == sorted(sel[sel["retained"]]["level_id"])
    assert p0.groupby("level_id")["node"].nunique().max() == 1  # one pool per level
    assert set(p0["node"]) <= {"a", "b", "c"}


def test_selection_counts_failed_scoring_clips():
    """A scoring clip that failed Stage I or II is a failed sample of its level (issue 19,
    point 7): the level whose clips mostly failed is rejected, its reasons kept."""
    from stages.config import SelectConfig
    from stages.score import failure_rows
    from stages.select import select_levels

    def view_rows(level, clips):
        return [{"level_id": level, "clip": c, "view": v, "scorer": "brisque", "aes": 20.0,
                 "lum_mean": 100.0, "ok": True, "reason": ""}
                for c in clips for v in ("back", "left", "right", "top", "fp")]

    index = pd.DataFrame([{"level_id": lv, "trajectory": f"traj_{c:04d}"}
                          for lv, cs in (("P/Good", range(4)), ("P/Flaky", [0])) for c in cs])
    s1 = pd.DataFrame([{"level_id": "P/Flaky", "trajectory": 1, "reason": "no_walkable_region",
                        "detail": "24 spawn candidates did not settle"},
                       {"level_id": "P/Flaky", "trajectory": -1, "reason": "engine_crashed",
                        "detail": "signal 11 (after 3 attempts)"}])
    fails = failure_rows(s1, index, 4, "brisque")
    assert sorted((r["level_id"], r["clip"]) for r in fails) == [
        ("P/Flaky", 1), ("P/Flaky", 2), ("P/Flaky", 3)]
    views = pd.DataFrame(view_rows("P/Good", range(4)) + view_rows("P/Flaky", [0]) + fails)
    screen = pd.DataFrame([{"level_id": lv, "verdict": "pass", "reasons": ""}
                           for lv in ("P/Good", "P/Flaky")])
    out = select_levels(views, screen, SelectConfig(level_pass_share=0.5), "brisque")
    out = out.set_index("level_id")
    assert bool(out.loc["P/Good", "retained"]) and out.loc["P/Good", "pass_rate"] == 1.0
    # one clip of four rendered and passed: 5 of 20 views, not 5 of 5
    assert not bool(out.loc["P/Flaky", "retained"])
    assert out.loc["P/Flaky", "pass_rate"] == pytest.approx(0.25)
    assert out.loc["P/Flaky", "clips_failed"] == 3
    assert out.loc["P/Flaky", "failures"] == "engine_crashed x2; no_walkable_region x1"
