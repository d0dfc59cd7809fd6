"""The Stage II protocol (#32 item 1): both engines implement it, the typed settings travel in
instance.json as the same bytes as the dict they replaced, and a bad settings object is named."""

from __future__ import annotations

import dataclasses
import json

import pytest

from stages.cluster.keys import render_settings
from stages.config import RenderConfig
from stages.engine.instance_render import InstanceRenderer
from stages.engine.look import Look
from stages.engine.render_settings import RenderSettings, RenderSettingsError
from stages.engine.stage2 import Stage2Failure, Stage2Renderer
from stages.engine.unreal_frames import FramesError, UnrealFrames

# the keys, in order, of the untyped settings dict before RenderSettings (instance.json bytes)
OLD_KEYS = ["width", "height", "spatial_samples", "temporal_samples", "shutter",
            "warmup_frames", "x264_preset", "crf", "encoder_threads", "x264_mbtree", "gop",
            "preview", "preview_x264_preset", "preview_encoder_threads", "mask_scale",
            "align_radius_px", "align_min", "shadow_map_size", "shadow_extent_m", "meter_frames",
            "shadow_pcf_taps", "exposure_key", "tone_map", "ibl_strength", "shading"]


def test_render_settings_serialise_to_the_old_bytes_and_back():
    rcfg = RenderConfig()
    s = render_settings(rcfg, 30)
    d = s.as_dict()
    assert list(d) == OLD_KEYS
    w, h = rcfg.size()
    assert (d["width"], d["height"], d["gop"]) == (w, h, max(1, round(rcfg.gop_s * 30)))
    assert d["ibl_strength"] == rcfg.ibl_strength
    text = json.dumps({"settings": d}, indent=1)
    back = RenderSettings.from_dict(json.loads(text)["settings"])
    assert back == s and json.dumps({"settings": back.as_dict()}, indent=1) == text
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.width = 1  # type: ignore[misc]  # frozen


def test_bad_settings_name_the_keys():
    d = render_settings(RenderConfig(), 30).as_dict()
    del d["shading"]
    d["colour"] = 1
    with pytest.raises(RenderSettingsError, match="inst/instance.json: settings: missing "
                       "key\\(s\\) shading; unknown key\\(s\\) colour"):
        RenderSettings.from_dict(d, "inst/instance.json: settings")


def test_look_has_no_defaults_and_comes_from_the_settings():
    with pytest.raises(TypeError):
        Look()  # type: ignore[call-arg]
    s = render_settings(RenderConfig(), 30)
    look = Look.from_settings(s)
    assert look.ibl_strength == RenderConfig().ibl_strength == 0.6
    assert look.shadow_map_size == s.shadow_map_size and look.shading == s.shading


def test_both_engines_implement_the_stage2_protocol(tmp_path):
    s = render_settings(RenderConfig(), 30)
    assert isinstance(InstanceRenderer(tmp_path, s, "p3headlessgl", tmp_path), Stage2Renderer)
    assert isinstance(UnrealFrames(tmp_path, s.as_dict()), Stage2Renderer)
    assert issubclass(FramesError, Stage2Failure)


def test_encode_settings_come_from_the_render_settings():
    s = render_settings(RenderConfig(), 30).replace(x264_preset="medium", crf=23,
                                                     preview_x264_preset="ultrafast",
                                                     preview_encoder_threads=1)
    e, p = s.encode(), s.preview_encode()
    assert (e.preset, e.crf, e.gop, e.threads, e.mbtree) == ("medium", 23, s.gop,
                                                             s.encoder_threads, s.x264_mbtree)
    assert (p.preset, p.threads, p.crf, p.gop) == ("ultrafast", 1, 23, s.gop)
