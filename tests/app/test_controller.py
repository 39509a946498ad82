"""SessionController: the live SRT file, elapsed time, state."""

from __future__ import annotations

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


def test_start_is_ignored_without_a_model(qtbot, controller):
    assert controller.state == "no-model"
    controller.start(SessionSpec())
    qtbot.wait(50)
    assert controller.state == "no-model"
