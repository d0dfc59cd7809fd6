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


def test_the_kernels_oom_killer_is_host_oom_and_the_retry_alone_fits(inv, sample_library,
                                                                     tmp_path):
    """Real memory pressure: the runner's engines are capped together (node.memory_gb, a
    memory cgroup) and each Stage I engine takes 1 GiB at its start for 3 s (fault
    injection, named so). Two at once do not fit: the kernel's OOM killer takes one, the
    runner reads its cgroup's kill counter (host_oom, not engine_crashed), lowers the host's
    limit and runs it again alone, where it fits. node.retries=0: that retry was not one."""
    from stages.cluster.cgroup_memory import SlotCgroups

    probe = SlotCgroups(["probe"], 1 << 30)
    if not probe.available:
        pytest.skip(f"no memory cgroup can be made here: {probe.why}")
    probe.close()
    out, lines = _run(inv, sample_library, tmp_path,
                      {"hog": {"stage": "stage1", "level": "*", "mb": 1024, "hold_s": 3}},
                      "node.memory_gb=1.75", "node.retries=0")
    steps = out["steps"]
    s1 = steps[steps["stage"] == "stage1"]
    killed = s1[s1["reason"] == "host_oom"]
    assert len(killed) == 1, steps.to_string()
    assert any("killed by the kernel's OOM killer: the host's memory ran out "
               "(node.memory_gb 1.75)" in m for m in lines), lines
    assert any("host: 2 processes" in m and "running processes 2 -> 1" in m for m in lines)
    assert out["stage1_failures"].empty and out["render_failures"].empty
    assert sorted(out["index"]["level_id"]) == [A, B]  # both made and rendered
    snaps = read_snapshots(tmp_path / "snap")
    assert [(s["reason"], s["signal"]) for s in snaps] == [("host_oom", "SIGKILL")]
    assert not _engines(str(tmp_path))


def test_an_engine_over_its_slots_own_cap_is_a_final_row(inv, sample_library, tmp_path):
    """node.slot_memory_gb caps each slot: B's Stage I engine takes 1 GiB against a 0.75 GiB
    cap and the kernel kills it in its own slot (the host is fine): one host_oom row at once,
    naming the key to raise; A renders."""
    from stages.cluster.cgroup_memory import SlotCgroups

    probe = SlotCgroups(["probe"], 1 << 30)
    if not probe.available:
        pytest.skip(f"no memory cgroup can be made here: {probe.why}")
    probe.close()
    out, lines = _run(inv, sample_library, tmp_path,
                      {"hog": {"stage": "stage1", "level": B, "mb": 1024, "hold_s": 1}},
                      "node.slot_memory_gb=0.75", "node.retries=2")
    f = out["stage1_failures"]
    assert f["level_id"].tolist() == [B] and f["reason"].tolist() == ["host_oom"]
    assert "at its slot's cap, node.slot_memory_gb 0.75: raise it" in f["detail"].iloc[0]
    assert "after 1 attempt" in f["detail"].iloc[0]  # final at once: no retry can fit
    assert "ran alone" not in f["detail"].iloc[0]  # its own cap, not the host's memory
    assert out["index"]["level_id"].tolist() == [A]
    assert not any("running processes" in m for m in lines)  # no limit lowered
