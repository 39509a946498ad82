"""What every audio source offers the engine worker, and the endpoints the Source pickers list.

A source (``MicSource``, ``FileSource``, the system-audio sources, ``MixSource``; the contract is
``app.audio_source.AudioSource``) is opened and read on the engine worker thread: ``open()`` raises
``AudioError`` with one sentence; ``read()`` returns the ``Block``s captured since the last call; ``lost``
turns true when the device went away (the worker then falls back to the default device); ``close()`` is
idempotent and ``open()`` after it resumes (pause/resume). Sources may also offer ``notices()`` (sentences
for the user, e.g. "the default output changed") and ``track_levels()`` (per-track levels in dBFS for "Both").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from app.capture import AudioQueue, MicSource, QueuedInput
from engine.errors import AudioError

MIC = "mic"
SYSTEM = "system"
BOTH = "both"
KINDS: tuple[str, ...] = (SYSTEM, MIC, BOTH)
KIND_LABELS = {SYSTEM: "System audio", MIC: "Microphone", BOTH: "Both (mixed)"}
DEFAULT_OUTPUT_LABEL = "Default output (follows changes)"
SERVER_SILENT = "The sound server is not answering (stopped or hung)"  # what each message about it begins with
START_WHEN_SERVER_ANSWERS = f"{SERVER_SILENT}; start again once it does."  # Start refused while it does not


class ServerSilent(AudioError):
    """The sound server did not answer in time: it runs (its socket is open) but is stopped or hung."""


@dataclass(frozen=True)
class Endpoint:
    """A microphone or an output as a picker shows it: ``id`` is stored in the settings and passed back to
    open it; ``name`` is the human name (PulseAudio description, Core Audio or Windows device name)."""

    id: str
    name: str
    is_default: bool = False


def dbfs(sum_sq: float, count: int) -> float:
    """The RMS level, in dBFS, of ``count`` samples whose squares add up to ``sum_sq``; -90 for silence or none."""
    rms = math.sqrt(sum_sq / count) if count else 0.0
    return max(20 * math.log10(rms), -90.0) if rms > 0 else -90.0


def level_db(samples: np.ndarray) -> float:
    """RMS level of ``samples`` in dBFS, -90 for silence or no samples."""
    x = np.asarray(samples, dtype=np.float32).reshape(-1)
    return dbfs(float(np.dot(x, x)), x.size)


class LevelSum:
    """The level of the samples added since the last ``take`` (a meter: ``add`` every block, ``take`` at the
    screen's pace)."""

    def __init__(self) -> None:
        self.sum_sq = 0.0
        self.count = 0

    def add(self, samples: np.ndarray) -> None:
        """Count ``samples`` (any shape) into the level."""
        flat = samples.reshape(-1)
        self.sum_sq += float(np.dot(flat, flat))
        self.count += flat.size

    def take(self) -> float:
        """dBFS of what was added since the last call (-90 when nothing or silence), and start over."""
        level = dbfs(self.sum_sq, self.count)
        self.sum_sq, self.count = 0.0, 0
        return level


class SystemCapture(QueuedInput):
    """System audio read through a ``MicSource`` (``_capture``) that is made anew when the output changes (the
    PulseAudio monitors, the macOS tap). Every capture feeds the one ``queue``, so nothing queued is lost across
    changes; ``notices()`` hands out the sentences for the user; ``lost`` turns true when the capture is lost or
    could not be made again (``_broken``)."""

    kind = "system"
    silence_hint = None  # silence is normal: nothing is playing

    def __init__(self, max_queue_seconds: float = 10.0) -> None:
        self.queue = AudioQueue(max_queue_seconds)
        self._capture: MicSource | None = None
        self._notices: list[str] = []
        self._broken = False

    def _start(self, capture: MicSource) -> None:
        """Open ``capture`` onto the shared queue and make it the current one (``AudioError`` when it cannot)."""
        capture.queue = self.queue
        capture.open()
        self._capture = capture

    def notices(self) -> list[str]:
        """Sentences for the user since the last call (output changes, hints)."""
        out, self._notices = self._notices, []
        return out

    @property
    def lost(self) -> bool:
        return self._broken or (self._capture is not None and self._capture.lost)

    @property
    def is_open(self) -> bool:
        return self._capture is not None
