"""Fixtures shared by the backend tests."""

from __future__ import annotations

import pytest

from engine.backends import cpu_pool
from engine.backends.numpy_backend import NumpyBackend


@pytest.fixture
def B(monkeypatch):
    """A NumPy backend whose twin is used whatever the test machine's load; its twin is stopped afterwards."""
    monkeypatch.setattr(cpu_pool.contention, "busy", lambda: False)
    backend = NumpyBackend()
    yield backend
    backend.twin.stop()
