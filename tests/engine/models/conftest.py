"""Fixtures shared by the model tests: the fixture models, loaded once per test session, and the error
measure the parity checks use."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

import numpy as np
import pytest

from engine import load_model
from tests.conftest import FIXTURES


@pytest.fixture(scope="session")
def fixture_model() -> Callable:
    """``fixture_model(name, backend, dtype=None)``: the model ``tests/fixtures/models/<name>`` on ``backend``,
    loaded once and shared (sessions are cheap; weights are shared)."""

    @cache
    def load(name: str, backend: str, dtype: str | None = None):
        return load_model(FIXTURES / "models" / name, backend=backend, dtype=dtype)

    return load


@pytest.fixture(scope="session")
def rel_err() -> Callable[[np.ndarray, np.ndarray], float]:
    """``rel_err(got, ref)``: the largest absolute difference relative to ``max(1, max |ref|)``."""

    def measure(got: np.ndarray, ref: np.ndarray) -> float:
        return float(np.abs(got - ref).max() / max(1.0, np.abs(ref).max()))

    return measure
