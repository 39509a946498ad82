"""The engine's sample door (engine/audio/finite.py): what a session's ``feed`` takes and what it refuses.

Before, ``feed`` flattened a stereo block into interleaved mono (twice as long, the channels alternating) and
took int16 samples as floats 32768 times too loud: wrong transcripts, no error. Now anything that is not mono
float samples is an ``AudioError`` with one sentence, and the refused block changes nothing in the session.
NaN/inf handling has its own tests (tests/reliability/test_samples.py).
"""

from __future__ import annotations

import array
import warnings

import numpy as np
import pytest

from engine import load_model
from engine.audio import read_audio
from engine.audio.finite import door
from engine.errors import AudioError
from tests.conftest import FIXTURES

SPEECH = read_audio(FIXTURES / "audio" / "speech.wav")
SESSIONS = [("moon_tiny_like", {}), ("moon_tiny_like", {"vad": False}), ("vox_tiny_hf", {"keep_tokens": True})]
IDS = ["moonshine-live", "moonshine-whole", "voxtral"]


@pytest.mark.parametrize(
    "pcm",
    [np.arange(6, dtype=np.float32) / 8, np.arange(6) / 8.0, list(np.arange(6) / 8.0), (np.arange(6) / 8.0)[:, None]],
    ids=["float32", "float64", "list", "column"],
)
def test_mono_floats_pass_as_float32(pcm):
    x, bad = door(pcm)
    assert x.dtype == np.float32 and bad == 0
    np.testing.assert_array_equal(x, np.arange(6, dtype=np.float32) / 8)


def test_a_list_of_whole_numbers_is_samples_not_pcm():
    """Review: ``[0, 0, 0]`` (NumPy makes it int64) was refused as integer PCM while ``[0, 0.5, 0]`` passed."""
    x, bad = door([0, 1, 0, -1])
    assert x.dtype == np.float32 and bad == 0 and x.tolist() == [0.0, 1.0, 0.0, -1.0]


@pytest.mark.parametrize(
    "pcm,words",
    [
        (np.zeros((100, 2), np.float32), "shape 100 x 2, not one channel"),
        (np.zeros((2, 100), np.float32), "shape 2 x 100, not one channel"),
        (np.zeros((1, 100, 2), np.float32), "shape 1 x 100 x 2"),
        (np.zeros(100, np.int16), "integers (int16)"),
        (np.zeros(100, np.int32), "divide 32-bit PCM by 2147483648"),
        (np.zeros(100, np.uint8), "integers (uint8)"),
        (memoryview(np.zeros(100, np.int16)), "integers (int16)"),
        (array.array("h", [0] * 100), "integers (int16)"),
        (np.zeros(100, bool), "booleans"),
        (np.zeros(100, np.complex64), "complex numbers"),
        ("0.1 0.2", "text"),
        (None, "not numbers"),
        ([[0.1], [0.1, 0.2]], "flat sequence of numbers"),
    ],
)
def test_anything_but_mono_floats_is_refused_in_one_sentence(pcm, words):
    with pytest.raises(AudioError) as err:
        door(pcm)
    message = str(err.value)
    assert words in message and message.endswith(".") and "\n" not in message


def test_an_array_numpy_cannot_read_is_said_as_such():
    """An MLX bfloat16 array (NumPy has no bfloat16) got the sentence meant for ragged lists."""
    import mlx.core as mx

    with pytest.raises(AudioError, match=r"^The audio samples \(array\) cannot be read as numbers; pass float32"):
        door(mx.zeros(100, dtype=mx.bfloat16))
    assert door(mx.full(4, 0.5, dtype=mx.float16))[0].tolist() == [0.5] * 4


def test_a_refused_block_after_finish_leaves_the_finished_voxtral_session_as_it_was():
    """A finished Voxtral session resets at the next feed; a refused block must not reset it first."""
    s = load_model(FIXTURES / "models" / "vox_tiny_hf", backend="numpy").start_session(keep_tokens=True)
    s.feed(SPEECH[:16000])
    s.finish()
    before = (list(s.tokens), s.samples, s.finished)
    with pytest.raises(AudioError):
        s.feed(np.zeros((1600, 2), np.float32))
    assert (list(s.tokens), s.samples, s.finished) == before


@pytest.mark.parametrize("name,options", SESSIONS, ids=IDS)
def test_a_refused_block_changes_nothing_in_the_session(name, options):
    """Stereo and int16 blocks in the middle of a stream raise and are skipped; the rest transcribes as if they
    had never come, and a [n, 1] column is the same audio as [n]."""
    model = load_model(FIXTURES / "models" / name, backend="numpy")

    def transcript(blocks):
        s = model.start_session(**options)
        events = []
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            for block in blocks:
                try:
                    events += s.feed(block)
                except AudioError:
                    pass
            events += s.finish()
        if options.get("keep_tokens"):
            return list(s.tokens)
        return [list(line.tokens) for ev in events for line in ev.committed]

    half = len(SPEECH) // 2
    plain = transcript([SPEECH[:half], SPEECH[half:]])
    assert plain
    stereo = np.stack([SPEECH[half:], SPEECH[half:]], axis=1)
    int16 = (SPEECH[half:] * 32767).astype(np.int16)
    assert transcript([SPEECH[:half], stereo, int16, SPEECH[half:]]) == plain
    assert transcript([SPEECH[:half, None], SPEECH[None, half:]]) == plain
