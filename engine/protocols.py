"""What a model and a session promise (design.md, "Engine contracts"), as ``typing.Protocol``s: the app and
the tests depend on these, not on a model family's classes.

Every model family (``engine.models.*``) satisfies ``Model``; each of its sessions satisfies ``Session``.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

from .events import CaptionEvent


@runtime_checkable
class Session(Protocol):
    """A stream of audio in, caption events out. Results never depend on how the audio was chunked."""

    def feed(self, pcm: np.ndarray) -> list[CaptionEvent]:
        """Float32 mono 16 kHz samples (any length) in; the events they complete out.

        Samples that are not mono floats (more channels, integers, ...) raise ``AudioError`` and change nothing.
        """
        ...

    def finish(self) -> list[CaptionEvent]:
        """Flush the tail: commit what is still open."""
        ...

    def reset(self) -> None:
        """Forget all audio; the next sample is time 0."""
        ...


@runtime_checkable
class Model(Protocol):
    """Loaded weights on one backend (``engine.load_model``); sessions are cheap and share them."""

    @property
    def family(self) -> str:
        """``"voxtral_realtime"`` or ``"moonshine_streaming"``."""
        ...

    @property
    def backend_name(self) -> str:
        """The backend it runs on: ``"numpy"`` or ``"mlx"``."""
        ...

    def start_session(self, **options: Any) -> Session:
        """A new session (Voxtral: ``delay_ms``; Moonshine: VAD and partial cadence options); UsageError
        with one sentence for an option it does not take."""
        ...
