"""`wmforge characters` (issue 28): a picture of every guess, opened in Debian's headless
Chromium, on rigs with exporters' quirks and a real FBX2glTF output of a Blender FBX."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from stages.character_sheets import write_sheets
from stages.config import InventoryConfig
from stages.core.model_probe import probe_model
from stages.inventory import run_inventory
from stages.media.character_sheet import to_world

from .rigs import QUADRUPED, write_rig

REAL = Path(__file__).parent / "data" / "real_assets"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update"]


@pytest.fixture(scope="module")
def sheets(tmp_path_factory):
    lib = tmp_path_factory.mktemp("sheets") / "lib"
    write_rig(lib / "Mixamo/Soldier/Soldier.glb", prefix="mixamorig:")
    write_rig(lib / "Mixamo/Soldier/anims/Walking.glb", prefix="mixamorig:", mesh=False,
              clips={"Armature|mixamo.com|Layer0": (0, 0, 1.5)})
    write_rig(lib / "Animals/Fox/Fox.glb", skel=QUADRUPED, armature_quirk=False, scale=100.0,
              clips={"Survey": (0, 0, 0), "Walk": (0, 0, 0.8)})
    (lib / "Blender/Huesitos").mkdir(parents=True)
    shutil.copy(REAL / "fbx2gltf_blender_rigs/huesitos.glb", lib / "Blender/Huesitos/")
    chars = run_inventory(lib, InventoryConfig(), "overrides.yaml").characters
    out = lib.parent / "sheets"
    return lib, chars, out, dict(write_sheets(lib, chars, out))


def test_every_character_gets_a_sheet(sheets):
    from PIL import Image

    lib, chars, out, done = sheets
    assert set(done) == set(chars["character_id"])
    for cid, png in done.items():
        assert png.endswith(".png"), (cid, png)
        img = Image.open(out / png)
        assert img.width >= 900 and img.height >= 400
    # the Soldier's sheet has a panel per mapped clip: W (Walking) and no more
    assert Image.open(out / done["Mixamo/Soldier"]).height > 600


def test_the_sheet_turns_the_model_so_its_toes_point_along_the_arrow(sheets):
    """What the side view draws: after the row's scale and yaw correction, the toes lie
    ahead (+X, the arrow) of the ankles, and the head is at the measured height."""
    lib, chars, _, _ = sheets
    r = chars.set_index("character_id").loc["Mixamo/Soldier"]
    p = probe_model(lib / r.model_path)
    names = ["mixamorig:LeftFoot", "mixamorig:LeftToe_End", "mixamorig:HeadTop_End"]
    foot, toe, head = to_world([p.joints[n] for n in names], r.scale, r.yaw_correction_deg)
    assert toe[0] - foot[0] > 0.1 and abs(toe[1] - foot[1]) < 0.01
    assert head[2] == pytest.approx(1.8, abs=0.01)


def test_index_page_shows_every_sheet_in_a_real_browser(sheets):
    from playwright.sync_api import sync_playwright

    _, chars, out, _ = sheets
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page()
        page.goto((out / "index.html").as_uri())
        page.wait_for_function("() => [...document.images].every(i => i.complete)")
        widths = page.evaluate("() => [...document.images].map(i => i.naturalWidth)")
        titles = page.evaluate("() => [...document.querySelectorAll('h2')].map(h => "
                               "h.textContent)")
        browser.close()
    assert sorted(titles) == sorted(chars["character_id"])
    assert len(widths) == len(chars) and min(widths) >= 900


def test_dataset_card_lists_the_characters_as_measured(sheets):
    from stages.report import characters_section, dataset_card

    _, chars, _, _ = sheets
    text = "\n".join(characters_section(chars))
    assert "| Mixamo/Soldier | humanoid | 1.91 | 1 | 90 | anims/Walking.glb | - | inferred |" \
        in text
    assert "| Animals/Fox | quadruped | 0.73 | 0.01 | 90 | Walk | Survey | inferred |" in text
    assert "wmforge characters" in text
    assert characters_section(None) == []
    assert dataset_card.__defaults__ == (None,)  # the card without characters stays as it was
