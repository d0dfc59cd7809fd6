"""The Unreal failure classifier on real-format log excerpts (tests/data/unreal_logs/)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stages.engine.unreal_log import (
    FLOOD_MIN_LINES,
    GENERIC,
    TABLE2,
    classify_log_file,
    classify_text,
)

LOGS = Path(__file__).parent / "data" / "unreal_logs"

EXPECTED = {
    "skeletal_switch.log": "skeletal_assert_after_switch",
    "world_partition.log": "world_partition_init_crash",
    "camera_takeover.log": "sequence_took_camera",
    "root_motion.log": "root_motion_conflict",
    "container_gpu.log": "gpu_unavailable",
    "no_vulkan.log": "no_vulkan_device",
    "vulkan_device_lost.log": "gpu_device_lost",
    "out_of_memory.log": "out_of_memory",
    "gpu_hung.log": "gpu_hung",
    "root.log": "run_as_root",
    "signal_crash.log": "signal_crash",
    "assertion.log": "assertion_failed",
    "mrq_error.log": "mrq_error",
    "python_error.log": "python_error",
    "mrq_success.log": "",
    "stage1_ok.log": "",
}


@pytest.mark.parametrize("name,reason", sorted(EXPECTED.items()))
def test_each_excerpt_gets_its_reason(name: str, reason: str) -> None:
    v = classify_log_file(LOGS / name)
    assert v.reason == reason, (name, v)
    if reason:
        assert v.line and v.line_no > 0 or reason == "run_as_root"
        assert v.line in (LOGS / name).read_text() or v.line.strip() in (LOGS / name).read_text()


def test_every_table2_and_generic_code_is_covered() -> None:
    covered = set(EXPECTED.values())
    missing = (set(TABLE2) | set(GENERIC)) - covered - {"slot_leftovers", "log_growth",
                                                         "fatal_error"}
    assert not missing


def test_evidence_points_at_the_deciding_line() -> None:
    v = classify_log_file(LOGS / "vulkan_device_lost.log")
    assert "VK_ERROR_DEVICE_LOST" in v.line and v.crash
    v = classify_log_file(LOGS / "skeletal_switch.log")
    assert v.line.startswith("LogCore: Error: appError called: Assertion failed: RequiredBones")
    assert v.line_no == 4


def test_progress_is_read_from_the_log() -> None:
    assert classify_log_file(LOGS / "mrq_success.log").progress == {
        "shaders_left": 87, "mrq_jobs_started": 1, "mrq_jobs_finished": 1, "trajectories": 1}
    assert classify_log_file(LOGS / "stage1_ok.log").progress["trajectories"] == 2


def test_fatal_error_without_a_stack() -> None:
    v = classify_text("[2025.01.01-00.00.00:000][  1]LogCore: Fatal error!\n")
    assert v.reason == "fatal_error"


def test_slot_leftovers_from_the_scheduler_line() -> None:
    v = classify_text("node: slot g0s1: cleaning leftovers of an interrupted run "
                      "['assets', 'inst-1']\n")
    assert v.reason == "slot_leftovers"


def test_log_growth_by_size_and_by_flood(tmp_path: Path) -> None:
    big = tmp_path / "big.log"
    big.write_text("[2025.01.01-00.00.00:000][  1]LogTemp: fine\n" * 2000)
    assert classify_log_file(big, max_bytes=10_000).reason == "log_growth"
    flood = tmp_path / "flood.log"
    lines = [f"[2025.01.01-00.00.{i % 60:02d}:000][{i:5d}]LogNavigation: Warning: "
             "no navmesh for agent" for i in range(FLOOD_MIN_LINES)]
    flood.write_text("\n".join(lines) + "\n")
    v = classify_log_file(flood)
    assert v.reason == "log_growth" and "no navmesh" in v.line
    # a crash in a large log is still the crash
    big.write_text(big.read_text() + (LOGS / "signal_crash.log").read_text())
    assert classify_log_file(big, max_bytes=10_000).reason == "signal_crash"
