"""Voxtral Realtime streaming session: one decoder step per 80 ms of audio, exact and bounded.

Protocol (notes §4): the stream is 32 silent tokens (40 960 zeros) followed by the audio; the prompt is
BOS + [STREAMING_PAD] x (32 + D). Mel frames, the conv stem and the encoder run incrementally (encoder
against a KV ring bounded by its window); once embeddings a_0 .. a_{32+D} exist the decoder is prefilled,
then it steps once per new a_p against a KV ring bounded by its window, feeding back every sampled id.
``finish()`` pads the audio to whole tokens plus D + 1 + 10 silent tokens and steps to EOS.

Parity contract: ``tokens`` (every id after the prompt, specials included, up to and including EOS) equal
the reference ``generate()`` on the same padded audio, whatever the chunking of ``feed``.
A mid-stream EOS does not end a live session: ``tokens`` keeps it, and [STREAMING_PAD] is fed back in its
place so decoding continues (the reference stops there, so parity holds up to that EOS).

Captions: text of position p belongs to audio [(p-32-D)*0.08, (p-31-D)*0.08) s, clamped to the audio fed (text
that comes while ``finish`` steps through the padding ends at the audio's end). All emitted text is final
(greedy, never revised); the partial is the open line and its stable part ends at the last complete word.
A line is committed at a pause (``pause_ms`` of [STREAMING_PAD]), after sentence-final punctuation when the
next word starts, at a word boundary once it passes ``max_chars``, or anywhere (between characters) once it
passes ``HARD_LINE_FACTOR * max_chars`` without a word boundary, so the open line, like everything else a
session holds, stays bounded however long it runs.
"""

from __future__ import annotations

import numpy as np

from ...audio import SAMPLE_RATE
from ...audio.finite import door
from ...errors import UsageError
from ...events import CaptionEvent, Line, Word
from .mel import MelStream
from .tekken import ByteText

LEFT_PAD_TOKENS = 32
SAMPLES_PER_TOKEN = 1280
RIGHT_PAD_EXTRA = 10  # OFFLINE_STREAMING_BUFFER_TOKENS
DELAYS_MS = tuple(range(80, 1201, 80)) + (2400,)
SENTENCE_END = tuple(".?!…。？！")
HARD_LINE_FACTOR = 3  # a line with no word boundary is cut at this many times max_chars (bounded memory)


