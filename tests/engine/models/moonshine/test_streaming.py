"""Incremental frontend + encoder == the reference offline encoder, for any chunking, on both backends."""

from __future__ import annotations

import numpy as np
import pytest

from engine.models.moonshine.streaming import StreamingEncoder
from tests.conftest import MOON_MODELS, golden


def run_stream(m, audio, chunk):
    se = StreamingEncoder(m)
    st = se.initial()
    outs = []
    for i in range(0, len(audio), chunk):
        st, x = se.advance(st, audio[i : i + chunk])
        if x is not None:
            outs.append(m.B.to_numpy(x))
    return se, st, outs


@pytest.mark.parametrize("backend", ["numpy", "mlx"])
@pytest.mark.parametrize("name", MOON_MODELS)
@pytest.mark.parametrize("chunk", [160, 1280, 16000, 777])
def test_incremental_equals_offline(backend, name, chunk, fixture_model, rel_err):
    g = golden(name, "speech")
    m = fixture_model(name, backend)
    se, st, outs = run_stream(m, g["audio"], chunk)
    final = np.concatenate(outs)
    T = g["encoder"].shape[0]
    assert final.shape[0] == T - m.lookahead == st.n_final  # the look-ahead frames are still provisional
    assert rel_err(final, g["encoder"][: len(final)]) < 1e-5
    tail = m.B.to_numpy(se.provisional(st))
    assert rel_err(np.concatenate([final, tail]), g["encoder"]) < 1e-5
    # finishing the segment makes the provisional frames final, with the same values
    st2, x = se.advance(st, np.zeros(0, np.float32), final=True)
    assert st2.n_final == T and rel_err(m.B.to_numpy(x), tail) == 0.0


@pytest.mark.parametrize("name", MOON_MODELS)
def test_provisional_tail_equals_offline_encoder_of_the_prefix(name, fixture_model, rel_err):
    g = golden(name, "speech")
    m = fixture_model(name, "numpy")
    for key in (k for k in g if k.startswith("encoder_prefix_")):
        k = int(key.rsplit("_", 1)[1])
        se, st, outs = run_stream(m, g["audio"][: 1280 * k], 1280)
        tail = se.provisional(st)
        parts = outs + ([m.B.to_numpy(tail)] if tail is not None else [])
        assert rel_err(np.concatenate(parts), g[key]) < 1e-5, key


def test_state_stays_bounded(fixture_model):
    """Per layer the encoder keeps at most L-1 keys plus the pending look-ahead, however long the input."""
    g = golden("moon_tiny_like", "noise")
    m = fixture_model("moon_tiny_like", "numpy")
    se = StreamingEncoder(m)
    st = se.initial()
    audio = np.tile(g["audio"], 4)
    for i in range(0, len(audio), 1280):
        st, _ = se.advance(st, audio[i : i + 1280])
        for layer, ls in zip(m.enc_layers, st.layers):
            L, R = layer.window
            assert ls.k.shape[1] <= (L - 1) + max(R, 1) - 1 + 4
            assert ls.x.shape[0] <= max(R, 1) - 1 + 4
        assert st.conv1.buf.shape[0] <= 8 and st.conv2.buf.shape[0] <= 8 and len(st.rem) < 80
