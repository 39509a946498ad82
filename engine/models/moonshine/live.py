"""Moonshine live session: voice-activity segments, incremental encoder, fast partials, committed lines.

Per fed block: Silero VAD per 32 ms hop opens and closes segments (pre-roll, hang-over, soft and hard
length caps). Audio of an open segment goes straight into the exact incremental encoder; each newly final
frame gets its memory row and its cross-attention K/V appended for every decoder layer (never recomputed).

Partials (every ``partial_ms`` of audio, or less often when the last one's cost would not fit in the compute
time the rest of the work leaves free, so that the session keeps up with real time): the
provisional look-ahead tail is computed on the side and appended temporarily, then the open segment is
decoded with prefix reuse: one teacher-forced pass over the previous hypothesis keeps the agreeing prefix,
greedy decoding continues from the first disagreement. The stable prefix is what two consecutive partials
agree on.

Commit (segment end): all frames made final, a final decode (prefix reuse again) gives the line.
A segment that ends by silence decodes its audio only up to the last active VAD hop plus ``tail_pad``
(``VadOptions``), the "span end". The hang-over that closes the segment is longer than that pad, so the
line's decode is speculative: when the encoder has been fed up to the span end, its (immutable) state is
kept, a finalised copy gives the last memory frames and the final decode runs at once; when the segment
then closes with no new activity, the line is committed from that result without further work. A hop
at or above ``release`` before the close moves the span end and drops the speculation (the real encoder
state was never touched, and the copy's memory rows lie past the real state's final frames, which later
frames overwrite). Length cuts and ``finish()`` with the span end not yet reached decode all audio fed.
Parity contract: with ``repetition_stop=0`` a committed line's tokens equal the reference ``generate()``
(greedy, ``max_new_tokens = ceil(6.5 * seconds)``) on the segment's audio, ``Line.span`` (whole 80-sample
frames from the segment start), whether it was decoded speculatively or at the close (``speculate=False``).
Segments shorter than ``min_speech`` of speech are dropped undecoded.
A new segment resets all model state, so memory and cost per chunk stay flat however long the session.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass

import numpy as np

from ...audio.finite import door
from ...events import CaptionEvent, Line
from ...vad import HOP, Segmenter, SegmentEvent, SileroVad, VadOptions
from .decoding import _repeats
from .model import MoonshineModel, token_cap
from .streaming import StreamingEncoder

RATE = 16000
WIN = 160  # 10 ms energy windows for line times
LOAD_TAU = 2.0  # seconds of audio over which the compute load is averaged
ENCODE_BATCH = 2560  # samples (160 ms) queued before an encoder step when no partial or span end needs it


@dataclass(frozen=True)
class _Final:
    """A segment's final decode: ids (None = dropped), segment samples decoded, refined speech span."""

    ids: list[int] | None
    fed: int
    first: int
    last: int
    speech: tuple[int, int]  # the VAD's (first, last) speech samples it was made for


