"""Ground-truth layer files: every layer round-trips exactly at its fixed scale, the same frames
give the same bytes, and bad input fails with a message that names what is wrong."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from stages.media import layers as L

H, W, T = 36, 64, 4


def _frames(seed: int = 0) -> list[dict[str, np.ndarray]]:
    """Values on each layer's grid (so they must come back bit-exact), with the awkward cases:
    inf depth, ids above 65535, zero normals, clipped-free flow at the range ends."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(T):
        dq = rng.integers(0, 300_000, (H, W))  # up to 300 m at 1 mm
        depth = (dq * L.DEPTH_SCALE_M).astype(np.float32)
        depth[:5] = np.inf
        depth[5, 0] = 0.0
        depth[5, 1] = np.float32((L.DEPTH_NONE - 1) * L.DEPTH_SCALE_M)
        n = rng.normal(size=(H, W, 3))
        n /= np.linalg.norm(n, axis=-1, keepdims=True)
        normals = (np.rint(n * L.NORMAL_SCALE) / L.NORMAL_SCALE).astype(np.float32)
        normals[:5] = 0.0
        ids = rng.integers(0, 2**32, (H, W), dtype=np.uint64).astype(np.uint32)
        ids[:, :3] = [0, 65535, 65536]
        ids[0, 3] = 2**32 - 1
        mask = rng.random((H, W)) < 0.3
        flow = np.zeros((H, W, 3), np.float32)
        flow[..., :2] = rng.integers(-32768, 32768, (H, W, 2)) / L.FLOW_SCALE
        flow[..., 2] = rng.random((H, W)) < 0.8
        flow[0, 0, :2] = [-32768 / L.FLOW_SCALE, 32767 / L.FLOW_SCALE]
        out.append({"depth": depth, "normals": normals, "ids": ids, "mask": mask,
                    "flow_fwd": flow, "flow_bwd": flow[::-1].copy()})
    return out


def _write(d, frames, layers=L.LAYERS, view="back"):
    w = L.LayerWriter(d, view, layers, W, H, 30)
    for f in frames:
        w.add(f)
    return w.close()


