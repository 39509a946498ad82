"""Shared test helpers: fixture locations, and a cache folder of the suite's own."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

FIXTURES = Path(__file__).parent / "fixtures"
MOON_MODELS = ["moon_small_like", "moon_tiny_like"]
CLIPS = ["noise", "speech", "tone_speechlike"]


def golden(model: str, clip: str) -> dict[str, np.ndarray]:
    """The reference outputs recorded by tests/fixtures/make_fixtures.py (transformers, torch CPU)."""
    with np.load(FIXTURES / "models" / model / "golden" / f"{clip}.npz") as z:
        return {k: z[k] for k in z.files}


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    return FIXTURES


@pytest.fixture(scope="session", autouse=True)
def own_cache(tmp_path_factory: pytest.TempPathFactory):
    """The suite's caches (the 8/4-bit copies of models, platformdirs' user cache) in a folder of its own, for the
    children it starts too: written to the user's ~/.cache, they outlived their tests' models, and a hub test that
    counts the bytes a delete frees (its sweep of stale copies included) counted those left by earlier runs."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))
        yield