class LiveSession:
    """``feed(pcm) -> [CaptionEvent]``; ``finish()``; ``reset()``. Options: see ``__init__``."""

    def __init__(self, model: MoonshineModel, partial_ms: float = 160.0, repetition_stop: int = 4,
                 vad: VadOptions | None = None, vad_model=None, speculate: bool = True):
        self.m, self.B = model, model.B
        self.speculate = bool(speculate)  # False: same lines, decoded when the segment closes (tests)
        self.enc = StreamingEncoder(model)
        self.opts = vad or VadOptions()
        self.partial_ms = float(partial_ms)
        self.repetition_stop = int(repetition_stop)
        self.vad = vad_model or SileroVad()
        c = model.cfg
        max_frames = int(self.opts.max_len * RATE) // (4 * c.encoder.frame_len) + 8
        self.frame_cap = min(max_frames + model.lookahead, c.max_position_embeddings)
        self.cap_tokens = token_cap(int(self.opts.max_len * RATE) + HOP) + 2
        dt = model.dtype
        self.xkv = [(model.B.zeros((c.num_key_value_heads, self.frame_cap, c.head_dim), dt),
                     model.B.zeros((c.num_key_value_heads, self.frame_cap, c.head_dim), dt)) for _ in model.dec_layers]
        self.cache = model.new_self_cache(self.cap_tokens + 1)
        self.seg = Segmenter(self.opts)
        self.invalid_samples = 0  # NaN/inf/huge samples zeroed at the door (engine.audio.finite)
        self.reset()

    # ---- lifecycle ----------------------------------------------------------------------------
    def reset(self) -> None:
        """Drop all audio and state; the next sample is time 0."""
        self.vad.reset()
        self.seg.reset()
        self.pos = 0  # samples received
        self.pending = np.zeros(0, np.float32)  # < 1 hop, not yet seen by the VAD
        self.to_encode: list[np.ndarray] = []  # open-segment audio not yet given to the encoder
        keep = -(-int(self.opts.preroll * RATE) // HOP) + self.opts.start_hops + 1
        self.ring: deque[tuple[int, np.ndarray]] = deque(maxlen=keep)  # recent hops while idle
        self.open = False
        self.partial_cost = 0.0  # seconds the last partial took
        self.load = 0.0  # compute seconds per audio second of everything but partials (moving average)
        self.last_partial_at = 0
        self.shown: Line | None = None
        self.stats = {"commits": 0, "speculative": 0}  # committed lines; those served by a speculative decode
        self._new_segment(0)

    def _new_segment(self, start: int) -> None:
        self.state = self.enc.initial()
        self.seg_start = start
        self.fed = 0  # samples of this segment given to the encoder
        self.hyp: list[int] = []
        self.prev_partial: list[int] = []
        self.rms: list[float] = []  # per 10 ms of segment audio, for tight line times
        self.rms_rest = np.zeros(0, np.float32)
        self._drop_speculation()

    def _drop_speculation(self) -> None:
        self.snap = None  # encoder state when exactly ``snap_end`` segment samples had been fed
        self.snap_end = -1
        self.spec: _Final | None = None  # the line decoded from ``snap`` (None: not yet / not speculating)
        self.spec_shown = False  # its text went out as the partial

    def _span_end(self, active: int | None = None) -> int:
        """Segment samples a line ending by silence decodes: the last active hop (``active``, default the
        segmenter's now) plus the tail pad, in whole encoder input frames."""
        fl = self.m.cfg.encoder.frame_len
        end = (self.seg.last_active if active is None else active) + int(self.opts.tail_pad * RATE) - self.seg_start
        return -(-end // fl) * fl

    def feed(self, pcm: np.ndarray) -> list[CaptionEvent]:
        """Float32 16 kHz mono samples in; caption events out (commits in order, then the partial)."""
        t0 = time.perf_counter()
        pcm, bad = door(pcm)
        self.invalid_samples += bad
        audio = np.concatenate([self.pending, pcm]) if len(self.pending) else pcm
        events: list[CaptionEvent] = []
        n = len(audio) // HOP
        hop_start = self.pos - len(self.pending)
        for i in range(n):
            events += self._hop(hop_start + i * HOP, audio[i * HOP : (i + 1) * HOP])
        self.pending = audio[n * HOP :].copy()
        self.pos += len(pcm)
        # Partials get the compute the rest leaves free, so the session keeps up with real time when it
        # can (the cadence stretches on slow machines / large models instead of falling behind).
        every = max(self.partial_ms / 1000, self.partial_cost / max(1.0 - self.load, 0.1)) * RATE
        partial_due = (self.open and self.spec is None and self.partial_ms > 0
                       and self.pos >= self.last_partial_at + every)
        self._flush_encoder(force=partial_due)
        if len(pcm):
            w = min(1.0, len(pcm) / (LOAD_TAU * RATE))
            self.load += w * ((time.perf_counter() - t0) * RATE / len(pcm) - self.load)
        if self.open and self.spec is not None:
            # The line's final decode already ran: show it, and skip partials while it holds.
            if not self.spec_shown and self.spec.ids is not None:  # (None: too little speech, no line)
                self.spec_shown = True
                self.last_partial_at = self.pos
                ev = self._show(self.spec.ids)
                if ev:
                    events.append(ev)
        elif self.open and self.partial_ms > 0:
            # In a quiet run with the span end due before the next partial: the speculative decode will
            # show the whole line sooner than a partial would, and the partial's cost would delay it.
            soon = self.seg.quiet > 0 and self._span_end() - self.fed <= every
            if self.pos >= self.last_partial_at + every and not soon:
                ev = self._partial()
                if ev:
                    events.append(ev)
        return events

    def finish(self) -> list[CaptionEvent]:
        """Close any open segment (committing it) and return the last events; the session can go on."""
        events: list[CaptionEvent] = []
        if self.open:
            if len(self.pending):
                self.to_encode.append(self.pending)
            self._flush_encoder(speculate=False)
            g = self.seg
            ev = self._commit(SegmentEvent("end", self.pos, (g.first_speech, max(g.last_speech, g.first_speech)),
                                           active=g.last_active))
            events.append(ev)
            self.seg.reset()
            self.seg.floor = self.pos
        self.pending = np.zeros(0, np.float32)
        return events

    # ---- per hop ------------------------------------------------------------------------------
    def _hop(self, start: int, hop: np.ndarray) -> list[CaptionEvent]:
        events = []
        p = self.vad(hop)
        if self.open:
            self.to_encode.append(hop)
        else:
            self.ring.append((start, hop))
        for se in self.seg.step(start, p):
            if se.kind == "start":
                self._new_segment(se.sample)
                self.open = True
                for s, h in self.ring:  # pre-roll (and the speech hops that opened the segment)
                    if s + HOP > se.sample:
                        self.to_encode.append(h[max(0, se.sample - s) :])
                self.ring.clear()
                self.last_partial_at = start + HOP
            else:
                self._flush_encoder(speculate=False)  # the close is now: decode in the commit
                events.append(self._commit(se))
        return events

    def _flush_encoder(self, speculate: bool = True, force: bool = True) -> None:
        """Give the audio queued for the open segment to the encoder in one call (fewer, larger steps).
        Unless ``force``d, audio waits until ``ENCODE_BATCH`` samples are queued (or the span end is among
        them): each step reads every encoder weight, so steps of 160 ms read them half as often as 80 ms
        ones. Past a speculation that still holds, the audio waits too: the close will not need it, and
        activity (which drops the speculation) feeds it all then."""
        if not force and self.open and self.snap is None:
            queued = sum(len(a) for a in self.to_encode)
            if queued < ENCODE_BATCH and self._span_end() - self.fed > queued:
                return
        if self.to_encode and not (self.snap is not None and self.snap_end == self._span_end()):
            pcm = np.concatenate(self.to_encode)
            self.to_encode = []
            self._feed_encoder(pcm, speculate)

    def _feed_encoder(self, pcm: np.ndarray, speculate: bool = True) -> None:
        """Encoder and memory for ``pcm``; keeps the state at the span end (splitting ``pcm`` there) and,
        with ``speculate``, runs the final decode on it at once."""
        if self.snap is not None and self.snap_end != self._span_end():
            self._drop_speculation()  # activity moved the span end (the hop that did so is in ``pcm``)
        if self.snap is None and self.open:
            cut = self._span_end() - self.fed
            if 0 <= cut <= len(pcm):
                self._feed_audio(pcm[:cut])
                self.snap, self.snap_end = self.state, self.fed
                if speculate and self.speculate:
                    g = self.seg
                    self.spec = self._final_from(self.snap, self.snap_end, (g.first_speech, g.last_speech))
                    self.hyp = self.spec.ids or self.hyp
                if cut < len(pcm):
                    self.to_encode.append(pcm[cut:])  # waits (see _flush_encoder)
                return
        self._feed_audio(pcm)

    def _feed_audio(self, pcm: np.ndarray) -> None:
        if not len(pcm):
            return
        a = np.concatenate([self.rms_rest, pcm])
        n = len(a) // WIN
        if n:
            self.rms += np.sqrt(np.mean(a[: n * WIN].reshape(n, WIN) ** 2, axis=1)).tolist()
        self.rms_rest = a[n * WIN :]
        before = self.state.n_final
        self.state, x = self.enc.advance(self.state, pcm)
        self.fed += len(pcm)
        if x is not None:
            self._append_memory(x, before)

    def _append_memory(self, frames, offset: int) -> int:
        """Memory rows and cross K/V of ``frames`` written at ``offset``; returns the new frame count."""
        n = frames.shape[0]
        end = min(offset + n, self.frame_cap)
        frames = frames[: end - offset]
        if end <= offset:
            return offset
        for (k, v), (xk, xv) in zip(self.m.cross_kv(self.m.memory(frames, offset)), self.xkv):
            self.B.write(xk, (slice(None), slice(offset, end)), k)
            self.B.write(xv, (slice(None), slice(offset, end)), v)
        return end

    # ---- decoding -----------------------------------------------------------------------------
    def _decode(self, n_frames: int, cap: int) -> list[int]:
        """Greedy ids over the first ``n_frames`` memory frames, reusing the previous hypothesis."""
        m, c = self.m, self.m.cfg
        if n_frames <= 0 or cap <= 0:
            return []
        cap = min(cap, self.cap_tokens)
        xkv = [(k[:, :n_frames], v[:, :n_frames]) for k, v in self.xkv]
        prev = [t for t in self.hyp if t != c.eos_token_id][: cap - 1]
        seq = [c.decoder_start_token_id] + prev
        logits = m.decode(seq, 0, self.cache, xkv, all_logits=True)
        pred = logits.argmax(axis=-1).tolist()
        out: list[int] = []
        for i, t in enumerate(pred):
            out.append(int(t))
            if t == c.eos_token_id or len(out) >= cap or self._looping(out):
                return out
            if i >= len(prev) or t != prev[i]:
                break
        while len(out) < cap:
            t = int(np.argmax(m.decode([out[-1]], len(out), self.cache, xkv)))
            out.append(t)
            if t == c.eos_token_id or self._looping(out):
                break
        return out

    def _looping(self, ids: list[int]) -> bool:
        return self.repetition_stop > 0 and _repeats(ids, self.repetition_stop)

    def _text(self, ids: list[int]) -> str:
        ids = [t for t in ids if t != self.m.cfg.eos_token_id]
        return self.m.tokenizer.decode(ids).strip() if self.m.tokenizer else ""

    def _partial(self) -> CaptionEvent | None:
        t0 = time.perf_counter()
        self.last_partial_at = self.pos
        n = self.state.n_final
        tail = self.enc.provisional(self.state)
        if tail is not None:
            n = self._append_memory(tail, n)  # temporary rows past n_final; overwritten as frames finalise
        ids = self._decode(n, token_cap(self.fed))
        self.hyp = ids
        self.partial_cost = time.perf_counter() - t0
        return self._show(ids)

    def _show(self, ids: list[int]) -> CaptionEvent | None:
        """The partial event for ``ids`` (None when empty or unchanged)."""
        stable = _common_prefix(self.prev_partial, ids)
        self.prev_partial = ids
        text = self._text(ids)
        if not text:
            return None
        stable_text = self._text(ids[:stable])
        n_stable = len(_common_prefix_str(stable_text, text))
        line = Line(text, self.seg.first_speech / RATE, self.pos / RATE, tuple(ids))
        if self.shown is not None and self.shown.text == text:
            return None
        self.shown = line
        return CaptionEvent(partial=line, partial_stable=n_stable)

    def _commit(self, se: SegmentEvent) -> CaptionEvent:
        """Finalise the open segment; returns the event (a committed line unless dropped)."""
        self.open = False
        self.shown = None
        self.to_encode = []  # audio past a speculation's span end (never encoded)
        fl = self.m.cfg.encoder.frame_len
        served = False
        if self.snap is not None and self.snap_end == self._span_end(se.active):
            # Ended by silence past the span end: the line is the speculative decode (made now if needed).
            if self.spec is not None and self.spec.speech == se.speech:
                fin, served = self.spec, True
            else:
                fin = self._final_from(self.snap, self.snap_end, se.speech)
        else:  # a length cut or finish() before the span end: everything fed so far
            fin = self._final_from(self.state, self.fed - self.fed % fl, se.speech, live=True)
        self._drop_speculation()
        if fin.ids is None:
            return CaptionEvent()
        self.stats["commits"] += 1
        self.stats["speculative"] += served
        line = Line(self._text(fin.ids), fin.first / RATE, fin.last / RATE, tuple(fin.ids),
                    span=(self.seg_start / RATE, (self.seg_start + fin.fed) / RATE))
        return CaptionEvent(committed=(line,) if line.text or fin.ids else ())

    def _final_from(self, state, fed: int, speech: tuple[int, int], live: bool = False) -> _Final:
        """The final decode of the segment's first ``fed`` samples, encoded into ``state``: finalises a copy
        of the state (``live``: the session's own, then spent), writes its last memory rows past
        ``state.n_final`` and decodes. ``ids`` None: too little speech (``speech``), the line is dropped."""
        fin_state, x = self.enc.advance(state, np.zeros(0, np.float32), final=True)
        if live:
            self.state = fin_state
        n = fin_state.n_final
        if x is not None:
            n = self._append_memory(x, n - x.shape[0])
        first, last = self._refine(*speech)
        if (last - first) / RATE < self.opts.min_speech or n == 0:
            return _Final(None, fed, first, last, speech)
        return _Final(self._decode(n, token_cap(fed)), fed, first, last, speech)

    def _refine(self, first: int, last: int) -> tuple[int, int]:
        """Speech span tightened to the audio within 20 dB of the segment's speech level (the VAD's hops
        are 32 ms and its probability trails the sound)."""
        r = np.asarray(self.rms)
        i0 = max(0, (first - HOP - self.seg_start) // WIN)
        i1 = min(len(r), (last - self.seg_start) // WIN)
        if i1 - i0 < 2:
            return first, last
        seg = r[i0:i1]
        loud = np.nonzero(seg >= max(0.1 * np.percentile(seg, 90), 1e-3))[0]
        if len(loud) == 0:
            return first, last
        return self.seg_start + (i0 + loud[0]) * WIN, self.seg_start + (i0 + loud[-1] + 1) * WIN


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def _common_prefix_str(a: str, b: str) -> str:
    return a[: _common_prefix(list(a), list(b))]
