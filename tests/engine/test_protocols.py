"""Every model family and its sessions satisfy the engine's Protocols (``engine.protocols``), on both
backends, and a session that lacks part of the contract does not."""

from __future__ import annotations

import pytest

from engine import load_model
from engine.protocols import Model, Session
from tests.conftest import FIXTURES


@pytest.mark.parametrize("backend", ["numpy", "mlx"])
@pytest.mark.parametrize(
    "name,options", [("moon_tiny_like", {}), ("moon_tiny_like", {"vad": False}), ("vox_tiny_hf", {"delay_ms": 480})]
)
def test_models_and_sessions_keep_the_contract(backend, name, options):
    m = load_model(FIXTURES / "models" / name, backend=backend)
    assert isinstance(m, Model) and m.backend_name == backend
    assert m.family in ("moonshine_streaming", "voxtral_realtime")
    assert isinstance(m.start_session(**options), Session)


def test_a_partial_session_is_not_a_session():
    class FeedOnly:
        def feed(self, pcm):
            return []

    assert not isinstance(FeedOnly(), Session)
