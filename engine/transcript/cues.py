"""Broadcast-style subtitle cues from committed lines.

:func:`make_cues` cuts each :class:`~engine.events.Line` into cues of at most ``max_lines`` text lines of
at most ``max_chars`` characters, and times them. Contract:

- Text is never lost or reordered: the cues' text, joined, equals the lines' text modulo whitespace
  (runs of whitespace become one space or a line break). A cue never spans two Lines; blank Lines give
  no cue.
- Every text line takes at most ``max_chars`` columns and every cue at most ``max_lines`` lines. A column is
  a character, two for an East Asian wide or full-width one (Han, kana, Hangul, most emoji), as screens show
  them: a line of 42 Han characters was twice as wide as a Latin one (subtitle norms for Chinese and Japanese
  are 13-16 characters a line). So a line never has more than ``max_chars`` characters. A word wider than
  ``max_chars`` is hard-split into pieces of at most ``max_chars`` columns (never before a combining mark, nor
  inside an emoji sequence: ZWJ, skin tone, flag; unless that left a piece empty). Text without spaces
  (Chinese, Japanese) is broken between characters, never before closing punctuation, small kana or the
  prolonged-sound mark, and never after an opening bracket.
- Breaks (between cues and between the lines of a cue) prefer, in order: sentence punctuation, clause
  punctuation (commas, semicolons, colons, dashes, 、，), pauses between words, then any space or
  CJK character boundary; hard splits inside a word come last. The lines of a cue are balanced, one
  line when the text fits. Cue boundaries are chosen by dynamic programming over a cost that also
  weighs the number of cues, cue duration (``max_dur``), reading rate (``cps`` characters a second
  against the time the cue can stay up: until the next cue of the Line, or for a Line's last cue
  until a second after the Line ends, since Lines are usually followed by some silence) and cue
  fullness.
- Times: word times from ``Line.words`` when present (matched to the text in order; unmatched text
  is interpolated between its neighbours); otherwise times are interpolated by character position
  within the Line. A cue starts at its first character's time and ends at its last character's, is
  extended into the following silence to ``max(min_dur, chars / cps)`` (at most ``max_dur``) but never
  past the next cue's start, and is cut to ``max_dur``. Starts are non-decreasing and a cue never
  overlaps the next one, so ``end - start`` is at most ``max_dur`` and at least
  ``min(min_dur, next.start - start)`` (input times permitting: a cue squeezed between two starts
  that coincide can have zero length; the usual such cues, Lines decoded after the audio and timed at its end,
  get room before the end: ``end_slots``. Pushing them later instead delayed every cue after them, up to 22 s in
  review; shown together, libass stacked them out of reading order).
- ``audio_end`` (seconds of audio the Lines come from; ``None``: unknown, no limit): no time passes it.
  Line and word times past it are brought back to it before the cut, and a cue's extension into the
  silence stops there (the last cue of a transcript ends by the end of the audio; starts and ends are
  clamped to it, so the rules above hold with ``audio_end`` as the limit of every cue). The last Lines that
  then start at the end itself (decoded after the audio), or a last Line begun less than ``min_dur`` before it
  with less time than its text takes to say, are shown in the ``min_dur`` before it, the Line before them giving
  up to the second half of its time where the room is short (:func:`end_slots`), not as cues of a few ms or
  none; the cut stays as it was.
- The cut of one Line does not depend on the other Lines; only the end of a Line's last cue depends on
  the next cue's start (which :class:`~engine.transcript.live.LiveSrtWriter` relies on).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, replace

from engine.errors import UsageError
from engine.events import Line, Word

FASTEST_SPEECH_CPS = 25.0  # characters a second (spaces included) hardly any speech passes; fast speech is ~20

# ---------------------------------------------------------------- public types


@dataclass(frozen=True)
class Cue:
    """One subtitle: shown from ``start`` to ``end`` (seconds), ``lines`` are its text lines."""

    start: float
    end: float
    lines: tuple[str, ...]

    @property
    def text(self) -> str:
        """The cue's text lines joined by newlines."""
        return "\n".join(self.lines)