class VoxtralSession:
    """``feed(pcm) -> [CaptionEvent]``, ``finish()``, ``reset()``; with ``keep_tokens`` ``tokens`` holds the
    raw ids (else nothing: lines carry their own ids, and memory stays constant however long the session)."""

    def __init__(self, model, delay_ms: int = 480, pause_ms: int = 640, max_chars: int = 84, keep_tokens: bool = False):
        if delay_ms not in DELAYS_MS:
            raise UsageError("The Voxtral delay must be a multiple of 80 ms from 80 to 1200, or 2400.")
        self.m, self.B = model, model.B
        self.delay_tokens = delay_ms // 80
        self.pause_steps = max(1, pause_ms // 80)
        self.max_chars = max_chars
        self.ada = model.ada_scales(self.delay_tokens)
        self.keep_tokens = bool(keep_tokens)  # False: ``tokens`` stays empty, memory stays flat (CLI --tokens: True)
        self.invalid_samples = 0  # NaN/inf/huge samples zeroed at the door (engine.audio.finite)
        self.reset()

    # ---- lifecycle ----------------------------------------------------------------------------
    def reset(self) -> None:
        """Start over at time 0 (new rings, new prompt)."""
        m = self.m
        self.mel = MelStream(m.cfg.encoder.num_mel_bins)
        self.mel_pending = self.mel.push(np.zeros(LEFT_PAD_TOKENS * SAMPLES_PER_TOKEN, np.float32))
        self.conv_state = None
        self.enc_ring = m.new_encoder_ring()
        self.dec_ring = m.new_decoder_ring(64)
        self.enc_frames = 0
        self.audio_emb: list = []  # embeddings not yet consumed by the decoder, in position order
        self.emb_pos = 0  # position of audio_emb[0]
        self.next_pos = 0  # next decoder position to run
        self.feed_tok = None  # the id fed back at the next step (a backend int array); None before the prefill
        self.tokens: list[int] = []  # every id after the prompt, only with keep_tokens
        self.steps = 0  # ids produced after the prompt
        self.samples = 0  # real audio samples received
        self.finished = False
        self.ended = False  # EOS seen during finish
        self._new_line()

    def _new_line(self) -> None:
        self.line_ids: list[int] = []
        self.line_text = ByteText()
        self.words: list[list] = []  # [text, start_pos, end_pos]
        self.new_word = True
        self.quiet = 0

    @property
    def prompt_len(self) -> int:
        return 1 + LEFT_PAD_TOKENS + self.delay_tokens

    def feed(self, pcm: np.ndarray) -> list[CaptionEvent]:
        """Float32 16 kHz mono samples in; caption events out."""
        pcm, bad = door(pcm)  # refused input (AudioError) leaves the session as it was
        if self.finished:
            self.reset()
        self.invalid_samples += bad
        self.samples += len(pcm)
        return self._run(self.mel.push(pcm))

    def finish(self) -> list[CaptionEvent]:
        """Pad to whole tokens plus D + 1 + 10 silent tokens, step to EOS, commit the open line."""
        tail = (-self.samples) % SAMPLES_PER_TOKEN + (self.delay_tokens + 1 + RIGHT_PAD_EXTRA) * SAMPLES_PER_TOKEN
        self.finished = True
        # + 40 zeros: the reflect padding of the last mel frame (the stream ends in zeros)
        events = self._run(self.mel.push(np.zeros(tail + 40, np.float32)))
        events += self._commit_line()
        return events

    # ---- audio -> embeddings -> decoder -------------------------------------------------------
    def _run(self, mel: np.ndarray) -> list[CaptionEvent]:
        m = self.m
        mel = np.concatenate([self.mel_pending, mel]) if len(self.mel_pending) else mel
        per = m.cfg.downsample * 2  # mel frames per position (8)
        n_pos = len(mel) // per
        if self.finished:
            # The padded stream has P whole positions; like the reference generate() (max_length = P), the
            # decoder stops after position P - 2, so the last (silent) position is never consumed.
            total = (
                LEFT_PAD_TOKENS * SAMPLES_PER_TOKEN
                + self.samples
                + (-self.samples) % SAMPLES_PER_TOKEN
                + (self.delay_tokens + 1 + RIGHT_PAD_EXTRA) * SAMPLES_PER_TOKEN
            ) // SAMPLES_PER_TOKEN
            n_pos = max(0, min(n_pos, total - 1 - (self.emb_pos + len(self.audio_emb))))
        self.mel_pending = mel[n_pos * per :]
        for b in range(0, n_pos, 16):
            k = min(16, n_pos - b)
            frames, self.conv_state = m.conv_stem(mel[(b * per) : (b + k) * per], self.conv_state)
            enc = m.encoder(frames, self.enc_frames, self.enc_ring)
            self.enc_frames += frames.shape[0]
            emb = m.project(enc)
            self.audio_emb.extend(emb[i : i + 1] for i in range(emb.shape[0]))
        return self._decode()

    def _decode(self) -> list[CaptionEvent]:
        events: list[CaptionEvent] = []
        m, B = self.m, self.B
        if self.ended:
            self.audio_emb.clear()
            return events
        if self.feed_tok is None:
            if len(self.audio_emb) < self.prompt_len:
                return events
            tok = self.m.tok
            prompt = [tok.bos] + [tok.pad] * (self.prompt_len - 1)
            audio = B.concat(self.audio_emb[: self.prompt_len], axis=0)
            logits = m.decoder(prompt, audio, 0, self.dec_ring, self.ada)
            del self.audio_emb[: self.prompt_len]
            self.emb_pos += self.prompt_len
            self.next_pos = self.prompt_len
            t = int(np.argmax(logits))
            self.feed_tok = B.asarray(np.array([self.m.tok.pad if t == self.m.tok.eos else t], np.int32), "int32")
            events += self._emit(t, self.prompt_len - 1)
        # Steps stay on the device: each sampled id is fed back as a device array (a mid-stream EOS replaced
        # by [STREAMING_PAD]) and evaluated asynchronously; the host reads all ids of this call at once.
        tok = self.m.tok
        steps, first = [], self.next_pos
        feed = self.feed_tok
        while self.audio_emb:
            a = self.audio_emb.pop(0)
            self.emb_pos += 1
            nxt = B.argmax(m.decoder(feed, a, self.next_pos, self.dec_ring, self.ada, host=False))
            feed = B.where(nxt == tok.eos, tok.pad, nxt) if not self.finished else nxt
            B.async_eval(feed)
            steps.append(nxt)
            self.next_pos += 1
        self.feed_tok = feed
        if steps:
            ids = B.to_numpy(B.concat(steps, axis=0)).tolist()
            for k, t in enumerate(ids):
                if self.ended:
                    break
                events += self._emit(int(t), first + k)
        return events

    # ---- text ---------------------------------------------------------------------------------
    def _emit(self, t: int, pos: int) -> list[CaptionEvent]:
        """Record the id produced at decoder position ``pos`` and turn it into caption events."""
        tok = self.m.tok
        self.steps += 1
        if self.keep_tokens:
            self.tokens.append(t)
        if t == tok.eos:
            self.ended = self.finished  # a mid-stream EOS never ends a live session ([STREAMING_PAD] is fed back)
            return []
        events: list[CaptionEvent] = []
        if t == tok.pad:
            self.quiet += 1
            if self.quiet == self.pause_steps and self.words:
                events += self._commit_line()
            return events
        self.quiet = 0
        if t == tok.word or t < tok.num_special:
            self.new_word = True
            return events
        b = tok.token_bytes(t)
        starts_word = self.new_word or b[:1] in (b" ", b"\n", b"\t")
        if starts_word and self.words:
            last = self.words[-1][0].rstrip()
            if last.endswith(SENTENCE_END) or len(self.line_text.text) >= self.max_chars:
                events += self._commit_line()
        elif len(self.line_text.text) >= HARD_LINE_FACTOR * self.max_chars and not self.line_text.pending:
            events += self._commit_line()  # no word boundary for that long (text without spaces): cut here
        s = self.line_text.add(b)
        self.line_ids.append(t)
        if starts_word or not self.words:
            self.words.append([s, pos, pos])
        else:
            self.words[-1][0] += s
            self.words[-1][2] = pos
        self.new_word = False
        events.append(self._partial())
        return events

    def _time(self, pos: int) -> float:
        """Seconds of the audio at position ``pos``, never past the audio fed: ids produced while ``finish``
        steps through the silent padding (words the delay held back) belong to the audio's end."""
        t = (pos - LEFT_PAD_TOKENS - self.delay_tokens) * SAMPLES_PER_TOKEN / SAMPLE_RATE
        return min(max(0.0, t), self.samples / SAMPLE_RATE)

    def _word_objs(self) -> tuple[Word, ...]:
        return tuple(Word(w[0].strip(), self._time(w[1]), self._time(w[2] + 1)) for w in self.words if w[0].strip())

    def _partial(self) -> CaptionEvent:
        text = self.line_text.text
        lead = len(text) - len(text.lstrip())
        shown = text.strip()
        stable = sum(len(w[0]) for w in self.words[:-1]) - lead if len(self.words) > 1 else 0
        words = self._word_objs()
        start = words[0].start if words else 0.0
        end = words[-1].end if words else 0.0
        return CaptionEvent(
            partial=Line(shown, start, end, tuple(self.line_ids), words), partial_stable=max(0, min(stable, len(shown)))
        )

    def _commit_line(self) -> list[CaptionEvent]:
        self.line_text.flush()
        words = self._word_objs()
        text = self.line_text.text.strip()
        ids = tuple(self.line_ids)
        self._new_line()
        if not text:
            return []
        return [CaptionEvent(committed=(Line(text, words[0].start, words[-1].end, ids, words),))]
