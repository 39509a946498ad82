"""The Source picker in the main window: first-run default, remembered choices, human names, per-input
meters under Both, and a session started with the chosen source; plus ``--source`` on the command line."""

from __future__ import annotations

import pytest

from app.main_window import MainWindow
from app.settings import Key
from app.sources import AudioSystem
from app.worker import Stats
from tests.app import fake_engine
from tests.app.fake_audio_backend import FakeBackend
from tests.helpers import run_livecap


def make_window(qtbot, controller, settings, audio):
    w = MainWindow(controller, settings, sounddevice=audio.sd, audio=audio)
    qtbot.addWidget(w)
    return w


def items(box):
    return [box.itemText(i) for i in range(box.count())]


def test_first_run_is_system_audio_with_outputs_and_microphones_by_name(qtbot, controller, settings, fake_sd):
    audio = AudioSystem(fake_sd, FakeBackend(fake_sd))
    w = make_window(qtbot, controller, settings, audio)
    assert w.sources.kind == "system" and settings.value(Key.SOURCE) == ""  # not saved until chosen
    assert items(w.sources.output_combo) == [
        "Default output (follows changes)",
        "Built-in Audio Analog Stereo",
        "WH-1000XM4",
    ]
    assert items(w.sources.device_combo)[:2] == ["System default", "Blue Yeti"]
    assert w.sources._toolbar_actions["output"].isVisible() and not w.sources._toolbar_actions["device"].isVisible()
    assert [a.text() for a in w.sources.menu.actions()] == ["System audio", "Microphone", "Both (mixed)"]

    w.sources.source_combo.setCurrentIndex(w.sources.source_combo.findData("both"))
    w.sources.source_combo.activated.emit(w.sources.source_combo.currentIndex())
    w.sources.output_combo.setCurrentIndex(2)
    w.sources.output_combo.activated.emit(2)
    assert settings.value(Key.SOURCE) == "both" and settings.value(Key.OUTPUT) == "bluez_sink.AA"
    assert w.sources.menu.actions()[2].isChecked()
    assert not w.sources.system_meter.isHidden()
    w.sources.show_levels(-30.0, {"mic": -12.0, "system": -40.0})
    assert (round(w.sources.level_meter.level_db), round(w.sources.system_meter.level_db)) == (-12, -40)

    again = make_window(qtbot, controller, settings, audio)  # remembered across restarts
    assert again.sources.kind == "both" and again.sources.output == "bluez_sink.AA"
    spec = again._session_spec()
    assert (spec.source, spec.output, spec.device) == ("both", "bluez_sink.AA", None)


def test_without_system_audio_the_microphone_is_the_default_and_system_is_disabled(
    qtbot, controller, settings, fake_sd
):
    audio = AudioSystem(fake_sd, FakeBackend(fake_sd, reason="No PulseAudio or PipeWire sound server is running."))
    settings.set_value(Key.SOURCE, "system")
    w = make_window(qtbot, controller, settings, audio)
    assert w.sources.kind == "mic"
    model = w.sources.source_combo.model()
    assert not model.item(w.sources.source_combo.findData("system")).isEnabled()
    assert model.item(w.sources.source_combo.findData("both")).toolTip().startswith("No PulseAudio")
    assert settings.value(Key.SOURCE) == "system"  # the saved choice returns with the sound server


def test_a_session_on_system_audio_starts_through_the_backend(qtbot, controller, settings, fake_sd):
    backend = FakeBackend(fake_sd)
    audio = AudioSystem(fake_sd, backend)
    from app.controller import SessionController

    c = SessionController(loader=fake_engine.load_model, sounddevice=fake_sd, audio=audio)
    try:
        w = make_window(qtbot, c, settings, audio)
        with qtbot.waitSignal(c.model_changed, timeout=5000):
            w.load_model("fake")
        with qtbot.waitSignal(c.state_changed, timeout=5000):
            w.start_action.trigger()
        assert backend.made == [""]  # the default output, followed
        qtbot.waitUntil(lambda: len(c.lines) >= 1, timeout=8000)
        assert not w.sources.source_combo.isEnabled() and not w.sources.menu.isEnabled()
        w.sources.show_levels(-20.0, None)
        with qtbot.waitSignal(c.session_finished, timeout=5000):
            c.stop()
    finally:
        c.shutdown(5000)


def test_stats_carry_per_track_levels_under_both():
    stats = Stats(-20.0, None, 0.0, 0.0, 1.0, {"mic": -30.0, "system": -25.0})
    assert stats.tracks["system"] == -25.0 and Stats(-20.0, None, 0.0, 0.0, 1.0).tracks is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--source", "system", "--quit-after", "3"], "No PulseAudio or PipeWire sound server is running."),
        (["--quit-after", "3", "--input", "x.wav"], "--quit-after takes positive seconds"),
        (["--save-transcript", "out.srt"], "--save-transcript needs --input FILE or --quit-after"),
    ],
)
def test_cli_source_problems_are_one_sentence(tmp_path, args, message):
    proc = run_livecap(tmp_path, "--model", "fake", *args, timeout=60)
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stderr.count(message) == 1  # once: a failed start came as a message and as a signal, both printed


class _Unplugged(FakeBackend):
    """The same machine with the headphones and the USB microphone unplugged."""

    def outputs(self):
        return super().outputs()[:1]

    def microphones(self):
        return []