@dataclass(frozen=True)
class CueOptions:
    """The limits :func:`make_cues` honours (validated: UsageError on nonsense)."""

    max_chars: int = 42
    max_lines: int = 2
    min_dur: float = 0.83
    max_dur: float = 7.0
    cps: float = 17.0

    def __post_init__(self) -> None:
        if self.max_chars < 1 or self.max_lines < 1:
            raise UsageError("Subtitle cues need at least one line of at least one character.")
        if not (0 <= self.min_dur <= self.max_dur) or self.max_dur <= 0:
            raise UsageError("Subtitle cue durations need 0 <= min_dur <= max_dur and max_dur > 0.")
        if not self.cps > 0:
            raise UsageError("The subtitle reading rate (cps) must be positive.")


@dataclass(frozen=True)
class RawCue:
    """A cue before timing: its speech span, text lines and character count."""

    start: float
    end: float
    lines: tuple[str, ...]
    chars: int


def make_cues(
    lines: Sequence[Line],
    *,
    max_chars: int = 42,
    max_lines: int = 2,
    min_dur: float = 0.83,
    max_dur: float = 7.0,
    cps: float = 17.0,
    audio_end: float | None = None,
) -> list[Cue]:
    """Cut and time ``lines`` into subtitle cues (see the module docstring for the contract); ``audio_end``:
    the length of the audio in seconds, which no cue passes (``None``: unknown)."""
    opts = CueOptions(max_chars, max_lines, min_dur, max_dur, cps)
    limited = limit_lines(lines, audio_end)
    slots = end_slots(limited, audio_end, min_dur)
    raws: list[RawCue] = []
    for i, line in enumerate(limited):
        cut = line_cues(line, opts)
        raws.extend(retime(cut, *slots[i]) if i in slots and cut else cut)
    return time_cues(raws, opts, audio_end)


def check_audio_end(audio_end: float | None) -> float | None:
    """``audio_end`` as a float (``None`` stays ``None``); UsageError unless it is a finite number >= 0."""
    if audio_end is None:
        return None
    end = float(audio_end)
    if not (math.isfinite(end) and end >= 0):
        raise UsageError("The audio length given for the transcript times must be a finite number of seconds >= 0.")
    return end


def limit_lines(lines: Sequence[Line], audio_end: float | None) -> list[Line]:
    """``lines`` with every time (line, words, span) past ``audio_end`` brought back to it; the same Line
    objects when nothing passes it or ``audio_end`` is ``None``."""
    end = check_audio_end(audio_end)
    if end is None:
        return list(lines)

    def cap(t: float) -> float:
        return min(t, end)

    out = []
    for line in lines:
        times = [line.start, line.end, *(t for w in line.words for t in (w.start, w.end)), *(line.span or ())]
        if all(t <= end for t in times):
            out.append(line)
            continue
        words = tuple(Word(w.text, cap(w.start), cap(w.end)) for w in line.words)
        span = (cap(line.span[0]), cap(line.span[1])) if line.span is not None else None
        out.append(replace(line, start=cap(line.start), end=cap(line.end), words=words, span=span))
    return out


def settle_end(lines: Sequence[Line], audio_end: float | None, span: float = 0.83) -> list[Line]:
    """``limit_lines(lines, audio_end)`` with the last Lines that :func:`end_slots` gives a slot moved into it:
    the Line's start and end become the slot's and its words (and ``span``) are mapped into it, linearly from
    the Line's own times, or spread by characters where those have no length. So a Line or word decoded after
    the audio ended is not written with a time of no length (TXT and JSON; cues retime their own pieces)."""
    limited = limit_lines(lines, audio_end)
    slots = end_slots(limited, audio_end, span)
    end = check_audio_end(audio_end)
    return [
        _moved(line, *slots[i]) if i in slots else _last_words(line, end, span) if end is not None else line
        for i, line in enumerate(limited)
    ]


