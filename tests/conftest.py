from __future__ import annotations

import os
from pathlib import Path

import pytest

from stages.config import SampleLibraryConfig
from stages.sample_library import build_sample_library

REPO = Path(__file__).resolve().parent.parent
os.environ.setdefault("DVC_NO_ANALYTICS", "1")


@pytest.fixture(scope="session")
def sample_library(tmp_path_factory) -> Path:
    """The real sample library, built once per session with the default config."""
    out = tmp_path_factory.mktemp("lib") / "sample"
    build_sample_library(out, SampleLibraryConfig())
    return out
