"""Segmenter bookkeeping (no model): where a segment closes and what its end event reports."""

from __future__ import annotations

from engine.vad import HOP, Segmenter, VadOptions


def test_end_event_reports_the_last_speech_and_the_last_active_hop():
    o = VadOptions()
    seg = Segmenter(o)
    probs = [0.0] * 5 + [0.9] * 10 + [0.4] * 3 + [0.1] * 20  # speech, release band (keeps it open), quiet
    events = [e for i, p in enumerate(probs) for e in seg.step(i * HOP, p)]
    start, end = events
    assert start.kind == "start" and end.kind == "end" and not end.forced
    assert end.speech == (5 * HOP, 15 * HOP)  # hops at or above the threshold
    assert end.active == 18 * HOP  # the release-band hops keep the segment open but are not speech
    quiet_hops = -(-int(o.hangover * 16000) // HOP)
    assert end.sample == end.active + quiet_hops * HOP
    assert end.active + int(o.tail_pad * 16000) < end.sample  # the tail pad ends inside the hang-over
