"""Transcript text formats: SRT, WebVTT, plain text and JSON, from committed lines.

All functions are pure (lines in, text out). SRT and WebVTT go through :func:`make_cues` (the cue
options are passed on as keywords); TXT and JSON keep one entry per Line. Times are rounded to the
millisecond; negative times are written as zero. Every format takes ``audio_end``, the length in seconds of
the audio the lines come from (``None``: unknown): no time written passes it (times past it are written as
it, and the last subtitle cue is not extended past it); text decoded after the audio (at its end itself) is
given time before the end (``cues.settle_end``), never written with no length. Output uses ``\\n`` line
ends and, unless empty, ends with one newline.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

from engine.errors import UsageError
from engine.events import Line
from engine.transcript.cues import Cue, make_cues, settle_end

FORMATS = ("txt", "srt", "vtt", "json")


def milliseconds(t: float) -> int:
    """``t`` seconds as the whole milliseconds the formats write (negative times as zero)."""
    return max(0, int(round(t * 1000)))


def format_timestamp(t: float, sep: str = ".") -> str:
    """``hh:mm:ss<sep>mmm`` (hours grow past two digits when needed); ``sep`` is ``,`` for SRT."""
    ms = milliseconds(t)
    h, rest = divmod(ms, 3_600_000)
    m, rest = divmod(rest, 60_000)
    s, ms = divmod(rest, 1000)
    return f"{h:02d}:{m:02d}:{s:02d}{sep}{ms:03d}"


WORD_JOINER = "\u2060"


def srt_text(text: str) -> str:
    """``text`` for an SRT cue: SubRip has no escapes, and players read ``<...>`` as a tag (``a < b and c > d``
    showed as ``a d``, half of it bold) and ``\\N`` as a line break, so an invisible word joiner (U+2060) follows
    every ``<`` and backslash (checked with ffmpeg's SubRip decoder). Braces stay as they are: libass hides
    ``{...}`` whatever is inside."""
    return text.replace("<", "<" + WORD_JOINER).replace("\\", "\\" + WORD_JOINER)


def srt_block(number: int, cue: Cue) -> str:
    """One SRT cue block (number, times, text lines through :func:`srt_text`), ending with a newline, no blank
    line after."""
    times = f"{format_timestamp(cue.start, ',')} --> {format_timestamp(cue.end, ',')}"
    return f"{number}\n{times}\n" + "".join(srt_text(t) + "\n" for t in cue.lines)


def cues_to_srt(cues: Sequence[Cue], first_number: int = 1) -> str:
    """SRT text for ``cues``: blocks separated by one blank line, numbered from ``first_number``."""
    return "\n".join(srt_block(first_number + k, c) for k, c in enumerate(cues))


def _vtt_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def cues_to_vtt(cues: Sequence[Cue]) -> str:
    """WebVTT text for ``cues``: the ``WEBVTT`` header, then one block per cue (text escaped)."""
    blocks = ["WEBVTT\n"]
    for c in cues:
        times = f"{format_timestamp(c.start)} --> {format_timestamp(c.end)}"
        blocks.append(f"{times}\n" + "".join(_vtt_escape(t) + "\n" for t in c.lines))
    return "\n".join(blocks)


def format_srt(lines: Sequence[Line], **cue_options) -> str:
    """SubRip text (``hh:mm:ss,mmm``), cues from :func:`make_cues` numbered from 1; ``""`` when empty."""
    return cues_to_srt(make_cues(lines, **cue_options))


def format_vtt(lines: Sequence[Line], **cue_options) -> str:
    """WebVTT text (``hh:mm:ss.mmm``) with the cues of :func:`make_cues`; ``&``, ``<``, ``>`` escaped."""
    return cues_to_vtt(make_cues(lines, **cue_options))


def _one_line(text: str) -> str:
    return " ".join(text.split())


def format_txt(lines: Sequence[Line], *, timestamps: bool = False, audio_end: float | None = None) -> str:
    """Plain text: one output line per Line (its text with whitespace runs made single spaces; blank
    Lines left out); with ``timestamps`` each is prefixed ``[hh:mm:ss.mmm --> hh:mm:ss.mmm] ``."""
    out = []
    for line in settle_end(lines, audio_end):
        text = _one_line(line.text)
        if not text:
            continue
        if timestamps:
            text = f"[{format_timestamp(line.start)} --> {format_timestamp(line.end)}] {text}"
        out.append(text + "\n")
    return "".join(out)


def format_json(lines: Sequence[Line], *, audio_end: float | None = None) -> str:
    """A JSON list with one object per Line: ``start``, ``end`` (seconds, ms precision), ``text`` (as
    committed), plus ``tokens`` and ``words`` (``[{text, start, end}]``) when the Line has them."""
    items = []
    for line in settle_end(lines, audio_end):
        item: dict = {"start": milliseconds(line.start) / 1000, "end": milliseconds(line.end) / 1000, "text": line.text}
        if line.tokens:
            item["tokens"] = [int(t) for t in line.tokens]
        if line.words:
            item["words"] = [
                {"text": w.text, "start": milliseconds(w.start) / 1000, "end": milliseconds(w.end) / 1000}
                for w in line.words
            ]
        items.append(item)
    return json.dumps(items, ensure_ascii=False, indent=2) + "\n"


def format_transcript(lines: Sequence[Line], fmt: str, **kw) -> str:
    """Dispatch on ``fmt`` (``txt``, ``srt``, ``vtt`` or ``json``; UsageError otherwise); ``kw`` goes
    to the formatter (``audio_end`` for all, ``timestamps`` for txt, cue options for srt/vtt)."""
    key = fmt.lower()
    if key == "txt":
        return format_txt(lines, **kw)
    if key == "srt":
        return format_srt(lines, **kw)
    if key == "vtt":
        return format_vtt(lines, **kw)
    if key == "json":
        return format_json(lines, **kw)
    raise UsageError(f"Unknown transcript format '{fmt}': use txt, srt, vtt or json.")


def named_format(path: str | os.PathLike[str]) -> str | None:
    """The format a file name's extension names (case-insensitive), or None."""
    ext = os.path.splitext(os.fspath(path))[1].lower().lstrip(".")
    return ext if ext in FORMATS else None


def format_for_path(path: str | os.PathLike[str]) -> str:
    """The format a file name asks for, from its extension (case-insensitive); UsageError otherwise."""
    fmt = named_format(path)
    if fmt is not None:
        return fmt
    raise UsageError(
        f"Cannot tell the transcript format from '{os.fspath(path)}': use a .txt, .srt, .vtt or .json name."
    )
