"""Live session vs the reference: each committed segment's ids == transformers ``generate()`` on that
segment's audio (``Line.span``), both backends in float32, for a clip with two utterances. Both lines go
through the speculative final decode (run in the hang-over, span = up to the last active hop + tail pad)."""

from __future__ import annotations

import numpy as np
import pytest
from make_fixtures import FIXTURES_DIR, reference_greedy

from engine import load_model
from engine.audio import read_audio

RATE = 16000


def two_utterances() -> np.ndarray:
    s = read_audio(FIXTURES_DIR / "audio" / "speech.wav")
    gap = np.zeros(RATE, np.float32)
    return np.concatenate([gap, s, gap, s[::-1].copy(), gap])  # two different utterances


@pytest.mark.parametrize("backend", ["numpy", "mlx"])
@pytest.mark.parametrize("name", ["moon_small_like", "moon_tiny_like"])
def test_committed_segments_equal_generate(name, backend):
    folder = FIXTURES_DIR / "models" / name
    m = load_model(folder, backend=backend, dtype="float32")
    audio = two_utterances()
    session = m.start_session(partial_ms=160, repetition_stop=0)
    lines = []
    for i in range(0, len(audio), 1280):
        lines += [ln for e in session.feed(audio[i : i + 1280]) for ln in e.committed]
    lines += [ln for e in session.finish() for ln in e.committed]
    assert len(lines) == 2
    assert session.stats["speculative"] == 2  # both lines decoded during the hang-over (the default path)
    for ln in lines:
        s0, s1 = (round(t * RATE) for t in ln.span)
        assert (s1 - s0) % 80 == 0
        ref = reference_greedy(folder, audio[s0:s1]).tolist()
        assert list(ln.tokens) == ref, (ln.span, ln.tokens, ref)
