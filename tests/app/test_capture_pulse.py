"""The real capture path: sounddevice -> PortAudio -> ALSA -> PulseAudio, with a private PulseAudio server
whose pipe source is a virtual microphone (shared/notes/audio_testing.md) and whose null sinks are outputs
whose monitors System audio captures (tests/app/test_sources_pulse.py)."""

from __future__ import annotations

from app.worker import SessionSpec
from tests.app import fake_engine
from tests.app.pulse_fixture import FifoWriter


def test_real_portaudio_capture_through_pulseaudio(qtbot, pulse_mic, journal_dir, speech):
    from app.controller import SessionController

    sd, fifo = pulse_mic
    writer = FifoWriter(fifo, speech)
    writer.start()
    c = SessionController(loader=fake_engine.load_model, sounddevice=sd, journal_dir=journal_dir)
    try:
        with qtbot.waitSignal(c.model_changed, timeout=5000):
            c.load_model("fake", "auto")
        levels = []
        c.stats_changed.connect(lambda s: levels.append(s.level_db))
        with qtbot.waitSignal(c.state_changed, timeout=5000):
            c.start(SessionSpec(device="pulse"))
        assert c.input_description.startswith("pulse")
        qtbot.waitUntil(writer.done.is_set, timeout=15000)
        qtbot.waitUntil(lambda: len(c.lines) >= 3, timeout=5000)
        with qtbot.waitSignal(c.session_finished, timeout=5000):
            c.stop()
        assert [line.text for line in c.lines] == [line.text for line in fake_engine.transcribe(speech)]
        assert max(levels) > -20  # the tone (rms ~0.2, about -14 dBFS) reached the level meter
    finally:
        writer.stop.set()
        c.shutdown(5000)
        writer.join(2)


def test_closing_a_microphone_that_has_not_delivered_yet_does_not_hang(pulse_mic):
    """Stop pressed within the first seconds of a microphone that delivers nothing yet (the virtual mic with no
    writer): PortAudio's stop waited on its capture thread, and Stop, Pause and quitting hung (found in QA)."""
    import threading
    import time

    from app.sources import AudioSystem

    sd, _fifo = pulse_mic
    source = AudioSystem(sd).make_source("mic", None)
    source.open()
    try:
        time.sleep(1.5)
        assert not source.lost  # within its first-block grace: not counted as lost yet
    finally:
        closing = threading.Thread(target=source.close, daemon=True)
        closing.start()
        closing.join(8)
    assert not closing.is_alive()