def test_every_layer_round_trips_exactly_at_its_fixed_scale(tmp_path):
    frames = _frames()
    entry = _write(tmp_path, frames)
    assert set(entry) == set(L.LAYERS)
    for name in L.LAYERS:
        e = entry[name]
        path = tmp_path / f"back.{name}.mkv"
        assert e["file"] == path.name and e["frames"] == T and e["bytes"] == path.stat().st_size
        assert e["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
        assert e["encoding"]["codec"] == "ffv1" and e["encoding"]["lossless"]
        got = L.read_layer(tmp_path, "back", name)
        want = np.stack([f[name] for f in frames])
        assert got.dtype == want.dtype and got.shape == want.shape, name
        assert np.array_equal(got, want), name  # inf == inf under array_equal
    assert not list(tmp_path.glob("*.part"))
    depth = L.read_layer(tmp_path, "back", "depth")
    assert np.isinf(depth[:, :5]).all() and np.isfinite(depth[:, 5:]).all()
    ids = L.read_layer(tmp_path, "back", "ids")
    assert ids[0, 0, 2] == 65536 and ids[0, 0, 3] == 2**32 - 1
    assert entry["flow_fwd"]["clipped"] == 0


def test_values_off_the_grid_come_back_within_half_a_step(tmp_path):
    rng = np.random.default_rng(1)
    depth = rng.uniform(0.05, 80.0, (H, W)).astype(np.float32)
    n = rng.normal(size=(H, W, 3))
    normals = (n / np.linalg.norm(n, axis=-1, keepdims=True)).astype(np.float32)
    flow = np.concatenate([rng.uniform(-300, 300, (H, W, 2)), np.ones((H, W, 1))],
                          -1).astype(np.float32)
    _write(tmp_path, [{"depth": depth, "normals": normals, "flow_fwd": flow}],
           ("depth", "normals", "flow_fwd"))
    assert np.abs(L.read_layer(tmp_path, "back", "depth")[0] - depth).max() <= (
        0.5 * L.DEPTH_SCALE_M + 1e-5)
    assert np.abs(L.read_layer(tmp_path, "back", "normals")[0] - normals).max() <= (
        0.5 / L.NORMAL_SCALE + 1e-7)
    assert np.abs(L.read_layer(tmp_path, "back", "flow_fwd")[0] - flow).max() <= (
        0.5 / L.FLOW_SCALE)


def test_flow_beyond_its_range_is_clipped_marked_not_valid_and_counted(tmp_path):
    flow = np.zeros((H, W, 3), np.float32)
    flow[..., 2] = 1.0
    flow[0, 0, 0] = 5000.0
    flow[1, 1, 1] = -3000.0
    e = _write(tmp_path, [{"flow_bwd": flow}], ("flow_bwd",))
    got = L.read_layer(tmp_path, "back", "flow_bwd")[0]
    assert e["flow_bwd"]["clipped"] == 2
    assert got[0, 0, 2] == 0.0 and got[1, 1, 2] == 0.0 and got[2, 2, 2] == 1.0
    assert got[0, 0, 0] == pytest.approx((65535 - 32768) / L.FLOW_SCALE)


def test_the_same_frames_give_the_same_bytes(tmp_path):
    frames = _frames(3)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a, b = _write(tmp_path / "a", frames), _write(tmp_path / "b", frames)
    assert {k: v["sha256"] for k, v in a.items()} == {k: v["sha256"] for k, v in b.items()}


def test_meta_block_states_units_sampling_and_views():
    g = L.ground_truth_meta(["mask", "depth"], {"back": {}})
    assert g["layers"] == ["depth", "mask"]  # canonical order
    assert "never averaged" in g["sampling"] and "un-jittered" in g["sampling"]
    assert g["units"]["depth"]["units"] == "m" and g["units"]["depth"]["no_surface"] == "inf"
    json.dumps(g)  # serialisable as written into meta.json


@pytest.mark.parametrize("bad, words", [
    (["depth", "colour"], "unknown ground-truth layer(s) ['colour']"),
    (["depth", "depth"], "more than once"),
    ("depth", "expected a list"),
])
def test_bad_layer_names_are_rejected_with_a_clear_message(bad, words):
    with pytest.raises(ValueError) as e:
        L.validate_layers(bad)
    assert words in str(e.value) and "render.ground_truth" in str(e.value)


def test_bad_planes_name_the_layer_and_what_is_expected(tmp_path):
    w = L.LayerWriter(tmp_path, "left", ["depth", "ids"], W, H, 30)
    with pytest.raises(ValueError, match="lacks layer.*'ids'"):
        w.add({"depth": np.ones((H, W), np.float32)})
    with pytest.raises(ValueError, match="'ids': expected dtype uint32, got int64"):
        w.add({"depth": np.ones((H, W), np.float32), "ids": np.ones((H, W), np.int64)})
    with pytest.raises(ValueError, match=r"'depth': expected shape \(36, 64\)"):
        w.add({"depth": np.ones((W, H), np.float32), "ids": np.ones((H, W), np.uint32)})
    with pytest.raises(ValueError, match="'depth': NaN or negative"):
        w.add({"depth": np.full((H, W), -1, np.float32), "ids": np.ones((H, W), np.uint32)})
    w.abort()
    assert not list(tmp_path.iterdir())
    with pytest.raises(OSError, match="no frames were added"):
        L.LayerWriter(tmp_path, "left", ["mask"], W, H, 30).close()
    assert not list(tmp_path.iterdir())
    with pytest.raises(FileNotFoundError, match="no 'normals' layer for view 'left'"):
        L.read_layer(tmp_path, "left", "normals")
