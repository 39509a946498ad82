"""Shared test helpers: fixture locations."""

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
