"""The session timeline where audio was lost on the way, and the watch that tells livecap did not run."""

from __future__ import annotations

import time

from app.timeline import StallWatch, Timeline
from engine.events import CaptionEvent, Line, Word


def test_lines_after_a_gap_move_by_it_whole():
    """Freeze QA: a line across a 20 s gap was stretched over it, putting its words inside audio that is gone."""
    t = Timeline()
    t.add_gap(10.0, 20.0)
    before, after = Line("before", 8.0, 9.5), Line("after", 10.0, 11.0, words=(Word("after", 10.0, 11.0),))
    across = Line("across it", 9.0, 12.0, words=(Word("across", 9.0, 9.8), Word("it", 10.2, 12.0)))
    assert t.line(before) == before
    assert (t.line(after).start, t.line(after).end, t.line(after).words[0].start) == (30.0, 31.0, 30.0)
    moved = t.line(across)
    assert (moved.start, moved.end) == (29.0, 32.0)  # by its middle (10.5): whole, not 9.0 to 32.0
    assert [(w.start, w.end) for w in moved.words] == [(9.0, 9.8), (30.2, 32.0)]  # each word by its own
    event = t.event(CaptionEvent(committed=(after,), partial=Line("open", 12.0, 13.0)))
    assert event.committed[0].start == 30.0 and event.partial.start == 32.0
    assert t.missing == 20.0


def test_the_watch_sees_the_whole_process_stopped_and_not_a_busy_thread():
    jump = [0.0]
    watch = StallWatch(stall_s=0.5, clock=lambda: time.monotonic() + jump[0])
    try:
        start = time.monotonic()
        time.sleep(0.7)  # the calling thread busy (a slow model's feed): the watch's thread runs on
        assert watch.since(start) is None
        jump[0] = 5.0  # the clock jumps while nothing ran: as after SIGSTOP and SIGCONT
        deadline = time.monotonic() + 2
        while watch.since(start) is None and time.monotonic() < deadline:
            time.sleep(0.02)
        ended, length = watch.since(start)
        assert 5.0 <= length < 5.5 and watch.since(ended) is None
    finally:
        watch.close()


def test_the_watch_says_when_it_has_not_run_since():
    """Freeze QA: after livecap ran again the worker judged a loss before the watch's thread had woken to see the
    stall; the worker asks it again until the watch is current."""
    jump = [0.0]
    watch = StallWatch(stall_s=0.5, clock=lambda: time.monotonic() + jump[0])
    try:
        time.sleep(0.25)
        assert watch.current(time.monotonic())
        assert not watch.current(time.monotonic() + 5.0)  # as the worker sees it right after a 5 s stop
    finally:
        watch.close()
