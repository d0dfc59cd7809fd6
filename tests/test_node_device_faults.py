"""Device faults through the node runner with real engine processes on this CPU machine: a
real allocator failure (fault injection caps the process's address space and asks torch's CPU
allocator for 512 MiB: ``host_oom``, the same path as ``gpu_oom``) retried once fewer
processes share the memory, a lone one a failure row, and a CUDA error (a stand-in here,
named so; real on a GPU: tests/test_gpu.py) that ends only its slot's process."""

from __future__ import annotations

import json

import pytest

from stages.cluster.snapshots import read_snapshots
from stages.config import load_params

from .test_node_runner import _cfg, _engines

A, B = "CastleCourtyard/Courtyard", "DesertCanyon/Canyon"


@pytest.fixture(scope="module")
def inv(sample_library):
    from stages.inventory import run_inventory

    return run_inventory(sample_library, load_params().inventory, "overrides.yaml")


def _run(inv, library, tmp_path, faults: dict, *over: str):
    from stages.cluster.lifecycle import run_levels

    levels = inv.levels[inv.levels["level_id"].isin([A, B])]
    cfg = _cfg(tmp_path, "node.cpu_slots=2", *over)
    lines: list[str] = []
    import os

    os.environ["WMFORGE_FAULT_INJECTION"] = json.dumps(faults)
    try:
        out = run_levels(cfg, levels, inv.characters, library, tmp_path / "t", tmp_path / "r",
                         log=lines.append)
    finally:
        del os.environ["WMFORGE_FAULT_INJECTION"]
    return out, lines


def test_out_of_memory_is_retried_at_fewer_slots_and_alone_it_is_a_failure_row(
        inv, sample_library, tmp_path):
    """Stage I's engines (both start in the runner's first round, so they share the host for
    sure): A runs out of memory once, B every time."""
    once = tmp_path / "oom_once.txt"
    out, lines = _run(inv, sample_library, tmp_path, {"oom": [
        {"stage": "stage1", "level": A, "times": 1, "count_file": str(once)},  # fits alone
        {"stage": "stage1", "level": B}]},  # never fits
        "node.retries=2")
    assert len(once.read_text().split()) == 1  # A's first start really failed
    # the host's limit fell from two running processes to one, said in the log
    assert any("host_oom" in m and "host: 2 processes" in m and "running processes 2 -> 1"
               in m for m in lines), lines
    # A was retried (not counted as a retry) and rendered; B, alone, is one failure row
    assert out["index"]["level_id"].tolist() == [A]
    assert out["render_failures"].empty
    f = out["stage1_failures"]
    assert f["level_id"].tolist() == [B] and f["reason"].tolist() == ["host_oom"]
    assert "ran alone on host" in f["detail"].iloc[0]
    assert "can't allocate memory: you tried to allocate 536870912 bytes" in f["detail"].iloc[0]
    steps = out["steps"]
    s1 = steps[steps["stage"] == "stage1"].sort_values("started")
    assert s1[s1["level_id"] == A]["reason"].tolist() == ["host_oom", ""]
    assert s1[s1["level_id"] == B]["reason"].tolist() == ["host_oom", "host_oom"]
    # once the limit fell, no two engine processes of this node ran at the same time
    fell = steps[steps["reason"] == "host_oom"]["ended"].min()
    after = steps[steps["started"] >= fell][["started", "ended"]].values.tolist()
    assert len(after) >= 3  # B's lone retry, A's retry and A's render
    assert not any(a[0] < b[1] and b[0] < a[1] for i, a in enumerate(after)
                   for b in after[i + 1:]), after
    snaps = read_snapshots(tmp_path / "snap")
    assert {s["reason"] for s in snaps} == {"host_oom"} and len(snaps) == 3
    # what an operator sees: slots.json and `cluster health`'s "needs a person"
    from stages.cluster.health import needs_person, slots_view

    sv = slots_view(tmp_path)
    assert sv["lowered"] == {"host": "2 -> 1"}
    row = {"store": {"ok": True}, "uploader": {"status": "running", "backlog": 0,
                                               "oldest_s": 0.0},
           "monitor": {"gpus": [], "disk": {"level": "ok"}}, "slots": sv}
    assert needs_person(row, 600.0) == ["host runs 1 of 2 processes after running out of memory"]
    assert not _engines(str(tmp_path))


def test_a_gpu_error_ends_only_its_slot_and_the_retry_rules_apply(inv, sample_library,
                                                                  tmp_path):
    """Raised inside the frame loop (frame 2 of A's trajectory), where the renderer wraps
    errors as ``encode_failed``: still read as the device fault it is."""
    out, lines = _run(inv, sample_library, tmp_path,
                      {"gpu_error": {"stage": "render", "level": A, "frame": 2}},
                      "node.retries=1")
    f = out["render_failures"]
    assert f["level_id"].tolist() == [A] and f["reason"].tolist() == ["gpu_error"]
    assert "after 2 attempts" in f["detail"].iloc[0]
    assert "gpu_error_standin" in f["detail"].iloc[0]  # named: no GPU here can fail
    assert out["index"]["level_id"].tolist() == [B]  # the other slot's level rendered
    snaps = read_snapshots(tmp_path / "snap")
    assert [s["reason"] for s in snaps] == ["gpu_error", "gpu_error"]
    from pathlib import Path

    for s in snaps:
        log = (Path(s["path"]) / "engine.log").read_text()
        assert "fault injection: gpu_error on CastleCourtyard/Courtyard (render) at frame 2" \
            in log and "encode_failed" not in f["detail"].iloc[0]
    assert not _engines(str(tmp_path))
