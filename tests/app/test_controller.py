"""SessionController: the live SRT file, elapsed time, state."""

from __future__ import annotations

import time

import numpy as np
import srt

from app.worker import SessionSpec
from engine.transcript import format_srt


def test_live_srt_grows_during_the_session(qtbot, loaded, tmp_path):
    path = tmp_path / "live.srt"
    loaded.set_live_srt(str(path))
    loaded.start(SessionSpec())
    qtbot.waitUntil(lambda: len(loaded.lines) >= 2, timeout=8000)
    qtbot.waitUntil(lambda: len(list(srt.parse(path.read_text(encoding="utf-8")))) >= 2, timeout=2000)
    with qtbot.waitSignal(loaded.session_finished, timeout=5000):
        loaded.stop()
    assert loaded.audio_seconds is not None and loaded.audio_seconds >= max(ln.end for ln in loaded.lines)
    assert path.read_text(encoding="utf-8") == format_srt(loaded.lines, audio_end=loaded.audio_seconds)
    assert all(s.end.total_seconds() <= loaded.audio_seconds for s in srt.parse(path.read_text(encoding="utf-8")))
    assert loaded.elapsed() > 0


def test_a_replays_clock_is_its_position_in_the_file_not_wall_time(qtbot, loaded, tmp_path, speech):
    """At 8x the status bar's clock showed 00:00:01 when the captions said 00:00:08: it counted wall time."""
    from tests.app import fake_engine

    wav = fake_engine.write_wav(tmp_path / "speech.wav", speech)
    duration = len(speech) / 16000
    loaded.start(SessionSpec(input_file=str(wav), speed=8.0))
    qtbot.waitUntil(lambda: loaded.elapsed() > 0.4 * duration, timeout=5000)
    with qtbot.waitSignal(loaded.session_finished, timeout=10000):
        pass  # the file ends
    assert abs(loaded.elapsed() - duration) < 0.15, (loaded.elapsed(), duration)


def test_unwritable_live_srt_is_a_message_and_captioning_goes_on(qtbot, loaded, tmp_path):
    messages = []
    loaded.message.connect(lambda level, text: messages.append((level, text)))
    loaded.set_live_srt(str(tmp_path / "missing-folder" / "live.srt"))
    loaded.start(SessionSpec())
    qtbot.waitUntil(lambda: len(loaded.lines) >= 2, timeout=8000)
    with qtbot.waitSignal(loaded.session_finished, timeout=5000):
        loaded.stop()
    errors = [text for level, text in messages if level == "error"]
    assert errors and errors[0].startswith("Cannot write the captions to") and "\n" not in errors[0]
    assert errors[0].endswith("the live SRT file is off (File \u25b8 Live SRT file turns it on again).")
    assert loaded.live_srt_path is None  # off: the next session does not fail the same way again


def test_start_is_ignored_without_a_model(qtbot, controller):
    assert controller.state == "no-model"
    controller.start(SessionSpec())
    qtbot.wait(50)
    assert controller.state == "no-model"


def test_shutdown_during_a_model_load_does_not_wait_for_it(qtbot, journal_dir):
    """Closing while a model loads used to wait 15 s + 15 s, then let the running thread be destroyed (SIGABRT).
    A load cannot be interrupted: shutdown gives it ``load_wait_ms`` and leaves the thread running (False)."""
    import threading
    import time

    from app.controller import SessionController
    from tests.app import fake_engine

    began, release = threading.Event(), threading.Event()

    def slow_loader(source, **kw):
        began.set()
        release.wait(30)
        return fake_engine.load_model(source, **kw)

    c = SessionController(loader=slow_loader, journal_dir=journal_dir)
    try:
        c.load_model("fake-model")
        assert began.wait(5)
        t0 = time.monotonic()
        assert c.shutdown(5000, load_wait_ms=300) is False
        assert time.monotonic() - t0 < 2.0
        assert c.worker_thread.isRunning()
    finally:
        release.set()
        assert c.worker_thread.wait(5000)  # the load ends, then the thread (asked to quit) ends too
    assert c.shutdown(1000) is True


def test_shutdown_of_an_idle_worker_stops_its_thread(qtbot, loaded):
    """...as soon as the worker answers, not after the whole timeout (the wait once missed the answer: every
    quit of an idle app took 15 s)."""
    import time

    t = time.monotonic()
    assert loaded.shutdown(15000) is True
    assert time.monotonic() - t < 5  # a hang check, not a speed measurement
    assert not loaded.worker_thread.isRunning()


def _slow_replay(qtbot, controller, tmp_path, speech):
    """A fake-slow model (half a second of work per second of audio) replaying 18 s of speech at 8x, until over
    9 s of audio wait (a backlog that grows 6 s a second, to at most 14 s): 4.5 to 7 s of work are due."""
    from tests.app import fake_engine

    with qtbot.waitSignal(controller.model_changed, timeout=5000):
        controller.load_model("fake-slow", "auto")
    wav = fake_engine.write_wav(tmp_path / "long.wav", np.tile(speech, 5))
    controller.start(SessionSpec(input_file=str(wav), speed=8.0))
    qtbot.waitUntil(lambda: controller.last_stats is not None and controller.last_stats.backlog_s >= 9, timeout=15000)
    return controller.store.journal_path(controller.session_id)