def _last_words(line: Line, end: float, span: float) -> Line:
    """``line`` with its last words that lie at ``end`` itself with no length (decoded after the audio) spread by
    characters over the time before ``end`` after the word before them (at most ``span``); where that word runs to
    ``end`` too, it gives up to its second half."""
    words = list(line.words)
    k = len(words)
    while k and words[k - 1].start >= end:
        k -= 1
    if k == len(words):
        return line
    floor = max(words[k - 1].end if k else line.start, end - span)
    if k and words[k - 1].end >= end:
        prev = words[k - 1]
        floor = max(prev.start + (end - prev.start) / 2, end - span)
        words[k - 1] = Word(prev.text, prev.start, floor)
    if floor >= end:
        return line
    tail = _spread(words[k:], floor, end)
    return replace(line, start=min(line.start, floor), words=tuple(words[:k]) + tail)


def _spread(words: Sequence[Word], start: float, end: float) -> tuple[Word, ...]:
    """``words`` one after another over ``start .. end``, each taking a share by its characters."""
    total, done, out = sum(len(w.text) or 1 for w in words), 0, []
    for w in words:
        a = start + (end - start) * done / total
        done += len(w.text) or 1
        out.append(Word(w.text, a, start + (end - start) * done / total))
    return tuple(out)


def _moved(line: Line, start: float, end: float) -> Line:
    lo, hi = line.start, line.end
    if hi > lo:

        def at(t: float) -> float:
            return start + (min(max(t, lo), hi) - lo) * (end - start) / (hi - lo)

        words = tuple(Word(w.text, at(w.start), at(w.end)) for w in line.words)
    else:
        words = _spread(line.words, start, end)
    return replace(line, start=start, end=end, words=words, span=None if line.span is None else (start, end))


def end_slots(lines: Sequence[Line], audio_end: float | None, span: float) -> dict[int, tuple[float, float]]:
    """New times ``{index: (start, end)}`` for the last Lines of ``lines`` (within the audio: ``limit_lines``) with
    text that start at ``audio_end`` itself: text decoded after the audio ended, such as Voxtral's last words
    held back by its delay, every time of theirs brought back to the end. Their cues had no length, and players
    skip such a cue. Where no Line starts there, the last Line with text is one of them when it starts less than
    ``span`` before the end and has less time than its text takes to say (``FASTEST_SPEECH_CPS``): Stop pressed as
    a sentence began, its times past the end brought back to it, gave a cue a few ms long. Each takes up to
    ``span`` seconds just before the end, sharing the room there is after the Lines before them; where that room
    is shorter than ``span`` each, the Line just before them gives up to the second half of its time (it gets a
    slot as well). Empty when there is no such Line or no room."""
    end = check_audio_end(audio_end)
    spoken = [i for i, line in enumerate(lines) if line.text.strip()]
    if end is None or not spoken:
        return {}
    first = len(spoken)
    while first and lines[spoken[first - 1]].start >= end:
        first -= 1
    if first == len(spoken) and _squeezed(lines[spoken[-1]], end, span):
        first -= 1
    tail, head = spoken[first:], spoken[:first]
    count = len(tail)
    if not count:
        return {}
    floor = max((lines[i].end for i in head), default=0.0)
    slots: dict[int, tuple[float, float]] = {}
    if head and end - floor < span * count:  # too little room: the Line before gives up to the second half of its time
        last = lines[head[-1]]
        before = max((lines[i].end for i in head[:-1]), default=0.0)
        given = max(before, last.start + (min(last.end, end) - last.start) / 2, end - span * count)
        if given < floor:
            floor = given
            slots[head[-1]] = (last.start, floor)
    slot = min(span, (end - floor) / count)
    if slot <= 0:
        return {}
    if count == 1 and lines[tail[0]].start < end:  # begun before the end: it starts no later than it did
        slots[tail[0]] = (min(lines[tail[0]].start, end - slot), end)
        return slots
    slots.update({i: (end - (count - k) * slot, end - (count - k - 1) * slot) for k, i in enumerate(tail)})
    return slots


def _squeezed(line: Line, end: float, span: float) -> bool:
    """Whether ``line`` (its times within the audio) starts less than ``span`` before ``end`` with less time than
    its text takes to say: cut short by the end of the audio, not spoken that fast."""
    room = end - line.start
    return room < span and len(" ".join(line.text.split())) > room * FASTEST_SPEECH_CPS


