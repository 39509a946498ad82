"""Moonshine live session: voice-activity segments, incremental encoder, fast partials, committed lines.

The session wires four parts, each in its own module:

- ``segmenting``: per 32 ms hop, Silero VAD opens and closes segments (pre-roll, hang-over, soft and hard
  length caps);
- ``segment``: the open segment's audio goes into the exact incremental encoder, in steps of at least
  ``ENCODE_BATCH`` samples unless something needs the frames sooner, and every final frame into the
  decoder's memory;
- ``schedule`` and ``decoding.PrefixDecoder``: partials, when due, decode the open segment (the encoder's
  look-ahead tail computed on the side) reusing the previous hypothesis; the stable prefix is what two
  consecutive partials agree on;
- ``speculation``: a line that ends in silence is decoded up to its span end (the last active VAD hop plus
  ``tail_pad``) during the hang-over, and committed from that result when the segment closes.

A segment end commits a line: the speculative decode when it holds, else all frames made final and a final
decode (length cuts and ``finish()`` before the span end decode all audio fed). Segments shorter than
``min_speech`` of speech are dropped undecoded. A new segment resets all model state, so memory and cost per
chunk stay flat however long the session.

Parity contract: with ``repetition_stop=0`` a committed line's tokens equal the reference ``generate()``
(greedy, ``max_new_tokens = ceil(6.5 * seconds)``) on the segment's audio, ``Line.span`` (whole 80-sample
frames from the segment start), whether it was decoded speculatively or at the close (``speculate=False``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ...audio import SAMPLE_RATE
from ...audio.finite import door
from ...events import CaptionEvent, Line
from ...vad import HOP, SegmentEvent, SileroVad, VadOptions
from .decoding import PrefixDecoder, token_cap
from .schedule import PartialSchedule
from .segment import SegmentEncoder
from .segmenting import Segmenting
from .speculation import FinalDecode, Speculation
from .streaming import EncoderState

if TYPE_CHECKING:
    from .model import MoonshineModel

ENCODE_BATCH = 2560  # samples (160 ms) queued before an encoder step when no partial or span end needs it


class LiveSession:
    """``feed(pcm) -> [CaptionEvent]``; ``finish()``; ``reset()``.

    Options: ``partial_ms`` (0 = no partials), ``repetition_stop`` (n-gram guard, 0 = off), ``vad``
    (``VadOptions``), ``vad_model`` (a callable hop -> speech probability with ``reset()``; Silero by default),
    ``speculate`` (False: the same lines, decoded when the segment closes), ``clock`` (seconds, for the
    partial cadence). ``stats`` counts committed lines and those served by a speculative decode.
    """

    def __init__(
        self,
        model: MoonshineModel,
        partial_ms: float = 160.0,
        repetition_stop: int = 4,
        vad: VadOptions | None = None,
        vad_model=None,
        speculate: bool = True,
        clock: Callable[[], float] = time.perf_counter,
    ):
        self.m = model
        self.opts = vad or VadOptions()
        self.speculate = bool(speculate)
        self.segmenting = Segmenting(self.opts, vad_model or SileroVad())
        self.segment = SegmentEncoder(model, self.opts.max_len)
        max_tokens = token_cap(int(self.opts.max_len * SAMPLE_RATE) + HOP) + 2
        self.decoder = PrefixDecoder(model, max_tokens, int(repetition_stop))
        self.schedule = PartialSchedule(partial_ms, clock)
        self.speculation = Speculation()
        self.invalid_samples = 0  # NaN/inf/huge samples zeroed at the door (engine.audio.finite)
        self.reset()

    # ---- lifecycle ----------------------------------------------------------------------------
    def reset(self) -> None:
        """Drop all audio and state; the next sample is time 0."""
        self.segmenting.reset()
        self.schedule.reset()
        self.open = False
        self.shown: Line | None = None
        self.stats = {"commits": 0, "speculative": 0}  # committed lines; those served by a speculative decode
        self._new_segment(0)

    @property
    def pos(self) -> int:
        """Samples received."""
        return self.segmenting.pos

    def _new_segment(self, start: int) -> None:
        self.segment.start(start)
        self.decoder.hyp = []
        self.prev_partial: list[int] = []
        self.speculation.drop()

    def _span_end(self, active: int | None = None) -> int:
        """Segment samples a line ending by silence decodes: the last active hop (``active``, default the
        segmenter's now) plus the tail pad, in whole encoder input frames."""
        fl = self.m.cfg.encoder.frame_len
        if active is None:
            active = self.segmenting.segmenter.last_active
        end = active + int(self.opts.tail_pad * SAMPLE_RATE) - self.segment.start_sample
        return -(-end // fl) * fl

    def feed(self, pcm: np.ndarray) -> list[CaptionEvent]:
        """Float32 16 kHz mono samples in; caption events out (commits in order, then the partial)."""
        schedule, spec = self.schedule, self.speculation
        t0 = schedule.clock()
        pcm, bad = door(pcm)
        self.invalid_samples += bad
        events: list[CaptionEvent] = []
        for step in self.segmenting.push(pcm):
            if step.kind == "audio":
                self.segment.queue.append(step.audio)
            elif step.kind == "start":
                self._new_segment(step.event.sample)
                self.open = True
                self.segment.queue += step.audio  # the pre-roll and the speech hops that opened the segment
                schedule.last_at = step.hop_end
            else:
                self._flush_encoder(speculate=False)  # the close is now: decode in the commit
                events.append(self._commit(step.event))
        every = schedule.interval()
        partial_due = self.open and spec.line is None and schedule.enabled and self.pos >= schedule.last_at + every
        self._flush_encoder(force=partial_due)
        schedule.add_work(len(pcm), schedule.clock() - t0)
        if self.open and spec.line is not None:
            # The line's final decode already ran: show it, and skip partials while it holds.
            if not spec.shown and spec.line.ids is not None:  # (None: too little speech, no line)
                spec.shown = True
                schedule.last_at = self.pos
                ev = self._show(spec.line.ids)
                if ev:
                    events.append(ev)
        elif self.open and schedule.enabled:
            # In a quiet run with the span end due before the next partial: the speculative decode will
            # show the whole line sooner than a partial would, and the partial's cost would delay it.
            soon = self.segmenting.segmenter.quiet > 0 and self._span_end() - self.segment.fed <= every
            if self.pos >= schedule.last_at + every and not soon:
                ev = self._partial()
                if ev:
                    events.append(ev)
        return events

    def finish(self) -> list[CaptionEvent]:
        """Close any open segment (committing it) and return the last events; the session can go on."""
        events: list[CaptionEvent] = []
        if self.open:
            if len(self.segmenting.pending):
                self.segment.queue.append(self.segmenting.pending)
            self._flush_encoder(speculate=False)
            events.append(self._commit(self.segmenting.close()))
        self.segmenting.pending = np.zeros(0, np.float32)
        return events

    # ---- encoder feeding ----------------------------------------------------------------------
    def _flush_encoder(self, speculate: bool = True, force: bool = True) -> None:
        """Give the audio queued for the open segment to the encoder in one call (fewer, larger steps).
        Unless ``force``d, audio waits until ``ENCODE_BATCH`` samples are queued (or the span end is among
        them): each step reads every encoder weight, so steps of 160 ms read them half as often as 80 ms
        ones. Past a speculation that still holds, the audio waits too: the close will not need it, and
        activity (which drops the speculation) feeds it all then."""
        seg, spec = self.segment, self.speculation
        if not force and self.open and spec.state is None:
            queued = seg.queued
            if queued < ENCODE_BATCH and self._span_end() - seg.fed > queued:
                return
        if seg.queue and not spec.holds(self._span_end()):
            self._feed_encoder(seg.take_queue(), speculate)

    def _feed_encoder(self, pcm: np.ndarray, speculate: bool = True) -> None:
        """Encoder and memory for ``pcm``; keeps the state at the span end (splitting ``pcm`` there) and,
        with ``speculate``, runs the final decode on it at once."""
        seg, spec, span_end = self.segment, self.speculation, self._span_end()
        if spec.state is not None and spec.end != span_end:
            spec.drop()  # activity moved the span end (the hop that did so is in ``pcm``)
        if spec.state is None and self.open:
            cut = span_end - seg.fed
            if 0 <= cut <= len(pcm):
                seg.feed(pcm[:cut])
                spec.hold(seg.state, seg.fed)
                if speculate and self.speculate:
                    g = self.segmenting.segmenter
                    spec.line = self._final_from(spec.state, spec.end, (g.first_speech, g.last_speech))
                if cut < len(pcm):
                    seg.queue.append(pcm[cut:])  # waits (see _flush_encoder)
                return
        seg.feed(pcm)

    # ---- text ---------------------------------------------------------------------------------
    def _text(self, ids: list[int]) -> str:
        ids = [t for t in ids if t != self.m.cfg.eos_token_id]
        return self.m.tokenizer.decode(ids).strip() if self.m.tokenizer else ""

    def _partial(self) -> CaptionEvent | None:
        t0 = self.schedule.clock()
        at = self.pos
        ids = self.decoder.decode(self.segment.xkv, self.segment.provisional(), token_cap(self.segment.fed))
        self.decoder.hyp = ids
        self.schedule.partial_done(at, self.schedule.clock() - t0)
        return self._show(ids)

    def _show(self, ids: list[int]) -> CaptionEvent | None:
        """The partial event for ``ids`` (None when empty or unchanged); a last character whose bytes have not
        all come yet is left out until they have."""
        stable = _common_prefix(self.prev_partial, ids)
        self.prev_partial = ids
        tok = self.m.tokenizer
        ids = tok.complete(ids) if tok else ids
        text = self._text(ids)
        if not text:
            return None
        stable_text = self._text(tok.complete(ids[:stable]) if tok else ids[:stable])
        n_stable = len(_common_prefix_str(stable_text, text))
        line = Line(text, self.segmenting.segmenter.first_speech / SAMPLE_RATE, self.pos / SAMPLE_RATE, tuple(ids))
        if self.shown is not None and self.shown.text == text:
            return None
        self.shown = line
        return CaptionEvent(partial=line, partial_stable=n_stable)

    # ---- lines --------------------------------------------------------------------------------
    def _commit(self, se: SegmentEvent) -> CaptionEvent:
        """Finalise the open segment; returns the event (a committed line unless dropped)."""
        self.open = False
        self.shown = None
        seg, spec = self.segment, self.speculation
        seg.queue = []  # audio past a speculation's span end (never encoded)
        fl = self.m.cfg.encoder.frame_len
        served = False
        if spec.holds(self._span_end(se.active)):
            # Ended by silence past the span end: the line is the speculative decode (made now if needed).
            fin = spec.serves(se.speech)
            served = fin is not None
            if fin is None:
                fin = self._final_from(spec.state, spec.end, se.speech)
        else:  # a length cut or finish() before the span end: everything fed so far
            fin = self._final_from(seg.state, seg.fed - seg.fed % fl, se.speech, live=True)
        spec.drop()
        if fin.ids is None:
            return CaptionEvent()
        self.stats["commits"] += 1
        self.stats["speculative"] += served
        start = seg.start_sample
        line = Line(
            self._text(fin.ids),
            fin.first / SAMPLE_RATE,
            fin.last / SAMPLE_RATE,
            tuple(fin.ids),
            span=(start / SAMPLE_RATE, (start + fin.fed) / SAMPLE_RATE),
        )
        return CaptionEvent(committed=(line,) if line.text or fin.ids else ())

    def _final_from(self, state: EncoderState, fed: int, speech: tuple[int, int], live: bool = False) -> FinalDecode:
        """The final decode of the segment's first ``fed`` samples, encoded into ``state`` (``live``: the
        segment's own state, then spent). ``ids`` None: too little speech (``speech``), the line is dropped."""
        n = self.segment.finalise(state, live)
        first, last = self.segment.refine(*speech)
        if (last - first) / SAMPLE_RATE < self.opts.min_speech or n == 0:
            return FinalDecode(None, fed, first, last, speech)
        return FinalDecode(self.decoder.decode(self.segment.xkv, n, token_cap(fed)), fed, first, last, speech)


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def _common_prefix_str(a: str, b: str) -> str:
    return a[: _common_prefix(list(a), list(b))]
