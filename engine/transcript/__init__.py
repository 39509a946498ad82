"""Transcript writers shared by the CLI and the app: subtitle cues, SRT/WebVTT/TXT/JSON text, atomic
file export and a live-growing SRT file.

Public API: :class:`Cue`, :func:`make_cues`, :func:`format_srt`, :func:`format_vtt`, :func:`format_txt`,
:func:`format_json`, :func:`format_transcript`, :func:`format_for_path`, :func:`format_timestamp`,
:func:`write_transcript`, :class:`LiveSrtWriter`, ``FORMATS``.
"""

from engine.transcript.cues import Cue, CueOptions, make_cues
from engine.transcript.export import write_transcript
from engine.transcript.formats import (
    FORMATS,
    format_for_path,
    format_json,
    format_srt,
    format_timestamp,
    format_transcript,
    format_txt,
    format_vtt,
)
from engine.transcript.live import LiveSrtWriter

__all__ = [
    "FORMATS",
    "Cue",
    "CueOptions",
    "LiveSrtWriter",
    "format_for_path",
    "format_json",
    "format_srt",
    "format_timestamp",
    "format_transcript",
    "format_txt",
    "format_vtt",
    "make_cues",
    "write_transcript",
]