def retime(raws: Sequence[RawCue], start: float, end: float) -> list[RawCue]:
    """``raws`` (one Line's cues, in order) moved into ``start .. end``: their spans mapped linearly from the
    span they cover, or spread by characters where that span has no length."""
    lo, hi = raws[0].start, max(r.end for r in raws)
    if hi > lo:
        scale = (end - start) / (hi - lo)
        return [replace(r, start=start + (r.start - lo) * scale, end=start + (r.end - lo) * scale) for r in raws]
    total, done, out = sum(r.chars for r in raws) or len(raws), 0, []
    for r in raws:
        a = start + (end - start) * done / total
        done += r.chars or 1
        out.append(replace(r, start=a, end=start + (end - start) * done / total))
    return out


# ---------------------------------------------------------------- character classes

_SENTENCE_END = set(".!?…。！？‼⁇⁈⁉؟।॥")
_CLAUSE_END = set(",;:–—、，；：،؛")
_CLOSERS = set("\"')]}»”’」』）》〉】〕｝］〗〙")
# Never start a line or cue with these (closing punctuation, small kana, marks of repetition/length).
_NO_BREAK_BEFORE = (
    _SENTENCE_END
    | _CLAUSE_END
    | _CLOSERS
    | set("%‰・ー〜～ゝゞヽヾ々")
    | set("ぁぃぅぇぉっゃゅょゎゕゖァィゥェォッャュョヮヵヶㇰㇱㇲㇳㇴㇵㇶㇷㇸㇹㇺㇻㇼㇽㇾㇿ")
    | set("．，：；！？）］｝％")
)
_OPENERS = set("「『（《〈【〔｛［〖〘“‘(")
_TITLES = {"mr.", "mrs.", "ms.", "dr.", "st.", "prof.", "sr.", "jr.", "vs.", "e.g.", "i.e.", "no."}
# English words a line reads better starting with / not ending with (a light touch; other languages
# simply do not match).
_LEADS = {
    "and",
    "but",
    "or",
    "so",
    "because",
    "which",
    "who",
    "when",
    "where",
    "while",
    "if",
    "then",
    "although",
    "though",
    "unless",
    "until",
    "whereas",
}
_WEAK_ENDS = {
    "a",
    "an",
    "the",
    "of",
    "to",
    "in",
    "on",
    "at",
    "for",
    "with",
    "by",
    "from",
    "into",
    "my",
    "your",
    "his",
    "her",
    "our",
    "their",
    "its",
    "i",
    "we",
    "you",
    "very",
    "not",
}


def _is_cjk(ch: str) -> bool:
    """Characters of scripts written without spaces (Han, kana, CJK punctuation, full-width forms)."""
    o = ord(ch)
    return (
        0x2E80 <= o <= 0x2FDF
        or 0x3000 <= o <= 0x31FF
        or 0x3400 <= o <= 0x4DBF
        or 0x4E00 <= o <= 0x9FFF
        or 0xF900 <= o <= 0xFAFF
        or 0xFE30 <= o <= 0xFE4F
        or 0xFF00 <= o <= 0xFFEF
        or 0x20000 <= o <= 0x3FFFF
    )


def _is_mark(ch: str) -> bool:
    return unicodedata.category(ch).startswith("M")


# ---------------------------------------------------------------- atoms: the unbreakable pieces


@dataclass(frozen=True)
class _Atom:
    text: str
    space: bool  # whitespace precedes it in the source (between atoms of the same Line)
    hard: bool  # it continues a hard-split word (a break before it is a last resort)
    start: float
    end: float
    cols: int  # the columns its text takes (``_cols``)


def _cols(text: str) -> int:
    """Columns ``text`` takes: two for an East Asian wide or full-width character, one for any other code point
    (combining ones too, so never fewer than its characters)."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def _glued(text: str, k: int) -> bool:
    """Whether a cut before ``text[k]`` would split what shows as one character: a combining mark or variation
    selector, a zero-width joiner or what follows one, a skin tone, an emoji tag, the second of a flag's pair."""
    ch, prev = text[k], text[k - 1]
    o = ord(ch)
    if _is_mark(ch) or ch == "\u200d" or prev == "\u200d" or 0x1F3FB <= o <= 0x1F3FF or 0xE0020 <= o <= 0xE007F:
        return True
    if not (_regional(ch) and _regional(prev)):
        return False
    run = 0
    while k - 1 - run >= 0 and _regional(text[k - 1 - run]):
        run += 1
    return run % 2 == 1  # flags are pairs of regional indicators