def test_a_chosen_device_that_is_not_connected_is_named_as_it_was_not_by_its_id(qtbot, controller, settings, fake_sd):
    """The picker showed 'pulse:alsa_input.usb (not connected)' and the message said 'alsa_input.usb' (found in
    QA; on real machines ids such as alsa_output.usb-...-00.analog-stereo)."""
    w = make_window(qtbot, controller, settings, AudioSystem(fake_sd, FakeBackend(fake_sd)))
    for box, name in ((w.sources.output_combo, "WH-1000XM4"), (w.sources.device_combo, "Blue Yeti")):
        box.setCurrentIndex(box.findText(name))
        box.activated.emit(box.currentIndex())
    unplugged = AudioSystem(fake_sd, _Unplugged(fake_sd))
    again = make_window(qtbot, controller, settings, unplugged)
    assert again.sources.output_combo.currentText() == "WH-1000XM4 (not connected)"
    assert again.sources.device_combo.currentText() == "Blue Yeti (not connected)"
    again.sources.device_combo.activated.emit(again.sources.device_combo.currentIndex())  # chosen again: kept
    assert settings.value(Key.DEVICE_NAME) == "Blue Yeti"
    spec = again._session_spec()
    said: list[str] = []
    unplugged.make_source("both", spec.device, spec.output, said.append, spec.names)
    assert said == [
        "The microphone \u201cBlue Yeti\u201d is not connected; using the default one.",
        "The output \u201cWH-1000XM4\u201d is not available; following the default output.",
    ]


def test_a_saved_alsa_name_for_the_sound_server_is_system_default(qtbot, controller, settings):
    """ALSA's names for the sound server ("default", "pulse") are no longer listed beside the server's own
    microphones; one chosen before shows as "System default", not as a device that is not connected."""
    from tests.app.fake_sounddevice import FakeSoundDevice, make_device

    sd = FakeSoundDevice([make_device("default"), make_device("pulse"), make_device("USB Mic")])
    alsa = {"name": "ALSA", "devices": [0, 1, 2]}
    sd.query_hostapis = lambda index=None: [alsa] if index is None else alsa
    settings.set_value(Key.SOURCE, "mic")
    settings.set_value(Key.DEVICE, "default")
    w = make_window(qtbot, controller, settings, AudioSystem(sd, FakeBackend(sd)))
    assert items(w.sources.device_combo) == ["System default", "Blue Yeti", "USB Mic (ALSA)"]
    assert w.sources.device_combo.currentText() == "System default"


def test_a_picker_widened_while_waiting_for_the_sound_server_narrows_once_the_devices_are_listed(
    qtbot, controller, settings, fake_sd, monkeypatch
):
    """While livecap waits for a sound server that does not answer (it began while the server was stopped), the
    output picker holds one entry and is widened to show it whole; once the outputs were listed it stayed that
    wide in the toolbar (QComboBox kept its old minimum size hint) and pushed Export and Sessions behind the
    overflow. It narrows again now. (PortAudio's loader is faked: the server's side is tested in
    test_sources_pulse.py.)"""
    import threading

    import app.main_window as main_window
    import app.source_picker as source_picker
    import app.sources as sources
    from app.sources import ServerSilent

    answers = threading.Event()

    def load():
        if not answers.is_set():
            raise ServerSilent("The sound server is not answering (stopped or hung).")
        return fake_sd

    monkeypatch.setattr(main_window, "load_sounddevice", load)
    monkeypatch.setattr(source_picker, "WAIT_POLL_S", 0.05)
    monkeypatch.setattr(sources, "AudioSystem", lambda sd: AudioSystem(sd, FakeBackend(sd)))
    w = MainWindow(controller, settings)
    qtbot.addWidget(w)
    w.resize(1240, 680)
    w.show()
    qtbot.waitExposed(w)
    box = w.sources.output_combo
    assert items(w.sources.device_combo) == ["Waiting for the sound server"] and w.sources.kind == "system"
    assert w.banner.text().endswith("; the inputs are listed once it answers.")
    waiting = box.width()
    answers.set()
    qtbot.waitUntil(lambda: not w.sources.waiting, timeout=3000)
    assert items(box)[1:] == ["Built-in Audio Analog Stereo", "WH-1000XM4"] and w.banner.text() == ""
    qtbot.waitUntil(lambda: box.width() < waiting - 50, timeout=3000)


def test_a_device_name_wider_than_its_picker_is_shown_elided(qtbot, controller, settings, fake_sd):
    """QA: the toolbar's output picker showed "Default output (fc", a name cut mid-word with nothing to say so.
    It is drawn elided ("Default outp…"); a name that fits is drawn whole."""
    audio = AudioSystem(fake_sd, FakeBackend(fake_sd))
    w = make_window(qtbot, controller, settings, audio)
    w.resize(1152, 680)
    w.show()
    qtbot.waitExposed(w)
    box = w.sources.output_combo
    full = box.currentText()
    assert full == "Default output (follows changes)"
    shown = box.shown_text()
    assert shown.endswith("…") and full.startswith(shown[:-1]) and len(shown) > 4
    assert box.fontMetrics().horizontalAdvance(full) > box.width()  # it did not fit
    box.setCurrentIndex(items(box).index("WH-1000XM4"))
    assert box.shown_text() == "WH-1000XM4"