def test_quitting_with_a_backlog_journals_every_line_the_engine_still_commits(qtbot, controller, tmp_path, speech):
    """Quitting while the engine was behind: after the first wait the worker's last captions arrived once the
    journal was closed, so the kept session lacked the lines after that point (11 of 40) and its audio length
    was short, and it counted as finished: nothing was offered for recovery (found in QA)."""
    from app.journal import read_journal_data

    path = _slow_replay(qtbot, controller, tmp_path, speech)
    assert controller.shutdown(timeout_ms=4000)  # the first wait gives up; the thread ends within the second
    qtbot.wait(100)
    data = read_journal_data(path)
    assert data.finished and list(data.lines) == controller.lines and len(data.lines) >= 10
    assert data.end["audio_s"] == round(controller.audio_seconds, 3)


def test_quitting_before_the_engine_catches_up_leaves_the_session_for_recovery(qtbot, controller, tmp_path, speech):
    from app.journal import read_journal_data

    path = _slow_replay(qtbot, controller, tmp_path, speech)
    try:
        controller.shutdown(timeout_ms=300)  # no answer in time: the worker is still busy with its backlog
        data = read_journal_data(path)
        assert not data.finished  # not marked whole (its backlog untranscribed): the next start offers its lines
    finally:
        controller._thread.wait(20000)


def test_the_clock_stops_at_pause_and_stop_not_when_the_backlog_is_transcribed(qtbot, controller):
    """With a model slower than real time the clock said 00:00:06 at the Pause click and 00:00:10 once paused, and
    Stop likewise (QA): capture stops at the click, the clock counts time captured."""
    with qtbot.waitSignal(controller.model_changed, timeout=5000):
        controller.load_model("fake-slow", "auto")  # 0.5 s of work per second of audio, fed at 4x real time
    controller.start(SessionSpec())
    qtbot.waitUntil(lambda: controller.state == "running", timeout=5000)
    qtbot.wait(200)
    controller.pause()
    clock = controller.elapsed()
    qtbot.waitUntil(lambda: controller.state == "paused", timeout=20000)
    assert controller.elapsed() - clock < 0.05, (clock, controller.elapsed())
    controller.resume()
    qtbot.waitUntil(lambda: controller.state == "running", timeout=5000)
    qtbot.wait(200)
    with qtbot.waitSignal(controller.session_finished, timeout=20000):
        controller.stop()
        clock = controller.elapsed()
    assert controller.elapsed() - clock < 0.05, (clock, controller.elapsed())


def test_an_input_back_between_the_pause_click_and_the_worker_does_not_restart_the_clock(qtbot, controller):
    """Review: an input that came back (or a sound server that answered again) after the Pause click but before
    the worker said "paused" (seconds, behind a slow model) restarted the clock until then."""
    with qtbot.waitSignal(controller.model_changed, timeout=5000):
        controller.load_model("fake-slow", "auto")  # 0.5 s of work per second of audio, fed at 4x real time
    controller.start(SessionSpec())
    qtbot.waitUntil(lambda: controller.state == "running", timeout=5000)
    qtbot.wait(600)  # a backlog: the worker answers a pause only after it
    controller._on_input_waiting()  # as the worker says when the input went and none is left
    controller.pause()
    clock = controller.elapsed()
    controller._on_device_recovered("Fake Mic")  # the worker's next reply, sent before it read the pause
    controller._on_server_waiting(False)
    time.sleep(0.3)
    assert controller.state == "running"  # the worker has not answered yet: the test saw the window it is about
    assert controller.elapsed() - clock < 0.05, (clock, controller.elapsed())
    qtbot.waitUntil(lambda: controller.state == "paused", timeout=20000)
    assert controller.elapsed() - clock < 0.05, (clock, controller.elapsed())
    controller.resume()
    qtbot.waitUntil(lambda: controller.state == "running", timeout=5000)
    time.sleep(0.2)
    assert controller.elapsed() - clock >= 0.15  # running again: it counts


def test_a_live_srt_deleted_mid_session_is_written_again_and_said(qtbot, loaded, tmp_path):
    """QA: the live SRT file removed while captioning got later cues in the deleted file, silently, and was gone
    at the end; it is written again at its path (all its cues) and the user is told."""
    path = tmp_path / "live.srt"
    said: list[str] = []
    loaded.message.connect(lambda _level, text: said.append(text))
    loaded.set_live_srt(str(path))
    loaded.start(SessionSpec())
    qtbot.waitUntil(lambda: len(loaded.lines) >= 1, timeout=8000)
    path.unlink()
    n = len(loaded.lines)
    qtbot.waitUntil(lambda: len(loaded.lines) > n, timeout=8000)
    with qtbot.waitSignal(loaded.session_finished, timeout=5000):
        loaded.stop()
    assert path.read_text(encoding="utf-8") == format_srt(loaded.lines, audio_end=loaded.audio_seconds)
    assert "The live SRT file was deleted while captioning; livecap wrote it again." in said
