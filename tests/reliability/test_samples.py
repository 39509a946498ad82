"""NaN, infinite and absurdly large samples: silenced at the engine's door, counted, never poisoning a model.

Before issue #12, 6 ms of NaN silenced Voxtral for ~22 minutes (the NaN sat in the encoder ring), and a
finite 1e30 overflowed its log-mel power to infinity. Here each family is fed speech with a burst of bad
samples and must produce exactly what it produces with zeros in their place, with no NumPy warning.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from engine import load_model
from engine.audio import read_audio
from engine.audio.finite import MAX_ABS
from tests.reliability.conftest import FIXTURES

BURST = slice(8000, 8096)  # 6 ms, half a second in
BAD = {
    "nan": np.nan,
    "inf": np.inf,
    "-inf": -np.inf,
    "huge": 1e30,
    "max-float": np.finfo(np.float32).max,
    "just-over": MAX_ABS * 1.01,
}


def clip() -> np.ndarray:
    speech = read_audio(FIXTURES / "audio" / "speech.wav")
    return np.concatenate([speech, np.zeros(32000, np.float32), speech])


def run(model, audio, **options):
    """Ids of everything committed (Moonshine) or produced (Voxtral), fed in 80 ms chunks."""
    s = model.start_session(**options)
    events = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a NumPy RuntimeWarning (overflow, invalid value) fails the test
        for i in range(0, len(audio), 1280):
            events += s.feed(audio[i : i + 1280])
        events += s.finish()
    if hasattr(s, "tokens") and options.get("keep_tokens"):
        return list(s.tokens), s.invalid_samples
    return [list(line.tokens) for ev in events for line in ev.committed], s.invalid_samples


MODELS = [
    ("moon_tiny_like", {}),
    ("moon_tiny_like", {"vad": False}),
    ("vox_tiny_hf", {"keep_tokens": True}),
]


@pytest.mark.parametrize("name,options", MODELS, ids=["moonshine-live", "moonshine-whole", "voxtral"])
@pytest.mark.parametrize("kind", list(BAD))
def test_invalid_samples_are_silence(name, options, kind):
    model = load_model(FIXTURES / "models" / name, backend="numpy")
    audio = clip()
    zeroed = audio.copy()
    zeroed[BURST] = 0.0
    bad = audio.copy()
    bad[BURST] = BAD[kind]
    bad[BURST.start + 1] = -bad[BURST.start + 1]  # both signs
    want, none = run(model, zeroed, **options)
    got, counted = run(model, bad, **options)
    assert none == 0 and counted == BURST.stop - BURST.start
    assert got == want and any(want)


def test_large_but_valid_samples_pass_unchanged():
    from engine.audio.finite import door

    x = np.array([0.5, -1.5, 300.0, -MAX_ABS, MAX_ABS], np.float32)
    y, n = door(x)
    assert n == 0 and np.array_equal(y, x)
    y, n = door(np.array([np.nan, 1.0, np.inf], np.float64))
    assert n == 2 and y.dtype == np.float32 and y.tolist() == [0.0, 1.0, 0.0]


def test_app_status_bar_reports_invalid_audio(qtbot, tmp_path):
    """A replayed file with a NaN burst, through the real engine (Moonshine fixture): the status bar says how
    much audio was silenced."""
    import soundfile

    from app.controller import SessionController
    from app.main_window import MainWindow
    from app.settings import Settings
    from app.worker import default_loader

    audio = clip()
    audio[BURST] = np.nan
    wav = tmp_path / "nan.wav"
    soundfile.write(str(wav), audio, 16000, subtype="FLOAT")
    c = SessionController(loader=default_loader, journal_dir=tmp_path / "journal")
    w = MainWindow(c, Settings(tmp_path / "s.ini"))
    qtbot.addWidget(w)
    try:
        with qtbot.waitSignal(c.model_changed, timeout=30000):
            w.load_model(str(FIXTURES / "models" / "moon_tiny_like"), "numpy")
        with qtbot.waitSignal(c.session_finished, timeout=60000):
            w.start_file(str(wav), 8.0)
        assert c.last_stats is not None and c.last_stats.invalid_samples == 96
        assert not w.status.invalid_label.isHidden()
        assert w.status.invalid_label.text() == "\u26a0 6 ms of invalid audio silenced"
        assert "96 samples (6 ms)" in w.status.invalid_label.toolTip()
    finally:
        c.shutdown(5000)
