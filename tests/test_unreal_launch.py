"""The Unreal launcher: command lines, the slot's GPU by UUID, root, the node runner's slot with
engine=unreal and its snapshot."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from stages.config import UnrealConfig
from stages.engine.unreal import (
    SCRIPTS,
    UnrealLaunchError,
    adapter_for_uuid,
    check_adapter,
    command_line,
    launcher_argv,
    map_object_path,
    parse_vulkaninfo_summary,
    refuse_root,
    slot_display,
    virtual_display_argv,
)

DATA = Path(__file__).parent / "data"
CFG = UnrealConfig(editor="/opt/UE_5.6/Engine/Binaries/Linux/UnrealEditor-Cmd",
                   project="/srv/render/Render.uproject",
                   ini_overrides=["Engine:[/Script/Engine.RendererSettings]:r.SkinCache.Mode=1"])


def test_stage1_command_line() -> None:
    argv = command_line(CFG, "stage1", "/Game/City/Maps/Downtown", 1, fps=30)
    assert argv == [
        CFG.editor, CFG.project, "/Game/City/Maps/Downtown",
        f'-ExecutePythonScript="{SCRIPTS / "stage1_pie.py"}"',
        "-unattended", "-nosplash", "-nosound", "-NoLoadingScreen", "-NoScreenMessages",
        "-stdout", "-FullStdOutLogOutput", "-log", "-RenderOffscreen", "-graphicsadapter=1",
        "-UseFixedTimeStep", "-FPS=30",
        "-ini:Engine:[/Script/Engine.RendererSettings]:r.SkinCache.Mode=1"]
    assert (SCRIPTS / "stage1_pie.py").is_file()


def test_stage2_command_line_virtual_display_and_no_fixed_step() -> None:
    cfg = UnrealConfig(editor=CFG.editor, project=CFG.project, virtual_display=True)
    argv = command_line(cfg, "stage2", "/Game/City/Maps/Downtown", None)
    assert argv[3] == f'-ExecutePythonScript="{SCRIPTS / "stage2_mrq.py"}"'
    assert "-RenderOffscreen" not in argv and "-UseFixedTimeStep" not in argv
    assert not any(a.startswith("-graphicsadapter") for a in argv)  # a CPU slot
    assert virtual_display_argv(slot_display(cfg, "g3s1"))[:2] == ["Xvfb", ":149"]
    assert slot_display(cfg, "g3s1") != slot_display(cfg, "g1s3")
    with pytest.raises(UnrealLaunchError, match="unreal.editor and unreal.project"):
        command_line(UnrealConfig(), "stage1", "/Game/M", None)


def test_adapter_by_uuid_in_vulkan_order() -> None:
    devs = parse_vulkaninfo_summary((DATA / "vulkan" / "summary_2gpu.txt").read_text())
    assert [d["deviceName"] for d in devs] == ["NVIDIA H200", "NVIDIA H200",
                                               "llvmpipe (LLVM 15.0.6, 256 bits)"]
    # nvidia-smi -L / NVML spell the same 16 bytes "GPU-…"
    assert adapter_for_uuid("GPU-1f93e07a-44c2-aa10-6b3d-9e0e55c7d2a3", devs) == 1
    assert adapter_for_uuid("GPU-5C0A9D3E-7B21-8F44-9E1D-2A6B0C4F8E11", devs) == 0
    with pytest.raises(UnrealLaunchError, match="nvidia_icd.json"):
        adapter_for_uuid("GPU-00000000-0000-0000-0000-000000000000", devs)


def test_adapter_fallback_is_found_in_the_log() -> None:
    """Real line formats only (tests/data/unreal_logs/SOURCES.md); more in
    tests/test_unreal_engine.py."""
    # a real UE 4.25 Linux line (adamrehn/pixel-streaming-linux issue 46)
    real = ("[2021.05.04-18.53.50:938][  0]LogVulkanRHI: Display: Using Device 0: Geometry 1 "
            "Tessellation 1\n")
    assert check_adapter(real, 0) == (True, real.strip())
    assert check_adapter(real, 2)[0] is False
    ok = ("[2025.01.01-00.00.01:000][  0]LogVulkanRHI: Using device at index 1 of 2 as "
          "specfified by command line...\n")
    assert check_adapter(ok, 1) == (True, ok.strip())
    assert check_adapter(ok, 0)[0] is False
    warn = ("[2025.01.01-00.00.01:000][  0]LogVulkanRHI: Warning: Tried to use graphics adapter "
            "at index 7 as specified by command line, but only 2 Adapter(s) found. Falling back "
            "to first device...\n")
    assert check_adapter(warn + ok, 1)[0] is False
    assert check_adapter("LogInit: Display: nothing about devices\n", 1) == (None, "")


def test_root_is_refused_naming_the_user() -> None:
    with pytest.raises(UnrealLaunchError, match="unprivileged user 'render'"):
        refuse_root(UnrealConfig(run_as="render"), euid=0)
    refuse_root(UnrealConfig(run_as="render"), euid=1000)


def test_map_object_path() -> None:
    assert map_object_path("lib/Packs/City/Content/City/Maps/Downtown.umap") == \
        "/Game/City/Maps/Downtown"
    with pytest.raises(UnrealLaunchError, match="umap"):
        map_object_path("lib/Packs/City/Content/City/Maps/Downtown.glb")


def test_snapshot_carries_the_reason_of_a_recorded_log(tmp_path) -> None:
    from stages.cluster.gpus import GpuInfo, SlotPlan
    from stages.cluster.snapshots import read_snapshots, summarize, write_snapshot
    from stages.cluster.steps import Step, StepResult

    log = tmp_path / "engine.log"
    log.write_text((DATA / "unreal_logs" / "vulkan_device_lost.log").read_text())
    step = Step("render", "n1-x-1", launcher_argv("stage2", tmp_path), tmp_path,
                tmp_path / "progress.log", log, [], 0, 3, "", "City/Downtown")
    res = StepResult(step, False, "engine_crashed", None, "SIGSEGV", "killed by SIGSEGV", 1, 0)
    slot = SlotPlan("g3s0", GpuInfo(3, "GPU-1f93e07a", "NVIDIA H200"))
    write_snapshot(tmp_path / "snaps" / "n1" / "n1-x-1", step, res, slot, log, "")
    (snap,) = read_snapshots(tmp_path / "snaps")
    assert snap["log_reason"] == "gpu_device_lost" and "VK_ERROR_DEVICE_LOST" in \
        snap["log_evidence"] and snap["gpu_uuid"] == "GPU-1f93e07a"
    assert "engine_crashed:gpu_device_lost" in summarize([snap])


def unreal_library(root: Path) -> tuple[Path, object, object]:
    """A library with one Unreal level and one character (package files only)."""
    import pandas as pd

    lib = root / "lib"
    umap = lib / "Packs/City/Content/City/Maps/Downtown.umap"
    mesh = lib / "Chars/Alex/Content/Alex/SK_Alex.uasset"
    for f in (umap, mesh):
        f.parent.mkdir(parents=True)
        f.write_bytes(bytes.fromhex("C1832A9E") + b"\0" * 60)
    levels = pd.DataFrame([{"level_id": "City/Downtown", "path": str(umap.relative_to(lib)),
                            "scale": 1.0, "up_axis": "Z", "enabled": True}])
    chars = pd.DataFrame([{
        "character_id": "Chars/Alex", "ok": True, "capsule_radius_m": 0.3,
        "capsule_half_height_m": 0.6, "visual_height_m": 1.8, "walk_speed": 1.6,
        "step_height_m": 0.45, "locomotion": "walk", "height_offset_m": 0.0, "scale": 1.0,
        "yaw_correction_deg": -90.0, "model_path": str(mesh.relative_to(lib)),
        "animation_json": json.dumps({"W": "/Game/Alex/Anims/Walk"})}])
    return lib, levels, chars


def test_node_runner_slot_with_engine_unreal(tmp_path) -> None:
    """A slot with engine=unreal runs the launcher, which builds the editor command line for
    the level's map; as root it is refused like Unreal refuses, and the failure snapshot
    carries the reason read from the log."""
    from stages.cluster.lifecycle import make_trajectories
    from stages.cluster.snapshots import read_snapshots
    from stages.config import load_params

    lib, levels, chars = unreal_library(tmp_path)
    editor = "/opt/UE_5.6/Engine/Binaries/Linux/UnrealEditor-Cmd"
    cfg = load_params(overrides=[
        "engine.name=unreal", f"unreal.editor={editor}", "unreal.project=/srv/R/R.uproject",
        "unreal.run_as=render", "trajectories.per_level=1", "trajectories.frames=10",
        "node.retries=0", "node.cpu_slots=1", "node.gpus=[]", f"node.work_dir={tmp_path / 'w'}",
        f"node.snapshot_dir={tmp_path / 'snaps'}", "node.display=plain"])
    fails = make_trajectories(cfg, levels, chars, lib, tmp_path / "traj", log=lambda m: None)
    assert fails["reason"].tolist() == ["engine_error"]
    (snap,) = read_snapshots(tmp_path / "snaps")
    assert snap["argv"][1:4] == ["-m", "stages.engine.unreal_launch", "stage1"]
    assert snap["log_reason"] == "run_as_root" and snap["stage"] == "stage1"
    log = (Path(snap["path"]) / "engine.log").read_text()
    assert f"{editor} /srv/R/R.uproject /Game/City/Maps/Downtown " \
           '-ExecutePythonScript="' in log and '/unreal/stage1_pie.py"' in log \
        and 'wmforge-editor-py-' in log
    assert "-UseFixedTimeStep -FPS=30" in log and "unprivileged user 'render'" in log


def test_inventory_marks_unreal_files_without_the_package_tag_broken(tmp_path) -> None:
    from stages.config import load_params
    from stages.inventory import inventory_characters, inventory_levels

    tag = bytes.fromhex("C1832A9E")
    maps = tmp_path / "UEPack/Content/UEPack/Maps"
    maps.mkdir(parents=True)
    (maps / "Good.umap").write_bytes(tag + b"\0" * 60)
    (maps / "Fake.umap").write_bytes(b"glTF" + b"\0" * 60)  # a renamed file
    (maps / "Empty.umap").write_bytes(b"")
    ch = tmp_path / "Chars/Fox"
    ch.mkdir(parents=True)
    (ch / "SK_Fox.uasset").write_bytes(b"\0" * 64)
    (ch / "character.json").write_text(json.dumps({"name": "Fox", "model": "SK_Fox.uasset"}))
    cfg = load_params().inventory
    lv = inventory_levels(tmp_path, cfg).set_index("level_id")
    assert lv.loc["UEPack/Good", "kind"] != "broken"
    for lid, head in (("UEPack/Fake", "676c5446"), ("UEPack/Empty", "nothing")):
        assert lv.loc[lid, "kind"] == "broken" and not lv.loc[lid, "enabled"]
        assert lv.loc[lid, "reason"] == "not_unreal_package"
        assert head in lv.loc[lid, "detail"] and "0x9e2a83c1" in lv.loc[lid, "detail"]
    chars = inventory_characters(tmp_path, cfg)
    (row,) = chars.to_dict("records")
    assert not row["ok"] and row["reason"] == "model_not_unreal_package"
    assert "SK_Fox.uasset" in row["animation_notes"]


def test_vulkan_devices_through_the_loader_match_vulkaninfo() -> None:
    """The ctypes enumeration (what the launcher uses) against vulkaninfo, on whatever Vulkan
    ICD this machine has (Mesa's lavapipe on the development machine)."""
    import shutil
    import subprocess

    from stages.engine.vulkan_devices import enumerate_devices

    devs = enumerate_devices()
    exe = shutil.which("vulkaninfo")
    if not devs or exe is None:
        pytest.skip("no Vulkan loader/ICD or no vulkaninfo (scripts/setup.sh installs both)")
    out = subprocess.run([exe, "--summary"], capture_output=True, text=True, timeout=60).stdout
    ref = parse_vulkaninfo_summary(out)
    assert [(d["index"], d["deviceName"], d["deviceUUID"]) for d in devs] == \
        [(d["index"], d["deviceName"], d["deviceUUID"]) for d in ref]
    assert adapter_for_uuid(devs[-1]["deviceUUID"], devs) == devs[-1]["index"]


@pytest.mark.skipif(os.geteuid() != 0, reason="dropping to another user needs root")
def test_under_root_the_editor_runs_as_the_unprivileged_user() -> None:
    """§8.4: the runner stays root, the engine process it starts runs as unreal.run_as (here
    Debian's `nobody`), with the instance folder handed to that user."""
    import pwd
    import shutil
    import tempfile

    tmp_path = Path(tempfile.mkdtemp(prefix="wmforge-runas-"))  # pytest's tmp is root-only
    try:
        _run_as_nobody(tmp_path, pwd.getpwnam("nobody"))
    finally:
        shutil.rmtree(tmp_path, ignore_errors=True)


def _run_as_nobody(tmp_path: Path, nobody) -> None:
    from stages.config import UnrealConfig
    from stages.engine.unreal_launch import engine_user, run_editor

    inst = tmp_path / "inst"
    (inst / "frames").mkdir(parents=True)
    (inst / "instance.json").write_text("{}")
    editor = tmp_path / "UnrealEditor-Cmd"  # a stand-in editor: says who it runs as
    editor.write_text("#!/bin/sh\necho uid=$(id -u) home=$HOME\ntouch \"$1/written\"\n")
    editor.chmod(0o755)
    tmp_path.chmod(0o755)
    user = engine_user(UnrealConfig(run_as="nobody"), [inst])
    assert user == (nobody.pw_uid, nobody.pw_gid, os.getgrouplist("nobody", nobody.pw_gid))
    assert (inst / "frames").stat().st_uid == nobody.pw_uid
    rc, text = run_editor([str(editor), str(inst)], {"PATH": "/usr/bin:/bin"}, user=user)
    assert rc == 0 and f"uid={nobody.pw_uid}" in text and f"home={nobody.pw_dir}" in text
    assert (inst / "written").stat().st_uid == nobody.pw_uid  # it could write its folder
    with pytest.raises(Exception, match="no-such-user-here"):
        engine_user(UnrealConfig(run_as="no-such-user-here"), [inst])
