"""Looks for tests that build a ReplayRenderer directly: the config's defaults, with the image-based
light at 1.0, the value these tests rendered with before Look lost its own defaults (the
render stage itself always took 0.6 from RenderConfig)."""

from __future__ import annotations

import dataclasses
from typing import Any

from stages.cluster.keys import render_settings
from stages.config import RenderConfig
from stages.engine.look import Look


def look(**over: Any) -> Look:
    base = Look.from_settings(render_settings(RenderConfig(), 30))
    return dataclasses.replace(base, **{"ibl_strength": 1.0, **over})
