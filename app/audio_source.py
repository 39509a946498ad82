"""What an audio input promises the engine worker (``app.worker``): ``MicSource`` (a microphone), ``FileSource``
(a file replayed as if live), the system-audio sources and ``MixSource`` (``app.sources``) all satisfy
``AudioSource``."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from app.capture import Block


@runtime_checkable
class AudioSource(Protocol):
    """Blocks of captured audio, taken on each worker tick. ``kind`` is ``"microphone"``, ``"system"``,
    ``"both"`` or ``"file"``; ``rate`` the sample rate it captures at; ``description`` names the input for the
    user."""

    kind: str
    rate: int
    description: str

    def open(self) -> None:
        """Start (or resume) capturing; AudioError with one sentence when it cannot."""
        ...

    def close(self) -> None:
        """Stop capturing; blocks already captured stay readable. Idempotent."""
        ...

    def read(self, max_seconds: float | None = None) -> list[Block]:
        """The blocks captured since the last call, oldest first (at most ``max_seconds`` of them)."""
        ...

    @property
    def lost(self) -> bool:
        """The input stopped delivering audio on its own (a device unplugged)."""
        ...

    @property
    def ended(self) -> bool:
        """The input has no more audio (the end of a file; never for a microphone)."""
        ...

    @property
    def is_open(self) -> bool: ...

    @property
    def backlog_seconds(self) -> float:
        """Audio captured but not yet read."""
        ...

    @property
    def dropped_seconds(self) -> float:
        """Audio dropped because the reader fell behind, up to the blocks the last ``read`` returned (all of it
        came before them)."""
        ...
