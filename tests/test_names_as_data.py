"""Names are data, never syntax (issue 19, points 1, 6 and 8): a pack ``Village [UE5]`` with a
level ``Meadow, North`` and a character ``Zoë's "bot" ${x}`` go through screening (with the
library's own characters: the default), Stage I, Stage II, captions and shards; a clip that
fails keeps the engine's error text (``detail`` in clips.parquet, the reason on the contact
sheet); a named screening character that does not exist stops the stage at start-up."""

import json
import tarfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from stages import caption, inventory, render, screen, shard, trajectories
from tests.conftest import REPO
from tests.small_library import build_small_library, plain_level

PACK, LEVEL, CHAR = "Village [UE5]", "Meadow, North", 'Zoë\'s "bot" ${x}'
LID, CID = f"{PACK}/{LEVEL}", f"Folk/{CHAR}"


def _missing_buffer_gltf() -> str:
    """A level the inventory accepts (it reads only the JSON) and the engine cannot load."""
    from stages.sample_library import _split_glb

    doc, _ = _split_glb(plain_level("Broken"))
    doc["buffers"] = [{"uri": "Broken.bin", "byteLength": doc["buffers"][0]["byteLength"]}]
    return json.dumps(doc)


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    root = tmp_path_factory.mktemp("names")
    lib = build_small_library(root / "lib", pack=PACK, levels={LEVEL: plain_level(LEVEL)},
                              char_name=CHAR)
    (lib / PACK / "Broken.gltf").write_text(_missing_buffer_gltf())
    inv = root / "inventory"
    assert inventory.main(["--library", str(lib), "--out", str(inv),
                           "--params", str(REPO / "params.yaml")]) == 0
    return root, lib, inv


def common(root: Path, lib: Path) -> list[str]:
    return ["--params", str(REPO / "params.yaml"), "-S", f"library.root={lib}",
            "-S", f"node.work_dir={root / 'work'}", "-S", f"node.snapshot_dir={root / 'snap'}"]


SCREEN = ["-S", "screen.clips=1", "-S", "screen.clip_s=1.0", "-S", "screen.width=128",
          "-S", "screen.height=72"]


def test_screening_uses_the_librarys_characters_and_keeps_error_text(lib):
    root, library, inv = lib
    out = root / "screen"
    assert screen.main(["--inventory", str(inv), "--out", str(out), *common(root, library),
                        *SCREEN, "-S", f"screen.review_file={root / 'none.yaml'}"]) == 0
    clips = pd.read_parquet(out / "clips.parquet")
    levels = pd.read_parquet(out / "levels.parquet").set_index("level_id")
    good = clips[clips["level_id"] == LID]
    assert good["character_id"].tolist() == [CID] and good["stage2"].tolist() == ["ok"]
    assert levels.loc[LID, "verdict"] == "pass", levels.loc[LID].to_dict()
    bad = clips[clips["level_id"] == f"{PACK}/Broken"]
    assert levels.loc[f"{PACK}/Broken", "verdict"] == "fail"
    assert bad["reasons"].tolist() == ["load_failure"]
    # the engine's own words, not just a code
    assert "Broken.bin" in bad["detail"].iloc[0] and "Stage I load_failed" in bad["detail"].iloc[0]
    assert "Broken.bin" in levels.loc[f"{PACK}/Broken", "detail"]
    for lid in (LID, f"{PACK}/Broken"):
        sheet = Image.open(out / levels.loc[lid, "contact_sheet"])
        assert sheet.width >= 5 * 320  # four back-view tiles and a top-view tile, >= 320 px
    # the failed clip's panel carries text (its reason and the error) in the failure colour
    px = np.asarray(Image.open(out / levels.loc[f"{PACK}/Broken", "contact_sheet"])
                    .convert("RGB"))[60:].astype(int)
    red = ((px[..., 0] > 200) & (px[..., 1] < 120) & (px[..., 2] < 120)).sum()
    assert red > 50


def test_unknown_screening_character_is_a_config_error_at_start_up(lib, capsys):
    root, library, inv = lib
    out = root / "screen_bad"
    rc = screen.main(["--inventory", str(inv), "--out", str(out), *common(root, library),
                      *SCREEN, "-S", "screen.characters=[CharacterPack/Alex]"])
    assert rc == 2 and not out.exists()
    err = capsys.readouterr().err
    assert "screen.characters" in err and "CharacterPack/Alex" in err and CHAR in err


def test_stage1_stage2_captions_and_shards_carry_the_names(lib):
    root, library, inv = lib
    traj, ren = root / "traj", root / "renders"
    assert trajectories.main(["--inventory", str(inv), "--out", str(traj),
                              *common(root, library), "-S", "trajectories.per_level=1",
                              "-S", "trajectories.frames=30"]) == 0
    fails = pd.read_parquet(traj / "failures.parquet")
    assert fails["level_id"].tolist() == [f"{PACK}/Broken"]
    meta = json.loads((traj / f"{PACK}__{LEVEL}" / "traj_0000" / "meta.json").read_text())
    assert meta["level_id"] == LID and meta["character_id"] == CID
    assert render.main(["--trajectories", str(traj), "--out", str(ren), *common(root, library),
                        "-S", "render.width=128", "-S", "render.height=72",
                        "-S", "render.spatial_samples=1", "-S", "render.preview=false"]) == 0
    index = pd.read_parquet(ren / "index.parquet")
    assert index["level_id"].tolist() == [LID] and index["character_id"].tolist() == [CID]
    caps, shards = root / "captions", root / "shards"
    assert caption.main(["--renders", str(ren), "--inventory", str(inv), "--out", str(caps),
                         *common(root, library)]) == 0
    assert shard.main(["--renders", str(ren), "--captions", str(caps / "captions.parquet"),
                       "--inventory", str(inv), "--select", str(root / "no_select.parquet"),
                       "--out", str(shards), *common(root, library)]) == 0
    idx = pd.read_parquet(shards / "index.parquet")
    assert idx["level_id"].tolist() == [LID] and idx["character_id"].tolist() == [CID]
    with tarfile.open(shards / idx["shard"].iloc[0]) as tar:
        doc = json.loads(tar.extractfile(f"{idx['key'].iloc[0]}.json").read())
    assert doc["source"]["level_id"] == LID
    assert "." not in idx["key"].iloc[0] and " " not in idx["key"].iloc[0]