def _regional(ch: str) -> bool:
    return 0x1F1E6 <= ord(ch) <= 0x1F1FF


def _char_times(line: Line) -> tuple[list[float], list[float]]:
    """Start and end time of every character of ``line.text`` (see the module docstring)."""
    text = line.text
    n = len(text)
    t0 = float(line.start)
    t1 = max(float(line.end), t0)
    cs: list[float | None] = [None] * n
    ce: list[float | None] = [None] * n
    cursor = 0
    last_end = t0
    for w in line.words:
        wt = w.text.strip()
        idx = text.find(wt, cursor) if wt else -1
        if idx < 0:
            continue
        ws = min(max(float(w.start), last_end, t0), t1)
        we = min(max(float(w.end), ws), t1)
        for j in range(len(wt)):
            cs[idx + j] = ws + (we - ws) * j / len(wt)
            ce[idx + j] = ws + (we - ws) * (j + 1) / len(wt)
        cursor = idx + len(wt)
        last_end = we
    k = 0
    while k < n:
        if cs[k] is not None:
            k += 1
            continue
        a = k
        while k < n and cs[k] is None:
            k += 1
        ta = ce[a - 1] if a > 0 else t0
        tb = cs[k] if k < n else t1
        assert ta is not None and tb is not None
        tb = max(tb, ta)
        for m in range(a, k):
            cs[m] = ta + (tb - ta) * (m - a) / (k - a)
            ce[m] = ta + (tb - ta) * (m - a + 1) / (k - a)
    return [float(x) for x in cs], [float(x) for x in ce]  # type: ignore[arg-type]


def _word_spans(word: str) -> list[tuple[int, int]]:
    """Split a whitespace-free word into breakable pieces: one per CJK character (punctuation and
    small kana glued to the character before, opening brackets to the one after), Latin runs whole."""
    spans: list[list[int]] = []
    kind = ""  # "cjk" or "latin": what the current span is made of
    glue_next = False
    for k, ch in enumerate(word):
        cjk = _is_cjk(ch)
        if not spans:
            spans.append([k, k + 1])
        elif glue_next or ch in _NO_BREAK_BEFORE or _is_mark(ch):
            spans[-1][1] = k + 1
        elif cjk or kind == "cjk":
            spans.append([k, k + 1])
        else:
            spans[-1][1] = k + 1
        glue_next = ch in _OPENERS and (cjk or kind != "latin" or spans[-1][0] == k)
        if ch not in _NO_BREAK_BEFORE and ch not in _OPENERS and not _is_mark(ch):
            kind = "cjk" if cjk else "latin"
    return [(a, b) for a, b in spans]


def _hard_split(text: str, limit: int) -> list[str]:
    """Cut ``text`` into pieces of at most ``limit`` columns (a character wider than that alone), evenly, never
    inside what shows as one character (``_glued``) unless a piece would be empty."""
    total = _cols(text)
    size = math.ceil(total / math.ceil(total / limit))
    pieces = []
    pos = 0
    while pos < len(text):
        cut, width = pos + 1, _cols(text[pos])
        while cut < len(text) and width + _cols(text[cut]) <= size:
            width += _cols(text[cut])
            cut += 1
        while pos + 1 < cut < len(text) and _glued(text, cut):
            cut -= 1
        pieces.append(text[pos:cut])
        pos = cut
    return pieces


def _atoms(line: Line, opts: CueOptions) -> list[_Atom]:
    """The line's text as atoms with times; every atom takes at most ``max_chars`` columns (or is one character)."""
    cs, ce = _char_times(line)
    atoms: list[_Atom] = []
    for m in re.finditer(r"\S+", line.text):
        for i, (a, b) in enumerate(_word_spans(m.group())):
            a += m.start()
            b += m.start()
            space = i == 0 and bool(atoms)
            piece_start = a
            for j, piece in enumerate(_hard_split(line.text[a:b], opts.max_chars)):
                end = piece_start + len(piece)
                atoms.append(_Atom(piece, space and j == 0, j > 0, cs[piece_start], ce[end - 1], _cols(piece)))
                piece_start = end
    return atoms


