"""Transcript export from the app: the formats the dialog offers, all written by ``engine.transcript``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.events import Line


@dataclass(frozen=True)
class ExportFormat:
    """One choice in the export dialog: ``engine_fmt`` and ``options`` go to ``engine.transcript``."""

    key: str
    label: str
    suffix: str
    engine_fmt: str
    timestamps: bool = False

    @property
    def options(self) -> dict[str, Any]:
        return {"timestamps": True} if self.timestamps else {}


FORMATS: tuple[ExportFormat, ...] = (
    ExportFormat("srt", "SubRip subtitles (.srt)", ".srt", "srt"),
    ExportFormat("vtt", "WebVTT subtitles (.vtt)", ".vtt", "vtt"),
    ExportFormat("txt", "Plain text (.txt)", ".txt", "txt"),
    ExportFormat("txt-ts", "Plain text with timestamps (.txt)", ".txt", "txt", timestamps=True),
    ExportFormat("json", "JSON with times (.json)", ".json", "json"),
)


def format_by_key(key: str) -> ExportFormat:
    """The format called ``key`` (SRT when unknown)."""
    return next((f for f in FORMATS if f.key == key), FORMATS[0])


def clock(seconds: float) -> str:
    """``HH:MM:SS`` for a session time in seconds."""
    total = max(int(seconds), 0)
    return f"{total // 3600:02d}:{total // 60 % 60:02d}:{total % 60:02d}"


def render(lines: Sequence[Line], fmt: ExportFormat, audio_end: float | None = None) -> str:
    """The transcript as ``fmt`` would write it (used for the dialog's preview)."""
    from engine.transcript import format_transcript

    return format_transcript(list(lines), fmt.engine_fmt, audio_end=audio_end, **fmt.options)


def export(
    lines: Sequence[Line], path: str | Path, fmt: ExportFormat | None = None, audio_end: float | None = None
) -> None:
    """Write ``lines`` to ``path`` atomically in ``fmt`` (by the path's extension when ``None``). ``audio_end``:
    the seconds of audio the lines come from (``None``: unknown); no time written passes it.

    Raises ``engine.errors.LivecapError`` with one sentence when it cannot: ``ExportError`` for an
    unwritable path, ``UsageError`` for an extension that names no format.
    """
    from engine.transcript import write_transcript

    if fmt is None:
        write_transcript(list(lines), Path(path), audio_end=audio_end)
    else:
        write_transcript(list(lines), Path(path), fmt=fmt.engine_fmt, audio_end=audio_end, **fmt.options)
