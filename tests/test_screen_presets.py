"""Screening and scoring presets (issue 19, point 8): production screens with five 10-s 540p
clips and scores with twenty; the sample preset stays small; contact-sheet tiles are >= 320 px."""

import pytest

from stages.config import ConfigError, compose, load_params, validate


def test_production_presets_are_the_papers():
    cfg = validate(compose(["screen=production", "score=production"]), "conf")
    s, c = cfg.screen, cfg.score
    assert (s.clips, s.clip_s, s.preset, s.width, s.height) == (5, 10.0, "540p", 0, 0)
    assert (c.clips, c.clip_s, c.preset, c.width, c.height) == (20, 10.0, "540p", 0, 0)
    assert c.scorer == "laion" and s.characters == [] and s.sheet_tile_w >= 320


def test_sample_preset_is_small_and_screens_with_the_librarys_characters():
    cfg = load_params()
    s = cfg.screen
    assert s.clips * s.clip_s <= 6 and s.width * s.height <= 320 * 180
    assert s.characters == [] and s.sheet_tile_w >= 320


def test_tiles_smaller_than_320_px_are_refused():
    with pytest.raises(ConfigError, match="screen.sheet_tile_w 160"):
        load_params(overrides=["screen.sheet_tile_w=160"])