def _break_costs(atoms: list[_Atom]) -> list[float]:
    """``cost[k]``: how bad a break between ``atoms[k-1]`` and ``atoms[k]`` is (index 0 unused)."""
    costs = [0.0] * len(atoms)
    for k in range(1, len(atoms)):
        prev, nxt = atoms[k - 1], atoms[k]
        if nxt.hard:
            costs[k] = _HARD
            continue
        core = prev.text.rstrip("".join(_CLOSERS)) or prev.text
        last = core[-1]
        if prev.text.lower() in _TITLES:
            cost = _TITLE
        elif last in _SENTENCE_END:
            cost = _SENTENCE
        elif last in _CLAUSE_END:
            cost = _CLAUSE
        elif nxt.space and nxt.text.lower() in _LEADS:
            cost = _BEFORE_LEAD
        elif nxt.space and prev.text.lower() in _WEAK_ENDS:
            cost = _AFTER_WEAK
        else:
            cost = _PLAIN
        gap = nxt.start - prev.end
        if gap >= 0.5:
            cost = min(cost, _LONG_PAUSE)
        elif gap >= 0.25:
            cost = min(cost, _PAUSE)
        costs[k] = cost
    return costs


# Break costs, and the weights of the cue cost. Tuned by hand on examples; the order is what matters.
_SENTENCE, _CLAUSE, _LONG_PAUSE, _PAUSE, _BEFORE_LEAD = 0.0, 0.5, 2.0, 2.5, 2.7
_PLAIN, _AFTER_WEAK, _TITLE, _HARD = 3.0, 3.6, 4.0, 12.0
_PER_CUE = 2.5
_CUE_BREAK = 3.0  # a bad break between cues costs more than one between the lines of a cue
_OVERLONG, _OVERLONG_PER_S = 10.0, 5.0
_RATE = 4.0
_SHORT = 2.0
_FULLNESS = 3.0
_LINE_TAIL_S = 1.0  # silence assumed after a Line when weighing its last cue's reading rate
_BALANCE = 4.0
_TOP_HEAVY = 0.3


# ---------------------------------------------------------------- cutting one line into cues


def line_cues(line: Line, opts: CueOptions) -> list[RawCue]:
    """Cut one Line into untimed cues (speech spans only); independent of any other Line."""
    atoms = _atoms(line, opts)
    n = len(atoms)
    if n == 0:
        return []
    costs = _break_costs(atoms)
    line_end = max(float(line.end), atoms[-1].end)
    cap = opts.max_chars * opts.max_lines
    best = [math.inf] * (n + 1)
    back = [0] * (n + 1)
    best[0] = 0.0
    for i in range(n):
        if best[i] == math.inf:
            continue
        lines_used, width, chars, cols = 1, atoms[i].cols, len(atoms[i].text), atoms[i].cols
        for j in range(i + 1, n + 1):
            if j > i + 1:
                a = atoms[j - 1]
                space = 1 if a.space else 0
                chars += len(a.text) + space
                cols += a.cols + space
                if width + a.cols + space <= opts.max_chars:
                    width += a.cols + space
                else:
                    lines_used += 1
                    width = a.cols
                if lines_used > opts.max_lines:
                    break
            cost = best[i] + _cue_cost(atoms, costs, i, j, chars, cols, line_end, cap, opts)
            if cost < best[j]:
                best[j] = cost
                back[j] = i
    cuts = [n]
    while cuts[-1] > 0:
        cuts.append(back[cuts[-1]])
    cuts.reverse()
    out = []
    for i, j in zip(cuts[:-1], cuts[1:]):
        text_lines = _wrap(atoms[i:j], costs[i:j], opts)
        chars = sum(len(t) for t in text_lines)
        out.append(RawCue(atoms[i].start, atoms[j - 1].end, tuple(text_lines), chars))
    return out


