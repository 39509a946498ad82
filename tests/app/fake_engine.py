"""A scripted stand-in for ``engine.load_model`` (a test double of the ENGINE; the app is under test).

The fake session is driven by the audio's energy, so what the (fake) microphone or file delivers really
matters: every 240 ms of voiced audio adds a word to the partial; 320 ms of quiet after some words, or
eight words, commits the line. It works on 80 ms frames with an internal buffer, so the result does not
depend on how the audio is chunked (as the engine contract demands). It records the threads that call
it, so tests can check that only the worker thread touches the model.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np

from engine.errors import ModelError, UsageError
from engine.events import CaptionEvent, Line

RATE = 16000
FRAME = 1280  # 80 ms
WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet")
VOICED_RMS = 0.02
FRAMES_PER_WORD = 3
QUIET_FRAMES_TO_COMMIT = 4
MAX_WORDS = 8

LAST_MODEL: FakeModel | None = None  # set by load_model


class FakeSession:
    """Energy-driven captions; see the module docstring."""

    def __init__(self, model: FakeModel, options: dict) -> None:
        self.model = model
        self.options = options
        self.threads: set[int] = set()
        self.fed_samples = 0
        self.reset()

    def reset(self) -> None:
        self._buf = np.zeros(0, dtype=np.float32)
        self._frames = 0
        self._words: list[str] = []
        self._voiced = 0
        self._quiet = 0
        self._start = 0.0
        self._end = 0.0
        self._word_no = 0
        self._audio_end = float("inf")  # set by ``finish``: what it pads is not audio

    def _line(self) -> Line:
        return Line(" ".join(self._words), self._start, self._end)

    def feed(self, pcm: np.ndarray) -> list[CaptionEvent]:
        self.threads.add(threading.get_ident())
        pcm = np.asarray(pcm, dtype=np.float32)
        assert pcm.ndim == 1, "the engine takes mono float32"
        self.fed_samples += len(pcm)
        if self.model.real_time_factor:
            time.sleep(len(pcm) / RATE * self.model.real_time_factor)
        if self.model.fail_after is not None and self.fed_samples > self.model.fail_after * RATE:
            raise RuntimeError("fake engine exploded")
        self._buf = np.concatenate([self._buf, pcm])
        events = []
        while len(self._buf) >= FRAME:
            frame, self._buf = self._buf[:FRAME], self._buf[FRAME:]
            event = self._frame(frame)
            if event is not None:
                events.append(event)
        return events

    def _frame(self, frame: np.ndarray) -> CaptionEvent | None:
        t0 = self._frames * FRAME / RATE
        self._frames += 1
        t1 = self._frames * FRAME / RATE
        voiced = float(np.sqrt(np.mean(frame.astype(np.float64) ** 2))) > VOICED_RMS
        if voiced:
            if not self._words and self._voiced == 0:
                self._start = t0
            self._voiced += 1
            self._quiet = 0
            self._end = min(t1, self._audio_end)
            if self._voiced % FRAMES_PER_WORD == 0:
                self._words.append(WORDS[self._word_no % len(WORDS)])
                self._word_no += 1
                if len(self._words) >= MAX_WORDS:
                    return self._commit()
                return self._partial()
            return None
        self._quiet += 1
        if self._words and self._quiet >= QUIET_FRAMES_TO_COMMIT:
            return self._commit()
        if not self._words and self._quiet >= QUIET_FRAMES_TO_COMMIT:
            self._voiced = 0
        return None

    def _partial(self) -> CaptionEvent:
        text = " ".join(self._words)
        stable = len(" ".join(self._words[:-1]))
        return CaptionEvent(partial=Line(text, self._start, self._end), partial_stable=stable)

    def _commit(self) -> CaptionEvent:
        line = self._line()
        self._words, self._voiced, self._quiet = [], 0, 0
        return CaptionEvent(committed=(line,))

    def finish(self) -> list[CaptionEvent]:
        self.threads.add(threading.get_ident())
        self._audio_end = self.fed_samples / RATE  # the engines' contract: no time past the audio fed (the pad's)
        events = self.feed(np.zeros((-len(self._buf)) % FRAME, dtype=np.float32)) if len(self._buf) else []
        if self._words:
            events.append(self._commit())
        return events


class FakeModel:
    """What ``load_model`` returns: ``family``, ``backend_name`` and ``start_session``."""

    def __init__(self, source: str, backend: str) -> None:
        self.source = source
        self.family = "voxtral_realtime" if "voxtral" in source else "moonshine_streaming"
        self.backend_name = "numpy" if backend in ("auto", "numpy") else backend
        self.sessions: list[FakeSession] = []
        self.load_thread = threading.get_ident()
        # seconds of work per second of audio ("fake-slower": a feed of a second of audio takes 1.5 s)
        self.real_time_factor = 1.5 if "slower" in source else 0.5 if "slow" in source else 0.0
        self.fail_after: float | None = 1.0 if "explode" in source else None

    def start_session(self, **options: object) -> FakeSession:
        if self.family == "moonshine_streaming" and "delay_ms" in options:
            raise TypeError("moonshine sessions take no delay_ms")
        session = FakeSession(self, dict(options))
        self.sessions.append(session)
        return session

    @property
    def threads(self) -> set[int]:
        """Every thread that loaded this model or called one of its sessions."""
        out = {self.load_thread}
        for session in self.sessions:
            out |= session.threads
        return out


def load_model(source: str, *, backend: str = "auto", quantize: int | None = None, **_: object) -> FakeModel:
    """The fake ``engine.load_model``: "broken" in the source raises ModelError, "crash" a RuntimeError,
    "unquantizable" a UsageError when ``quantize`` is given; the model remembers ``quantize``."""
    global LAST_MODEL
    if "unquantizable" in str(source) and quantize:
        raise UsageError("Quantizing on the NumPy backend needs onnxruntime (pip install onnxruntime).")
    if "broken" in str(source):
        raise ModelError(f"No model found in {source} (no config.json or params.json).")
    if "crash" in str(source):
        raise RuntimeError("segfault-ish\nwith a second line")
    LAST_MODEL = FakeModel(str(source), backend)
    LAST_MODEL.quantize = LAST_MODEL.weight_bits = quantize
    return LAST_MODEL


def transcribe(audio: np.ndarray, source: str = "fake") -> list[Line]:
    """The committed lines the fake produces for ``audio`` fed in one go (the expected transcript)."""
    session = FakeModel(source, "numpy").start_session()
    events = session.feed(audio) + session.finish()
    return [line for event in events for line in event.committed]


def speechlike(pattern: list[tuple[float, float]], rate: int = RATE, amplitude: float = 0.3) -> np.ndarray:
    """Voiced bursts (a 220 Hz tone with harmonics) of ``voiced`` s followed by ``quiet`` s of silence."""
    parts = []
    for voiced, quiet in pattern:
        t = np.arange(int(voiced * rate)) / rate
        tone = np.sin(2 * np.pi * 220 * t) + 0.5 * np.sin(2 * np.pi * 440 * t) + 0.25 * np.sin(2 * np.pi * 660 * t)
        parts.append((amplitude / 1.75 * tone).astype(np.float32))
        parts.append(np.zeros(int(quiet * rate), dtype=np.float32))
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32)


def write_wav(path: str | Path, audio: np.ndarray, rate: int = RATE) -> Path:
    """Write mono float audio as 16-bit PCM WAV."""
    import wave

    pcm = (np.clip(audio, -1, 1) * 32767).astype("<i2")
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm.tobytes())
    return Path(path)
