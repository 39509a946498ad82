"""Moonshine live session: VAD segments, commits equal to offline decoding of their audio, partials.

The session is observed through its public parts only: the decoder's counters (``decoder.runs``,
``decoder.passes``), the speculation it holds, the partial schedule (its injected clock and ``partials``)."""

from __future__ import annotations

import time
import tracemalloc

import numpy as np
import pytest

from engine.audio import SAMPLE_RATE as RATE
from engine.audio import read_audio
from engine.models.moonshine.live import LiveSession
from engine.models.moonshine.session import transcribe_segment
from engine.vad import HOP, VadOptions
from tests.conftest import FIXTURES


def speech_clip() -> np.ndarray:
    return read_audio(FIXTURES / "audio" / "speech.wav")


def speech_extent(x: np.ndarray) -> tuple[float, float]:
    """First and last 10 ms window with clear energy: the truth the VAD is judged against."""
    w = 160
    rms = np.sqrt(np.mean(x[: len(x) // w * w].reshape(-1, w) ** 2, axis=1))
    on = np.nonzero(rms > 0.02)[0]
    return on[0] * w / RATE, (on[-1] + 1) * w / RATE


def run(session, audio, chunk):
    events = []
    for i in range(0, len(audio), chunk):
        events += session.feed(audio[i : i + chunk])
    events += session.finish()
    return events


def committed(events):
    return [ln for e in events for ln in e.committed]


def two_utterances():
    s = speech_clip()
    a0, a1 = speech_extent(s)
    gap = np.zeros(RATE, np.float32)
    # silence, utterance, 1 s of silence (between the speech ends), utterance, silence
    first = s[: int(a1 * RATE)]
    second = s[int(a0 * RATE) :]
    audio = np.concatenate([gap, first, gap, second, gap])
    t1 = 1.0 + a0, 1.0 + a1
    off = 1.0 + len(first) / RATE + 1.0
    t2 = off, off + (a1 - a0)
    return audio, [t1, t2]


@pytest.mark.parametrize("backend", ["numpy", "mlx"])
def test_two_utterances_two_segments_at_the_right_times(backend, fixture_model):
    audio, truth = two_utterances()
    m = fixture_model("moon_tiny_like", backend)
    lines = committed(run(m.start_session(repetition_stop=0), audio, 1280))
    assert len(lines) == 2
    for ln, (t0, t1) in zip(lines, truth):
        assert abs(ln.start - t0) < 0.1 and abs(ln.end - t1) < 0.1, (ln.start, ln.end, t0, t1)
        # the committed ids are exactly the greedy decode of the segment's audio (itself checked against
        # the reference goldens); tests/reference checks them against transformers generate() live
        s0, s1 = (round(t * RATE) for t in ln.span)
        assert list(ln.tokens) == transcribe_segment(m, audio[s0:s1])
        assert ln.text == m.tokenizer.decode([t for t in ln.tokens if t != 2]).strip()


def test_commits_do_not_depend_on_chunking(fixture_model):
    audio, _ = two_utterances()
    m = fixture_model("moon_small_like", "numpy")
    ref = committed(run(m.start_session(partial_ms=0), audio, RATE))
    for chunk in (160, 1280, 5000):
        got = committed(run(m.start_session(partial_ms=80), audio, chunk))
        assert [(ln.tokens, ln.span) for ln in got] == [(ln.tokens, ln.span) for ln in ref]


@pytest.mark.parametrize("kind", ["silence", "tone", "quiet_noise"])
def test_no_text_without_speech(kind, fixture_model):
    t = np.arange(8 * RATE) / RATE
    audio = {
        "silence": np.zeros_like(t),
        "tone": 0.3 * np.sin(2 * np.pi * 440 * t),
        "quiet_noise": 0.002 * np.random.default_rng(0).standard_normal(len(t)),
    }[kind].astype(np.float32)
    m = fixture_model("moon_tiny_like", "numpy")
    events = run(m.start_session(), audio, 1280)
    assert committed(events) == [] and all(e.partial is None for e in events)


def test_partials_show_the_open_segment_with_a_stable_prefix(fixture_model):
    audio, truth = two_utterances()
    m = fixture_model("moon_tiny_like", "numpy")
    events = run(m.start_session(partial_ms=160, repetition_stop=0), audio, 1280)
    partials = [e for e in events if e.partial is not None]
    assert partials, "no partial captions"
    for e in partials:
        assert 0 <= e.partial_stable <= len(e.partial.text)
        assert e.stable_text + e.tail_text == e.partial.text
        assert e.partial.start >= truth[0][0] - 0.1
    assert any(e.partial_stable > 0 for e in partials)


def test_partial_reuses_the_previous_hypothesis(fixture_model):
    """Once the hypothesis has settled, a partial is one batched pass plus a few steps, not a fresh decode."""
    s = speech_clip()
    m = fixture_model("moon_tiny_like", "numpy")
    sess = m.start_session(partial_ms=160, repetition_stop=0)
    dec = sess.decoder
    for i in range(0, len(s), 1280):
        runs = dec.runs
        sess.feed(s[i : i + 1280])
        if dec.runs > runs and len(dec.hyp) > 6:
            last = list(dec.passes)  # tokens per decoder pass of the latest decode
    fresh = len(dec.hyp)  # a fresh greedy decode takes one pass per token
    assert last[0] > 1 and len(last) < fresh / 2, (last, fresh)


def _lines_key(lines):
    return [(ln.tokens, ln.text, ln.start, ln.end, ln.span) for ln in lines]


def _energy_vad():
    return _Vad(lambda hop: 1.0 if np.sqrt(np.mean(hop * hop)) > 0.02 else 0.0)


def test_speculative_commit_equals_the_decode_at_the_close(fixture_model):
    """The line decoded during the hang-over is the line the close would decode: same ids, text, times and
    span; the span ends at the tail pad after the last active hop, before the close; ids == offline greedy."""
    audio, _ = two_utterances()
    m = fixture_model("moon_tiny_like", "numpy")
    spec = LiveSession(m, partial_ms=160, repetition_stop=0)
    events = run(spec, audio, 1280)
    lines = committed(events)
    late = LiveSession(m, partial_ms=160, repetition_stop=0, speculate=False)
    assert _lines_key(committed(run(late, audio, 1280))) == _lines_key(lines)
    assert len(lines) == 2
    assert spec.stats == {"commits": 2, "speculative": 2} and late.stats == {"commits": 2, "speculative": 0}
    opts = VadOptions()
    for ln in lines:
        s0, s1 = (round(t * RATE) for t in ln.span)
        assert list(ln.tokens) == transcribe_segment(m, audio[s0:s1])
        # the decoded audio stops the pad after the last active hop, which trails the sound by a few hops
        assert ln.end + opts.tail_pad - 0.01 <= ln.span[1] <= ln.end + opts.tail_pad + 0.2, (ln.end, ln.span)
    # the speculative text went out as the partial before the line was committed
    i = next(k for k, e in enumerate(events) if e.committed)
    assert any(e.partial is not None and e.partial.text == lines[0].text for e in events[:i])


def test_speech_resuming_in_the_hang_over_drops_the_speculation(fixture_model):
    """A pause longer than the tail pad but shorter than the hang-over: the speculative decode runs, speech
    resumes, it is dropped and the segment goes on; one line over both parts, equal to the offline decode."""
    s = speech_clip()
    a0, a1 = speech_extent(s)
    part = s[int(a0 * RATE) : int(a1 * RATE)]
    gap = np.zeros(RATE, np.float32)
    pause = np.zeros(int(0.3 * RATE), np.float32)  # tail pad 0.2 s < pause < hang-over 0.35 s
    audio = np.concatenate([gap, part, pause, part[::-1].copy(), gap])
    m = fixture_model("moon_tiny_like", "numpy")
    sess = LiveSession(m, partial_ms=160, repetition_stop=0, vad=VadOptions(min_speech=0.1), vad_model=_energy_vad())
    made = []  # the session sample at each speculative final decode
    events = []
    for i in range(0, len(audio), HOP):  # one VAD hop per feed: several feeds between speculation and close
        runs, held = sess.decoder.runs, sess.speculation.line
        events += sess.feed(audio[i : i + HOP])
        spec = sess.speculation.line
        if spec is not None:
            assert not committed(events)
            assert sess.segment.fed == sess.speculation.end  # audio past the span end waits while it holds
            new = spec is not held
            if new:
                made.append(sess.pos)
            # no partial while the speculation holds: the only decode is the speculation's own
            assert sess.decoder.runs - runs == (1 if new and spec.ids is not None else 0)
    events += sess.finish()
    lines = committed(events)
    assert len(lines) == 1
    ln = lines[0]
    assert ln.start < 1.1 and ln.end > 1.0 + 2 * len(part) / RATE + 0.2, (ln.start, ln.end)
    s0, s1 = (round(t * RATE) for t in ln.span)
    assert list(ln.tokens) == transcribe_segment(m, audio[s0:s1])
    # one speculation in the pause (dropped), one after the second part (used)
    pause_at = (len(gap) + len(part)) + np.array([0, len(pause)])
    assert any(pause_at[0] < p <= pause_at[1] + 1280 for p in made), (made, pause_at)
    assert sess.stats == {"commits": 1, "speculative": 1}
    late = LiveSession(
        m, partial_ms=160, repetition_stop=0, vad=VadOptions(min_speech=0.1), vad_model=_energy_vad(), speculate=False
    )
    assert _lines_key(committed(run(late, audio, 1280))) == _lines_key(lines)


def test_a_blip_shorter_than_min_speech_gives_no_line(fixture_model):
    """A burst that opens a segment but holds less than ``min_speech`` of speech: dropped undecoded, also
    when its speculation ran in the hang-over."""
    rng = np.random.default_rng(0)
    blip = 0.3 * rng.standard_normal(int(0.15 * RATE))
    audio = np.concatenate([np.zeros(RATE), blip, np.zeros(RATE)]).astype(np.float32)
    m = fixture_model("moon_tiny_like", "numpy")
    sess = LiveSession(m, vad_model=_energy_vad())
    events = run(sess, audio, 1280)
    assert committed(events) == [] and all(e.partial is None for e in events)
    assert sess.decoder.runs == 0 and sess.stats == {"commits": 0, "speculative": 0}


def test_length_cuts_and_finish_decode_all_audio_fed(fixture_model):
    """Hard length cuts (speech going on) and finish() mid-speech commit everything fed; the ids are the
    offline decode of the span and consecutive lines tile the audio."""
    s = speech_clip()
    audio = np.concatenate([s, s[::-1].copy(), s])
    m = fixture_model("moon_tiny_like", "numpy")
    sess = LiveSession(
        m,
        partial_ms=0,
        repetition_stop=0,
        vad=VadOptions(max_len=2.0, soft_max=10.0, min_speech=0.1),
        vad_model=_Vad(lambda hop: 1.0),
    )
    lines = committed(run(sess, audio, 1280))
    assert len(lines) >= 3
    assert sess.stats["speculative"] == 0
    for a, b in zip(lines, lines[1:]):
        assert abs(a.span[1] - b.span[0]) < 0.04, (a.span, b.span)  # the next segment starts at the cut hop
    assert 0 <= len(audio) / RATE - lines[-1].span[1] < 80 / RATE  # finish(): all but the last partial frame
    for ln in lines:
        s0, s1 = (round(t * RATE) for t in ln.span)
        assert list(ln.tokens) == transcribe_segment(m, audio[s0:s1])


def test_soft_cuts_in_short_dips_decode_all_audio_fed(fixture_model):
    """Past ``soft_max`` the first hop under the threshold closes the segment, before any hang-over: the line
    is everything fed (no speculation) and equals the offline decode of its span."""
    s = speech_clip()
    a0, a1 = speech_extent(s)
    part = s[int(a0 * RATE) : int(a1 * RATE)]
    dip = np.zeros(HOP * 2, np.float32)
    audio = np.concatenate(
        [np.zeros(RATE // 2, np.float32), part, dip, part[::-1].copy(), dip, part, np.zeros(RATE, np.float32)]
    )
    m = fixture_model("moon_tiny_like", "numpy")
    # probability 1 on loud hops, 0.4 (between release and threshold) on quiet ones: no quiet run ever
    # starts inside the speech, only a soft cut can close it
    vad = _Vad(lambda hop: 1.0 if np.sqrt(np.mean(hop * hop)) > 0.02 else 0.4)
    sess = LiveSession(
        m,
        partial_ms=160,
        repetition_stop=0,
        vad=VadOptions(soft_max=len(part) / RATE, max_len=30.0, min_speech=0.1),
        vad_model=vad,
    )
    lines = committed(run(sess, audio, 1280))
    assert len(lines) >= 2 and sess.stats["speculative"] == 0
    for ln in lines:
        s0, s1 = (round(t * RATE) for t in ln.span)
        assert list(ln.tokens) == transcribe_segment(m, audio[s0:s1])


def _count_partials(m, audio, slow: float):
    """Partials run for ``audio`` when every encoder step also costs ``slow`` seconds per 80 ms of audio it is
    given and every decode ``slow`` seconds: the session's clock is the wall clock plus that cost, read from
    the session's own counters (audio encoded, decodes run); and the session."""
    sess = None

    def clock():
        return time.perf_counter() + slow * (sess.segment.encoded / 1280 + sess.decoder.runs)

    sess = LiveSession(m, partial_ms=80, repetition_stop=0, vad_model=_energy_vad(), clock=clock)
    run(sess, audio, 1280)
    return sess.schedule.partials, sess


def test_partials_stretch_to_the_compute_left_free(fixture_model):
    """When the chunk work takes most of real time and a partial costs more than the time left between two,
    partials come less often (the session keeps up)."""
    s = speech_clip()
    audio = np.concatenate([s, s])
    m = fixture_model("moon_tiny_like", "numpy")
    fast, _ = _count_partials(m, audio, 0.0)
    slow, sess = _count_partials(m, audio, 0.07)  # 70 ms of an 80 ms chunk
    assert sess.schedule.load > 0.5  # (it decays in the trailing silence, where nothing is encoded)
    assert slow < fast / 3, (slow, fast)


def test_long_session_memory_and_state_stay_flat(fixture_model):
    """30 minutes of speech and pauses (tiny model, an energy VAD to run fast): nothing grows."""
    s = speech_clip()
    block = np.concatenate([s, np.zeros(RATE, np.float32)])
    reps = int(30 * 60 * RATE / len(block)) + 1

    def energy_vad(hop):
        return 1.0 if np.sqrt(np.mean(hop * hop)) > 0.02 else 0.0

    m = fixture_model("moon_tiny_like", "numpy")
    sess = m.start_session(partial_ms=0, vad_model=_Vad(energy_vad))
    n_lines = 0
    tracemalloc.start()
    mem = []
    for r in range(reps):
        for i in range(0, len(block), RATE):
            n_lines += len(committed([*sess.feed(block[i : i + RATE])]))
        if r in (reps // 6, reps - 1):
            mem.append(tracemalloc.get_traced_memory()[0])
        st = sess.segment.state
        assert max(ls.k.shape[1] for ls in st.layers) <= 40
    tracemalloc.stop()
    assert sess.pos >= 30 * 60 * RATE
    assert n_lines >= reps - 1
    assert mem[1] - mem[0] < 2_000_000, mem  # no growth with session length (bytes)
    ring = sess.segmenting.ring
    assert len(ring) <= ring.maxlen and len(sess.segmenting.pending) < HOP


class _Vad:
    def __init__(self, fn):
        self.fn = fn

    def __call__(self, hop):
        return self.fn(hop)

    def reset(self):
        pass


def test_a_partial_never_shows_half_a_character(fixture_model):
    """A hypothesis that ends between the byte ids of one character shows the text before it, not replacement
    characters (which would also stand for the bytes before it in the same run of byte ids)."""
    m = fixture_model("moon_tiny_like", "numpy")
    sess = m.start_session(partial_ms=160, repetition_stop=0)
    sess.feed(speech_clip()[:12800])
    ids = m.tokenizer._tok.encode("The café").ids
    ev = sess._show(ids[:-1])
    assert ev.partial.text == "The caf"
    ev = sess._show(ids)
    assert ev.partial.text == "The café" and ev.stable_text == "The caf"