def _cue_cost(
    atoms: list[_Atom],
    costs: list[float],
    i: int,
    j: int,
    chars: int,
    cols: int,
    line_end: float,
    cap: int,
    opts: CueOptions,
) -> float:
    """The cost of a cue made of ``atoms[i:j]`` (``chars`` characters and ``cols`` columns, spaces included)."""
    start = atoms[i].start
    dur = atoms[j - 1].end - start
    cost = _PER_CUE
    if j < len(atoms):
        cost += _CUE_BREAK * costs[j]
    if dur > opts.max_dur:
        cost += _OVERLONG + _OVERLONG_PER_S * (dur - opts.max_dur)
    limit = atoms[j].start if j < len(atoms) else line_end + _LINE_TAIL_S
    avail = min(opts.max_dur, max(limit - start, dur))
    need = chars / opts.cps
    if avail < need:
        cost += _RATE * (need - avail) / need
    if avail < opts.min_dur:
        cost += _SHORT * (opts.min_dur - avail) / opts.min_dur if opts.min_dur > 0 else 0.0
    cost += _FULLNESS * ((cap - min(cols, cap)) / cap) ** 2
    return cost


def _wrap(atoms: list[_Atom], costs: list[float], opts: CueOptions) -> list[str]:
    """Lay a cue's atoms out in the fewest lines that fit, choosing the best, most balanced breaks."""
    n = len(atoms)
    lines_needed, width = 1, atoms[0].cols
    for a in atoms[1:]:
        add = a.cols + (1 if a.space else 0)
        if width + add <= opts.max_chars:
            width += add
        else:
            lines_needed += 1
            width = a.cols
    if lines_needed == 1:
        return [_join(atoms)]
    total = sum(a.cols + (1 if a.space else 0) for a in atoms) - (1 if atoms[0].space else 0)
    avg = total / lines_needed

    pre = [0]
    for a in atoms:
        pre.append(pre[-1] + a.cols + (1 if a.space else 0))

    def seg_len(i: int, j: int) -> int:
        return pre[j] - pre[i] - (1 if atoms[i].space else 0)

    # best[m][j]: cost of laying atoms[:j] out in m lines
    inf = math.inf
    best = [[inf] * (n + 1) for _ in range(lines_needed + 1)]
    back = [[0] * (n + 1) for _ in range(lines_needed + 1)]
    best[0][0] = 0.0
    for m in range(1, lines_needed + 1):
        for i in range(n):
            if best[m - 1][i] == inf:
                continue
            for j in range(i + 1, n + 1):
                length = seg_len(i, j)
                if length > opts.max_chars and j > i + 1:  # one wide character alone may pass a limit under 2
                    break
                cost = best[m - 1][i] + _BALANCE * ((length - avg) / opts.max_chars) ** 2
                if j < n:
                    cost += costs[j]
                if m == 1 and length > avg + 0.5:
                    cost += _TOP_HEAVY
                if cost < best[m][j]:
                    best[m][j] = cost
                    back[m][j] = i
    cuts = [n]
    for m in range(lines_needed, 0, -1):
        cuts.append(back[m][cuts[-1]])
    cuts.reverse()
    return [_join(atoms[i:j]) for i, j in zip(cuts[:-1], cuts[1:])]


def _join(atoms: list[_Atom]) -> str:
    parts = [atoms[0].text]
    for a in atoms[1:]:
        parts.append(" " + a.text if a.space else a.text)
    return "".join(parts)


# ---------------------------------------------------------------- timing


def time_cues(raws: Sequence[RawCue], opts: CueOptions, audio_end: float | None = None) -> list[Cue]:
    """Time untimed cues in order: monotonic starts, extension to the reading time, no overlaps, and
    (``audio_end`` not ``None``) no time past the end of the audio."""
    limit = check_audio_end(audio_end)
    if limit is None:
        limit = math.inf
    starts: list[float] = []
    prev = -math.inf
    for r in raws:
        prev = max(r.start, prev)
        starts.append(min(prev, limit))
    out = []
    for k, r in enumerate(raws):
        s = starts[k]
        e = min(max(r.end, s), s + opts.max_dur)
        target = min(opts.max_dur, max(opts.min_dur, r.chars / opts.cps))
        if e - s < target:
            e = s + target
        if k + 1 < len(raws):
            e = min(e, starts[k + 1])
        out.append(Cue(s, min(e, limit), r.lines))
    return out
