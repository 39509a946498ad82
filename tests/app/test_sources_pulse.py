"""System audio and Both on Linux, end to end through a private PulseAudio server (tests/app/pulse_fixture.py):
what plays into a null sink is captured through its monitor, by the sources, the GUI path, and the
unattended ``livecap --source system|both --quit-after`` run with a fixture model."""

from __future__ import annotations

import subprocess
import threading
import time

import numpy as np
import pytest
import srt

from app.sources import AudioSystem, Endpoint
from app.sources.pulse import PulseSystemSource
from engine.errors import AudioError
from tests.app import fake_engine
from tests.app.conftest import REPO
from tests.app.pulse_fixture import FifoWriter
from tests.helpers import band_power, livecap_env, tone

RATE = 16000


def collect(source, seconds: float, until=None) -> np.ndarray:
    """Read ``source`` for ``seconds`` (or until ``until()``), returning 16 kHz mono samples."""
    out = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not (until and until()):
        out += [b.samples.reshape(len(b.samples), -1).mean(axis=1) for b in source.read()]
        time.sleep(0.02)
    return np.concatenate(out) if out else np.zeros(0, np.float32)


def wait_recording(server, timeout: float = 10.0, count: int = 1) -> None:
    """Until the server has ``count`` recording streams (so audio played from now on is captured)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        cmd = ["pactl", "list", "short", "source-outputs"]
        out = subprocess.run(cmd, env=server.env, capture_output=True, text=True, timeout=10)
        if len(out.stdout.strip().splitlines()) >= count:
            return
        time.sleep(0.1)
    raise AssertionError("livecap never started recording")


def test_outputs_and_microphones_by_their_names(pulse_server):
    audio = AudioSystem(pulse_server.sd)
    assert audio.system_unavailable() is None and audio.default_kind() == "system"
    outputs = audio.outputs()
    assert Endpoint("virt_out", "Virtual Speakers", True) in outputs
    assert Endpoint("virt_alt", "Virtual Headphones", False) in outputs
    mics = audio.microphones()
    assert mics[0] == Endpoint("pulse:fakemic", "Virtual Mic", True)
    assert not any("Monitor" in m.name for m in mics)  # monitors are outputs, not microphones
    assert audio.find("system", "headphones") == "virt_alt" and audio.find("mic", "Virtual Mic") == "pulse:fakemic"
    # ALSA's names for the server itself are "System default" again ("pulse (ALSA)", "default (ALSA)" were listed)
    assert not any(m.id in ("default", "pulse", "pipewire", "sysdefault") for m in mics), mics


def test_the_default_microphone_is_named_as_the_server_calls_it(pulse_server):
    """The status bar said "Input: default (16 kHz)" (PortAudio's name for the default device)."""
    for kind in ("mic", "both"):
        source = AudioSystem(pulse_server.sd).make_source(kind, "")
        source.open()
        try:
            assert source.description.startswith("Virtual Mic ("), source.description
        finally:
            source.close()


def test_system_source_captures_what_plays_and_follows_the_default_output(pulse_server):
    source = AudioSystem(pulse_server.sd).make_source("system")
    assert isinstance(source, PulseSystemSource)
    source.open()
    try:
        assert "Virtual Speakers" in source.description and source.rate == RATE
        wait_recording(pulse_server)
        collect(source, 2.5)  # an idle null sink's monitor starts after about two seconds
        pulse_server.play(tone(700, 1.5), "virt_out")
        first = collect(source, 2.0)
        assert band_power(first, 700) > 0.5
        pulse_server.pactl("set-default-sink", "virt_alt")  # headphones plugged in
        collect(source, 1.0, until=lambda: source.switches)
        assert source.switches == 1 and "Virtual Headphones" in source.notices()[0]
        wait_recording(pulse_server)
        collect(source, 2.5)
        pulse_server.play(tone(1100, 1.5), "virt_alt")
        second = collect(source, 2.0)
        assert band_power(second, 1100) > 0.5 and band_power(second, 700) < 0.01
        assert not source.lost
    finally:
        source.close()


def test_both_mixes_a_mic_tone_and_a_system_tone(pulse_server):
    writer = FifoWriter(pulse_server.fifo, tone(440, 8.0), lead=0.0)
    writer.start()
    source = AudioSystem(pulse_server.sd).make_source("both", "pulse:fakemic")
    source.open()
    try:
        wait_recording(pulse_server, count=2)
        collect(source, 2.5)
        pulse_server.play(tone(1000, 3.0), "virt_out")
        source.track_levels()
        mixed = collect(source, 2.0)
        levels = source.track_levels()
        assert band_power(mixed, 440) > 0.2 and band_power(mixed, 1000) > 0.2
        assert levels["mic"] > -20 and levels["system"] > -20  # each tone about -13 dBFS
        assert source.gated_seconds == 0  # different sounds are no echo
    finally:
        source.close()
        writer.stop.set()
        writer.join(2)


def test_gui_captions_system_audio_and_keeps_going_when_the_default_output_changes(
    qtbot, pulse_server, journal_dir, settings, speech
):
    from app.controller import SessionController
    from app.main_window import MainWindow

    c = SessionController(loader=fake_engine.load_model, sounddevice=pulse_server.sd, journal_dir=journal_dir)
    w = MainWindow(c, settings, sounddevice=pulse_server.sd)
    qtbot.addWidget(w)
    try:
        assert w.sources.kind == "system"  # a first run: System audio where it is available
        assert w.sources.output_combo.itemText(0) == "Default output (follows changes)"
        box = w.sources.output_combo
        assert "Virtual Headphones" in [box.itemText(i) for i in range(box.count())]
        with qtbot.waitSignal(c.model_changed, timeout=5000):
            w.load_model("fake")
        meter = []  # what the toolbar's level meter shows after each stats update
        c.stats_changed.connect(lambda s: meter.append(w.level_meter.level_db))
        with qtbot.waitSignal(c.state_changed, timeout=5000):
            w.start_action.trigger()
        assert "Virtual Speakers" in c.input_description
        wait_recording(pulse_server)
        qtbot.wait(2500)
        assert not c.lines  # nothing plays: no captions
        player = pulse_server.play(speech, "virt_out")
        qtbot.waitUntil(lambda: len(c.lines) >= 3, timeout=10000)
        assert max(meter) > -25 and player.wait(5) == 0  # the meter moved (speech at about -20 dBFS)

        pulse_server.pactl("set-default-sink", "virt_alt")
        qtbot.waitUntil(lambda: "Virtual Headphones" in w.banner.label.text(), timeout=5000)
        # the status bar names the new output too (it kept the first one's name)
        assert "Virtual Headphones" in c.input_description and "Virtual Headphones" in w.status.input_label.text()
        wait_recording(pulse_server)
        qtbot.wait(2500)
        kept = len(c.lines)
        pulse_server.play(speech, "virt_alt")
        qtbot.waitUntil(lambda: len(c.lines) >= kept + 3, timeout=10000)
        assert c.state == "running"
        with qtbot.waitSignal(c.session_finished, timeout=5000):
            c.stop()
        words = [len(line.text.split()) for line in fake_engine.transcribe(speech)]
        assert [len(line.text.split()) for line in c.lines[-3:]] == words  # the whole clip, after the switch
    finally:
        c.shutdown(5000)


def test_a_chosen_output_that_vanishes_mid_session_falls_back_instead_of_hanging(
    qtbot, pulse_server, journal_dir, settings, speech
):
    """The headphones' sink removed while System audio captured it: the worker stopped the dead stream and
    PortAudio's stop never returned, so the session froze on "Captioning" with nothing captured, and Stop and
    quitting waited for good (found in QA). A lost stream is aborted; the session moves to the default output."""
    c, w = started_window(qtbot, pulse_server, journal_dir, settings, SOURCE="system", OUTPUT="virt_alt")
    try:
        assert "Virtual Headphones" in c.input_description
        wait_recording(pulse_server)
        module = sink_module(pulse_server, "virt_alt")
        with qtbot.waitSignal(c.device_recovered, timeout=15000):
            pulse_server.pactl("unload-module", module)
        assert "Virtual Speakers" in c.input_description
        wait_recording(pulse_server)
        qtbot.wait(2500)  # an idle null sink's monitor delivers its first audio after about two seconds
        pulse_server.play(speech, "virt_out")
        qtbot.waitUntil(lambda: len(c.lines) >= 3, timeout=10000)
        with qtbot.waitSignal(c.session_finished, timeout=5000):
            c.stop()
    finally:
        c.shutdown(5000)


def started_window(qtbot, pulse_server, journal_dir, settings, **choices: str):
    """``(controller, main window)`` on the private server with the fake model loaded and a session started
    from ``settings``' source choices (``choices``: ``Key`` names and values set first, e.g. ``SOURCE="mic"``)."""
    from app.controller import SessionController
    from app.main_window import MainWindow
    from app.settings import Key

    for key, value in choices.items():
        settings.set_value(Key[key], value)

    c = SessionController(loader=fake_engine.load_model, sounddevice=pulse_server.sd, journal_dir=journal_dir)
    w = MainWindow(c, settings, sounddevice=pulse_server.sd)
    qtbot.addWidget(w)
    with qtbot.waitSignal(c.model_changed, timeout=5000):
        w.load_model("fake")
    with qtbot.waitSignal(c.state_changed, timeout=5000):
        w.start_action.trigger()
    return c, w


def sink_module(server, sink: str) -> str:
    """The index of the module that made the null sink ``sink`` (to unload it: the output goes away)."""
    cmd = ["pactl", "list", "short", "modules"]
    modules = subprocess.run(cmd, env=server.env, capture_output=True, text=True, timeout=10).stdout
    (module,) = [line.split()[0] for line in modules.splitlines() if f"sink_name={sink}" in line]
    return module


def run_unattended(tmp_path, server, source: str, out: str, seconds: float, play=None, *extra: str):
    """``livecap --source SOURCE --model <Moonshine fixture> --quit-after SECONDS --save-transcript OUT``
    offscreen against the private server; ``play(server)`` runs once livecap records."""
    import os
    import sys

    model = REPO / "tests" / "fixtures" / "models" / "moon_tiny_like"
    if not (model / "config.json").exists():
        pytest.skip("the Moonshine fixture model is missing (make fixtures)")
    env = livecap_env(tmp_path, server.env)
    env.pop("PULSE_SOURCE", None)
    cmd = [
        sys.executable,
        "-m",
        "app.main",
        "--settings",
        str(tmp_path / "s.ini"),
        "--source",
        source,
        *extra,
        "--model",
        str(model),
        "--backend",
        "numpy",
        "--quit-after",
        str(seconds),
        "--save-transcript",
        out,
    ]
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        if play is not None:
            wait_recording(server, timeout=30, count=2 if source == "both" else 1)
            time.sleep(2.5)  # an idle null sink's monitor delivers its first audio after about two seconds
            play(server)
        stdout, stderr = proc.communicate(timeout=seconds + 60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "Traceback" not in stderr, stderr
    assert proc.returncode == 0, stderr
    assert os.path.exists(out)
    return stderr


@pytest.fixture(scope="module")
def speech_clip() -> np.ndarray:
    from engine.audio import read_audio

    return read_audio(REPO / "tests" / "fixtures" / "audio" / "speech.wav")


def test_unattended_system_audio_run_captions_speech_and_not_silence(tmp_path, pulse_server, speech_clip):
    out = tmp_path / "speech.srt"
    run_unattended(
        tmp_path,
        pulse_server,
        "system",
        str(out),
        9,
        lambda server: server.play(np.concatenate([speech_clip, np.zeros(RATE, np.float32)]), "virt_out"),
    )
    cues = list(srt.parse(out.read_text(encoding="utf-8")))
    assert cues and all(cue.content.strip() for cue in cues)

    quiet = tmp_path / "quiet.srt"
    run_unattended(tmp_path, pulse_server, "system", str(quiet), 6)
    assert list(srt.parse(quiet.read_text(encoding="utf-8"))) == []


def test_unattended_both_run_captions_the_microphone_part_of_the_mix(tmp_path, pulse_server, speech_clip):
    writer = FifoWriter(pulse_server.fifo, np.concatenate([speech_clip, np.zeros(RATE, np.float32)]), wait=True)
    writer.start()
    out = tmp_path / "both.srt"
    try:
        stderr = run_unattended(
            tmp_path, pulse_server, "both", str(out), 9, lambda server: writer.go.set(), "--device", "Virtual Mic"
        )
    finally:
        writer.stop.set()
        writer.join(2)
    cues = list(srt.parse(out.read_text(encoding="utf-8")))
    assert writer.done.is_set() and cues, stderr


@pytest.mark.parametrize(
    "check_every, how",
    [(None, "unplugged"), (30.0, "unplugged"), (30.0, "back-at-once"), (30.0, "moved-by-a-mixer")],
    ids=["periodic-checks", "checks-before-handing-out", "back-at-once", "moved-by-a-mixer"],
)
def test_a_chosen_output_that_goes_is_lost_not_replaced_by_the_microphone(pulse_server, monkeypatch, check_every, how):
    """PulseAudio moves a recording whose output went to the default *microphone* instead of ending it: System
    audio on a chosen output went on captioning the room, without a word (found in QA). Now the capture is
    lost (the worker falls back to the default output and says so) and no microphone audio comes out of it.
    Blocks read between two of the server's periodic checks were handed out unchecked (1.15 s of the room's
    tone once under load): a block is handed out only once a check that began after it arrived saw the output,
    however far apart the periodic checks are. The checks asked only whether an output of that name existed: one
    unplugged and back at once (a call app's virtual output made again), or the recording moved to a microphone
    in a mixer (pavucontrol), had the microphone captioned for the rest of the session (system-audio QA: 4.74 s
    of it); the recording's own source is checked now."""
    from app.sources import pulse

    if check_every:
        monkeypatch.setattr(pulse, "CHECK_EVERY_S", check_every)
    writer = FifoWriter(pulse_server.fifo, tone(440, 20.0), lead=0.0)  # the room: a 440 Hz tone on the mic
    writer.start()
    source = PulseSystemSource(pulse_server.sd, AudioSystem(pulse_server.sd).backend.server(), "virt_alt")
    source.open()
    try:
        wait_recording(pulse_server)
        collect(source, 1.0)
        if how == "moved-by-a-mixer":
            pulse_server.pactl("move-source-output", recording_of(pulse_server, source), "fakemic")
        else:
            pulse_server.pactl("unload-module", sink_module(pulse_server, "virt_alt"))
        if how == "back-at-once":
            pulse_server.pactl("load-module", "module-null-sink", "sink_name=virt_alt")
        time.sleep(0.8)  # the recording goes on, on the microphone
        after = collect(source, 3.0, until=lambda: source.lost)
        assert source.lost
        assert len(after) == 0 or band_power(after, 440) < 0.05  # at most a sliver, not the room's tone
    finally:
        source.close()
        writer.stop.set()
        writer.join(2)


@pytest.mark.parametrize("how", ["unplugged", "moved-by-a-mixer"])
def test_following_the_default_output_when_it_goes_moves_on_without_the_microphone(pulse_server, monkeypatch, how):
    """Following the default output, the output itself goes (the USB headset that was the default), or a mixer
    moves the recording to a microphone: the capture moves to the (new) default and none of the microphone's
    audio, where the recording went, comes out."""
    from app.sources import pulse

    monkeypatch.setattr(pulse, "CHECK_EVERY_S", 30.0)  # only the checks before handing out blocks
    writer = FifoWriter(pulse_server.fifo, tone(440, 30.0), lead=0.0)  # the room: a 440 Hz tone on the mic
    writer.start()
    source = AudioSystem(pulse_server.sd).make_source("system")
    source.open()
    try:
        wait_recording(pulse_server)
        collect(source, 2.5)
        if how == "unplugged":
            pulse_server.pactl("unload-module", sink_module(pulse_server, "virt_out"))  # the default goes
        else:
            pulse_server.pactl("move-source-output", recording_of(pulse_server, source), "fakemic")
        sink, name = ("virt_alt", "Virtual Headphones") if how == "unplugged" else ("virt_out", "Virtual Speakers")
        time.sleep(0.8)
        collect(source, 3.0, until=lambda: source.switches)
        assert source.switches == 1 and not source.lost
        assert name in source.notices()[0]
        after = collect(source, 2.5)
        pulse_server.play(tone(1100, 1.5), sink)
        after = np.concatenate([after, collect(source, 2.0)])
        assert band_power(after, 1100) > 0.5 and band_power(after, 440) < 0.01
    finally:
        source.close()
        writer.stop.set()
        writer.join(2)


def recording_of(server, source: PulseSystemSource) -> str:
    """The index of the server's recording stream of ``source``'s output monitor."""
    cmd = ["pactl", "list", "short", "source-outputs"]
    out = subprocess.run(cmd, env=server.env, capture_output=True, text=True, timeout=10).stdout
    (index,) = [line.split()[0] for line in out.splitlines()]
    return index


class Sinks:
    """A stand-in for ``PulseServer``: the outputs it lists, and how often it was asked."""

    def __init__(self, *names: str) -> None:
        self.names, self.asked = set(names), 0

    def sinks(self) -> tuple[set[str], str]:
        self.asked += 1
        return set(self.names), ""

    def close(self) -> None:
        pass


class Stream:
    lost = False

    def close(self) -> None:
        pass

    def moved(self) -> bool:
        return False


def held_source(server: Sinks) -> PulseSystemSource:
    """A system source on the output "out", checked a moment ago, with one block waiting that came after."""
    from app.capture import Block

    source = PulseSystemSource(None, server, "out")
    source._capture, source._current = Stream(), "out"
    source._checked = source._next_check = time.monotonic()
    source.queue.put(Block(np.ones((1024, 1), np.float32), RATE, time.monotonic()))
    return source


@pytest.mark.parametrize("there", [True, False])
def test_what_came_after_the_last_check_is_checked_when_read_and_when_closed(there):
    """Stop and Pause close a source, then read what it still holds: blocks held back for a check were lost at
    every stop, or handed out unchecked. They are checked once more, when closed as when read."""
    for closed in (False, True):
        server = Sinks(*(["out"] if there else []))
        source = held_source(server)
        if closed:
            source.close()
        blocks = source.read()
        assert server.asked == 1
        assert len(blocks) == (1 if there else 0) and source.lost is (not there)


def test_under_both_a_lost_microphone_leaves_the_chosen_output(qtbot, pulse_server, journal_dir, settings, speech):
    """Both, the call's output chosen (Virtual Headphones, not the default): the microphone stopped, and the
    fallback moved the system side to the default output too, so the call's captions stopped (found in QA)."""
    from app.settings import Key

    settings.set_value(Key.SOURCE, "both")
    settings.set_value(Key.DEVICE, "pulse:fakemic")
    settings.set_value(Key.OUTPUT, "virt_alt")
    writer = FifoWriter(pulse_server.fifo, np.zeros(RATE * 60, np.float32), lead=0.0)
    writer.start()
    c, w = started_window(qtbot, pulse_server, journal_dir, settings)
    try:
        assert "Virtual Headphones" in c.input_description
        wait_recording(pulse_server, count=2)
        qtbot.wait(1000)
        lost: list[str] = []
        c.device_lost.connect(lost.append)
        with qtbot.waitSignal(c.device_recovered, timeout=20000) as recovered:
            writer.stop.set()  # the microphone stops delivering
        assert "Virtual Headphones" in recovered.args[0] and "Virtual Speakers" not in recovered.args[0]
        # the side that went, as the user knows it ("Virtual Mic (16 kHz)" before)
        assert lost == ["The microphone \u201cVirtual Mic\u201d stopped delivering audio."]
        with qtbot.waitSignal(c.session_finished, timeout=10000):
            c.stop()
    finally:
        end_session(c, writer)


class UsbMic:
    """A microphone that can be unplugged and plugged in again on the private server: a null sink's monitor
    remapped as the source ``usb_mic`` ("USB-Mic"); the default source stays the virtual microphone."""

    ARGS = ["module-remap-source", "source_name=usb_mic", "master=usb_feed.monitor"]
    ARGS.append("source_properties=device.description=USB-Mic")

    def __init__(self, server) -> None:
        self.server = server
        self.sink = self._load("module-null-sink", "sink_name=usb_feed")
        self.remap = ""
        self.plug_in()
        server.pactl("set-default-source", "fakemic")

    def _load(self, *args: str) -> str:
        cmd = ["pactl", "load-module", *args]
        return subprocess.run(cmd, env=self.server.env, capture_output=True, text=True, timeout=10).stdout.strip()

    def plug_in(self) -> None:
        self.remap = self._load(*self.ARGS)

    def unplug(self) -> None:
        self.server.pactl("unload-module", self.remap)
        self.remap = ""

    def remove(self) -> None:
        for module in (self.remap, self.sink):
            if module:
                subprocess.run(["pactl", "unload-module", module], env=self.server.env, capture_output=True)


def end_session(c, writer) -> None:
    """The ``finally`` of a session test: the virtual microphone's writer stopped, the controller shut down."""
    writer.stop.set()
    writer.join(2)
    c.shutdown(5000)


def test_a_chosen_output_unplugged_while_paused_resumes_on_the_default_output(
    qtbot, pulse_server, journal_dir, settings
):
    """The chosen output went while paused: every Resume failed with "The output “virt_alt” is not available." (the
    server's id) and only Stop got out (system-audio QA). Resume goes on with the default output and says so."""
    from app.settings import Key

    errors: list[str] = []
    c, w = started_window(qtbot, pulse_server, journal_dir, settings, SOURCE="system", OUTPUT="virt_alt")
    try:
        c.message.connect(lambda level, text: errors.append(text) if level == "error" else None)
        assert "Virtual Headphones" in c.input_description and settings.value(Key.OUTPUT) == "virt_alt"
        with qtbot.waitSignal(c.state_changed, timeout=5000):
            c.pause()
        pulse_server.pactl("unload-module", sink_module(pulse_server, "virt_alt"))
        with qtbot.waitSignal(c.device_recovered, timeout=10000) as found, qtbot.waitSignal(c.device_lost) as lost:
            c.resume()
        assert lost.args[0] == "The output “Virtual Headphones” is no longer available."
        assert "Virtual Speakers" in found.args[0] and c.state == "running" and errors == []
        with qtbot.waitSignal(c.session_finished, timeout=10000):
            c.stop()
    finally:
        c.shutdown(5000)


def test_a_sound_server_that_goes_is_named_not_the_output(qtbot, pulse_server, journal_dir, settings):
    """The sound server killed mid-session: the user was told "The output “Virtual Speakers” stopped delivering
    audio." (system-audio QA); it says that the sound server stopped."""
    import os
    import signal

    c, w = started_window(qtbot, pulse_server, journal_dir, settings, SOURCE="system")
    try:
        wait_recording(pulse_server)
        with qtbot.waitSignal(c.device_lost, timeout=10000) as lost:
            os.kill(int((pulse_server.runtime / "pulse" / "pid").read_text().strip()), signal.SIGKILL)
        assert lost.args[0] == "The sound server stopped answering."
        with qtbot.waitSignal(c.session_finished, timeout=10000):
            c.stop()
    finally:
        c.shutdown(5000)


@pytest.mark.parametrize(
    "check_every, back_at_once",
    [(None, False), (30.0, False), (30.0, True)],
    ids=["periodic-checks", "checks-before-handing-out", "back-at-once"],
)
def test_a_chosen_microphone_that_goes_is_lost_not_replaced_by_another_source(
    pulse_server, monkeypatch, check_every, back_at_once
):
    """A USB microphone unplugged: PulseAudio moved the recording to the default source (here the room's tone;
    in QA the speakers' monitor) and livecap went on as if it were the chosen microphone, still naming it. Now
    the microphone is lost (the worker falls back to the default one and says so) and nothing else comes out,
    also between two periodic checks (a block is handed out only once a check after it arrived saw the source),
    and when a microphone of the same name is back before the next check (the recording stays moved)."""
    from app.sources import pulse
    from app.sources.pulse import PulseMicSource

    if check_every:
        monkeypatch.setattr(pulse, "CHECK_EVERY_S", check_every)
    usb = UsbMic(pulse_server)
    writer = FifoWriter(pulse_server.fifo, tone(440, 20.0), lead=0.0)  # the default microphone: a 440 Hz tone
    writer.start()
    source = AudioSystem(pulse_server.sd).make_source("mic", "pulse:usb_mic")
    assert isinstance(source, PulseMicSource)
    source.open()
    try:
        wait_recording(pulse_server)
        collect(source, 1.0)
        assert not source.lost
        usb.unplug()
        if back_at_once:
            usb.plug_in()
            time.sleep(0.8)
        after = collect(source, 3.0, until=lambda: source.lost)
        assert source.lost
        assert len(after) == 0 or band_power(after, 440) < 0.05  # at most a sliver, not the default mic's tone
    finally:
        source.close()
        writer.stop.set()
        writer.join(2)
        usb.remove()


def test_a_monitor_as_the_default_source_is_not_taken_for_the_microphone(pulse_server):
    """When the last microphone goes, the server makes an output's monitor its default source; "the default
    microphone" then captioned the speakers as the user's voice (found in QA). A microphone it lists is taken
    instead, and with none "No microphone was found" (the worker then waits for one)."""
    from app.sources.pulse import PulseMicSource
    from engine.errors import AudioError

    pulse_server.pactl("set-default-source", "virt_out.monitor")
    try:
        source = AudioSystem(pulse_server.sd).make_source("mic", "")
        assert isinstance(source, PulseMicSource) and source.pulse_source == "fakemic"

        class NoMicrophone(type(AudioSystem(pulse_server.sd).backend)):
            def microphones(self):
                return []

        with pytest.raises(AudioError, match="No microphone was found"):
            AudioSystem(pulse_server.sd, NoMicrophone(pulse_server.sd)).make_source("mic", "")
    finally:
        pulse_server.pactl("set-default-source", "fakemic")


def back_on_usb_then_stop(qtbot, c, w, usb) -> None:
    """Plug the USB microphone in: the session goes back to it ("Back on ..."); then stop it."""
    with qtbot.waitSignal(c.device_returned, timeout=20000) as back:
        usb.plug_in()
    assert "USB-Mic" in back.args[0] and "USB-Mic" in c.input_description
    assert c.state == "running" and "Back on" in w.banner.label.text()
    with qtbot.waitSignal(c.session_finished, timeout=10000):
        c.stop()


def test_a_chosen_microphone_plugged_back_in_is_captioned_again(qtbot, pulse_server, journal_dir, settings):
    """A USB microphone unplugged mid-session: captioning went on from the default microphone, and stayed there
    after it was plugged back in (found in QA). Back on it once the server lists it again."""
    usb = UsbMic(pulse_server)
    writer = FifoWriter(pulse_server.fifo, np.zeros(RATE * 60, np.float32), lead=0.0)
    writer.start()
    c, w = started_window(qtbot, pulse_server, journal_dir, settings, SOURCE="mic", DEVICE="pulse:usb_mic")
    try:
        assert "USB-Mic" in c.input_description
        wait_recording(pulse_server)
        with qtbot.waitSignal(c.device_recovered, timeout=20000) as fallback:
            usb.unplug()
        assert "Virtual Mic" in fallback.args[0]
        back_on_usb_then_stop(qtbot, c, w, usb)
    finally:
        end_session(c, writer)
        usb.remove()


def test_a_session_started_without_the_chosen_microphone_takes_it_once_plugged_in(
    qtbot, pulse_server, journal_dir, settings
):
    """Started while the chosen USB microphone was unplugged, the session captioned the default one (said so) and
    stayed on it after the USB one was plugged in, unlike a session that lost it midway (found in QA). It is the
    same fallback: back on the chosen microphone once the server lists it."""
    usb = UsbMic(pulse_server)
    usb.unplug()
    writer = FifoWriter(pulse_server.fifo, np.zeros(RATE * 60, np.float32), lead=0.0)
    writer.start()
    c, w = started_window(
        qtbot, pulse_server, journal_dir, settings, SOURCE="mic", DEVICE="pulse:usb_mic", DEVICE_NAME="USB-Mic"
    )
    try:
        assert c.state == "running" and "Virtual Mic" in c.input_description
        assert "\u201cUSB-Mic\u201d is not connected; using the default one" in w.banner.label.text()
        wait_recording(pulse_server)
        back_on_usb_then_stop(qtbot, c, w, usb)
    finally:
        end_session(c, writer)
        usb.remove()


def server_pid(server) -> int:
    return int((server.runtime / "pulse" / "pid").read_text().strip())


@pytest.mark.parametrize("source", ["system", "mic"])
def test_a_sound_server_that_stops_answering_is_waited_for_and_never_holds_stop(
    qtbot, pulse_server, journal_dir, settings, speech, source
):
    """The sound server stopped (SIGSTOP; a hung PipeWire) mid-session: the worker waited in pulsectl for its
    reply, and in PortAudio's abort, so Stop and Quit hung until it went on (QA: 25 s and 20 s; for good with a
    server that never does). Now nothing is switched or lost: the user is told, captioning goes on when the server
    does (the status bar says what it waits for, and the clock stops meanwhile), and Stop ends the session within
    a few seconds while it is still stopped."""
    import os
    import signal

    pid = server_pid(pulse_server)
    c, w = started_window(qtbot, pulse_server, journal_dir, settings, SOURCE=source)
    lost: list[str] = []
    c.device_lost.connect(lost.append)
    writer = None
    try:
        wait_recording(pulse_server)
        if source == "mic":
            writer = FifoWriter(pulse_server.fifo, speech, lead=0.0, wait=True)
            writer.start()
        qtbot.wait(2500)
        os.kill(pid, signal.SIGSTOP)
        qtbot.waitUntil(lambda: "not answering" in w.banner.label.text(), timeout=8000)
        assert w.status.state_label.text().endswith("Waiting for the sound server")
        clock = c.elapsed()
        qtbot.wait(1000)
        assert c.elapsed() - clock < 0.1  # the clock counts time captured
        os.kill(pid, signal.SIGCONT)
        qtbot.waitUntil(lambda: "answers again" in w.banner.label.text(), timeout=8000)
        assert w.status.state_label.text().endswith("Captioning")
        if writer is not None:
            writer.go.set()
        else:
            pulse_server.play(speech, "virt_out")
        qtbot.waitUntil(lambda: len(c.lines) >= 3, timeout=15000)
        assert c.state == "running" and not lost, lost

        os.kill(pid, signal.SIGSTOP)
        qtbot.wait(500)
        began = time.monotonic()
        with qtbot.waitSignal(c.session_finished, timeout=10000):
            c.stop()
        assert time.monotonic() - began < 6 and not lost, (time.monotonic() - began, lost)
    finally:
        os.kill(pid, signal.SIGCONT)
        if writer is not None:
            writer.stop.set()
        c.shutdown(5000)


def test_a_server_call_not_answered_in_time_fails_and_the_next_ones_at_once(pulse_server, monkeypatch):
    """pulsectl waits for a reply without a time-out: a stopped server held every call, and the worker with it.
    Now a call fails after ``CALL_TIMEOUT_S`` (an open connection's and a new one's), the calls after it at once
    for ``SILENT_BACKOFF_S``, and once the server goes on it answers again; a killed server is gone, not silent. No
    PortAudio re-scan meanwhile: its start asks the server about its devices and waited with it (Refresh froze the
    GUI)."""
    import os
    import signal
    import threading

    from app.capture import refresh_devices
    from app.sources import pulse

    monkeypatch.setattr(pulse, "CALL_TIMEOUT_S", 0.5)
    monkeypatch.setattr(pulse, "_silent", False)
    pid = server_pid(pulse_server)
    backend = pulse.PulseBackend(pulse_server.sd)
    kept = backend.server()
    assert kept.default_sink() == "virt_out" and not backend.silent()

    def timed(call) -> tuple[float, BaseException | None]:
        """How long ``call`` took and what it raised (at most 10 s: a call that never returns fails the test)."""
        box: list = [None]
        began = time.monotonic()

        def run() -> None:
            try:
                call()
            except BaseException as exc:  # noqa: BLE001 - handed to the test
                box[0] = exc

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        thread.join(10)
        assert not thread.is_alive(), "the call waited for the stopped server"
        return time.monotonic() - began, box[0]

    os.kill(pid, signal.SIGSTOP)
    try:
        took, error = timed(kept.default_sink)  # on the open connection
        assert isinstance(error, pulse.ServerSilent) and 0.5 <= took < 2.0, (took, error)
        assert str(error) == "The sound server is not answering (stopped or hung)."
        took, error = timed(backend.outputs)  # at once, while the server is taken for silent
        assert isinstance(error, pulse.ServerSilent) and took < 0.1, (took, error)
        assert backend.silent() and pulse.server_silent()
        took, error = timed(lambda: backend.silent(fresh=True) or (_ for _ in ()).throw(AssertionError("answered")))
        assert error is None and 0.5 <= took < 2.0, (took, error)  # a new connection: asked again, not answered
        took, error = timed(lambda: refresh_devices(pulse_server.sd))  # PortAudio's start would ask the server
        assert error is None and took < 0.1, (took, error)
    finally:
        os.kill(pid, signal.SIGCONT)
    assert not backend.silent(fresh=True) and not pulse.server_silent()
    assert [o.id for o in backend.outputs()] == ["virt_out", "virt_alt"]
    os.kill(pid, signal.SIGKILL)
    took, error = timed(kept.default_sink)
    assert isinstance(error, AudioError) and not isinstance(error, pulse.ServerSilent) and took < 0.5, (took, error)
    assert not backend.silent()


def test_an_unattended_run_ends_on_time_while_the_sound_server_does_not_answer(tmp_path, pulse_server):
    """``--quit-after`` with the sound server stopped mid-run (SIGSTOP; a hung PipeWire): livecap waited for it
    to close the stream, and at exit in PortAudio's end, until the server went on. Now it saves the transcript
    and exits on time."""
    import os
    import signal

    pid = server_pid(pulse_server)
    out = tmp_path / "frozen.srt"
    began = time.monotonic()
    try:
        run_unattended(tmp_path, pulse_server, "system", str(out), 6, lambda server: os.kill(pid, signal.SIGSTOP))
        took = time.monotonic() - began
    finally:
        os.kill(pid, signal.SIGCONT)
    assert out.exists() and took < 6 + 20, took


def test_resume_while_the_sound_server_does_not_answer_says_so_and_stays_paused(
    qtbot, pulse_server, journal_dir, settings
):
    """Paused, then the sound server stopped: Resume opened a stream through it (and re-scanned PortAudio's
    devices), which waited for the server, and the worker with it. Now Resume says so at once and the session
    stays paused; once the server answers, Resume captures again."""
    import os
    import signal

    pid = server_pid(pulse_server)
    c, w = started_window(qtbot, pulse_server, journal_dir, settings, SOURCE="system")
    errors: list[str] = []
    c.message.connect(lambda level, text: errors.append(text) if level == "error" else None)
    try:
        wait_recording(pulse_server)
        with qtbot.waitSignal(c.state_changed, timeout=5000):
            c.pause()
        os.kill(pid, signal.SIGSTOP)
        began = time.monotonic()
        c.resume()
        qtbot.waitUntil(lambda: bool(errors), timeout=6000)
        assert time.monotonic() - began < 4 and c.state == "paused", (time.monotonic() - began, c.state)
        assert errors == ["The sound server is not answering (stopped or hung); press Resume once it does."]
        os.kill(pid, signal.SIGCONT)
        with qtbot.waitSignal(c.state_changed, timeout=8000):
            c.resume()
        assert c.state == "running"
        with qtbot.waitSignal(c.session_finished, timeout=10000):
            c.stop()
    finally:
        os.kill(pid, signal.SIGCONT)
        c.shutdown(5000)


STARTED_WHILE_SILENT = """
import json, sys, time
from PySide6.QtWidgets import QApplication
app = QApplication([])
from app.controller import SessionController
from app.main_window import MainWindow
from app.settings import Settings

def state(w, began):
    combo = w.sources.device_combo
    return {"took": time.monotonic() - began, "banner": w.banner.text(), "kind": w.sources.kind,
            "mics": [combo.itemText(i) for i in range(combo.count())], "portaudio": "sounddevice" in sys.modules}

began = time.monotonic()
c = SessionController(journal_dir=sys.argv[2])
w = MainWindow(c, Settings(sys.argv[1]))
w.show()
print(json.dumps(state(w, began)), flush=True)
sys.stdin.readline()  # the server goes on
began = time.monotonic()
while time.monotonic() - began < 15 and w.sources.waiting:
    app.processEvents()
    time.sleep(0.02)
print(json.dumps(state(w, began)), flush=True)
w.close()
c.shutdown(5000)
"""


def test_livecap_started_while_the_sound_server_does_not_answer_opens_and_lists_the_inputs_once_it_does(
    tmp_path, pulse_server
):
    """livecap started while the sound server was stopped (SIGSTOP; a hung PipeWire) never showed its window:
    PortAudio's start (the import of sounddevice, to list the microphones) asks the server about its devices and
    waited for it. Now the window opens and says so, PortAudio is started on a thread once the server answers,
    and the pickers are filled then."""
    import json
    import os
    import signal
    import sys

    from app.settings import Key, Settings

    Settings(str(tmp_path / "s.ini")).set_value(Key.SOURCE, "system")
    pid = server_pid(pulse_server)
    env = livecap_env(tmp_path, pulse_server.env)
    cmd = [sys.executable, "-c", STARTED_WHILE_SILENT, str(tmp_path / "s.ini"), str(tmp_path / "sessions")]
    os.kill(pid, signal.SIGSTOP)
    proc = subprocess.Popen(
        cmd, cwd=REPO, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.append(proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(30)
        assert lines and lines[0], "the window was not made in 30 s while the sound server did not answer"
        first = json.loads(lines[0])
        said = "The sound server is not answering (stopped or hung); the inputs are listed once it answers."
        assert first["banner"] == said
        assert first["mics"] == ["Waiting for the sound server"] and first["kind"] == "system"
        assert not first["portaudio"]
        os.kill(pid, signal.SIGCONT)
        proc.stdin.write("go\n")
        proc.stdin.flush()
        stdout, stderr = proc.communicate(timeout=40)
    finally:
        os.kill(pid, signal.SIGCONT)
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0 and "Traceback" not in stderr, stderr
    then = json.loads(stdout.strip().splitlines()[-1])
    assert then["portaudio"] and then["banner"] == "" and then["kind"] == "system", then
    assert "Virtual Mic" in then["mics"] and then["took"] < 6, then


def test_an_unattended_run_started_while_the_sound_server_does_not_answer_says_so_and_ends(tmp_path, pulse_server):
    """``--quit-after`` started while the sound server was stopped waited before its window for as long as the
    server did (PortAudio's start). Now it ends at once with one sentence and a failure code."""
    import os
    import signal
    import sys

    model = REPO / "tests" / "fixtures" / "models" / "moon_tiny_like"
    if not (model / "config.json").exists():
        pytest.skip("the Moonshine fixture model is missing (make fixtures)")
    pid = server_pid(pulse_server)
    cmd = [sys.executable, "-m", "app.main", "--settings", str(tmp_path / "s.ini"), "--model", str(model)]
    cmd += ["--backend", "numpy", "--quit-after", "5", "--save-transcript", str(tmp_path / "out.srt")]
    said = "The sound server is not answering (stopped or hung); start again once it does."
    os.kill(pid, signal.SIGSTOP)
    try:
        for extra, code in (([], 4), (["--source", "system"], 2)):  # --source is checked before the model loads
            began = time.monotonic()
            proc = subprocess.run(
                cmd + extra,
                cwd=REPO,
                env=livecap_env(tmp_path, pulse_server.env),
                capture_output=True,
                text=True,
                timeout=40,
            )
            took = time.monotonic() - began
            assert "Traceback" not in proc.stderr, proc.stderr
            assert proc.returncode == code and took < 30, (extra, proc.returncode, took, proc.stderr)
            assert said in proc.stderr, proc.stderr
    finally:
        os.kill(pid, signal.SIGCONT)


def test_the_self_test_reports_portaudio_not_started_while_the_sound_server_does_not_answer(tmp_path, pulse_server):
    """``livecap --self-test`` checks that PortAudio loads; with the sound server stopped its start waited for good.
    Now the check says why it did not start, and the rest of the self-test goes on."""
    import os
    import signal
    import sys

    pid = server_pid(pulse_server)
    code = "from app.selftest import _check_portaudio; print(_check_portaudio())"
    os.kill(pid, signal.SIGSTOP)
    try:
        proc = subprocess.run(
            [sys.executable, "-c", code],
            cwd=REPO,
            env=livecap_env(tmp_path, pulse_server.env),
            capture_output=True,
            text=True,
            timeout=20,
        )
    finally:
        os.kill(pid, signal.SIGCONT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "PortAudio not started: the sound server is not answering (stopped or hung)"


def test_the_pickers_keep_their_lists_and_the_source_while_the_sound_server_does_not_answer(
    qtbot, pulse_server, journal_dir, settings
):
    """Opening a picker (or Refresh) while the sound server was stopped listed nothing: the outputs went, System
    audio was greyed out and the source switched to Microphone without a word, so the next Start captioned the
    room instead of the call. Now the lists and the source stay as they were and the banner says why."""
    import os
    import signal

    from app.controller import SessionController
    from app.main_window import MainWindow
    from app.settings import Key

    settings.set_value(Key.SOURCE, "system")
    c = SessionController(loader=fake_engine.load_model, sounddevice=pulse_server.sd, journal_dir=journal_dir)
    w = MainWindow(c, settings, sounddevice=pulse_server.sd)
    qtbot.addWidget(w)
    outputs = lambda: [w.sources.output_combo.itemText(i) for i in range(w.sources.output_combo.count())]  # noqa: E731
    before = outputs()
    assert w.sources.kind == "system" and "Virtual Speakers" in before, before
    pid = server_pid(pulse_server)
    os.kill(pid, signal.SIGSTOP)
    try:
        began = time.monotonic()
        w.sources.refresh(rescan=True)
        took = time.monotonic() - began
        assert took < 2.5, took
        assert w.sources.kind == "system" and outputs() == before
        assert w.banner.text() == (
            "The sound server is not answering (stopped or hung); the outputs and microphones are listed as they were."
        )
    finally:
        os.kill(pid, signal.SIGCONT)
        c.shutdown(5000)
    w.sources.refresh(rescan=True)
    assert w.sources.kind == "system" and outputs() == before


def journal_inputs(journal_dir) -> list[str]:
    """The inputs the session journals in ``journal_dir`` recorded, in order."""
    import json

    records = [json.loads(line) for path in sorted(journal_dir.glob("*.jsonl")) for line in path.open()]
    return [r["input"] for r in records if r.get("type") == "input"]


def test_under_both_a_new_default_output_is_named_in_the_status_bar_and_the_journal(
    qtbot, pulse_server, journal_dir, settings
):
    """Both, following the default output: the banner said "now captioning what “Virtual Headphones” plays" but the
    status bar and the session journal kept "… + System audio: Virtual Speakers (16 kHz) — follows the default
    output" (QA): the mix's name was made once, when it opened. It names the parts as they are now."""
    writer = FifoWriter(pulse_server.fifo, np.zeros(RATE * 60, np.float32), lead=0.0)
    writer.start()
    c, w = started_window(qtbot, pulse_server, journal_dir, settings, SOURCE="both", DEVICE="pulse:fakemic")
    try:
        assert "Virtual Speakers" in c.input_description
        wait_recording(pulse_server, count=2)
        pulse_server.pactl("set-default-sink", "virt_alt")
        qtbot.waitUntil(lambda: "Virtual Headphones" in w.banner.label.text(), timeout=5000)
        moved = "Virtual Mic (16 kHz) + System audio: Virtual Headphones (16 kHz) \u2014 follows the default output"
        assert c.input_description == moved and w.status.input_label.text() == f"Input: {moved}"
        assert journal_inputs(journal_dir)[-1] == moved
        with qtbot.waitSignal(c.session_finished, timeout=10000):
            c.stop()
    finally:
        end_session(c, writer)


def test_the_default_microphone_is_followed_and_named_when_the_server_changes_it(
    qtbot, pulse_server, journal_dir, settings
):
    """Microphone "System default": the server's default source changed mid-session (pactl set-default-source),
    the server moved livecap's recording to it, and captions came from the new microphone while the status bar,
    the journal and the "pure silence" hint still named the first one, without a word (QA). Now the new one is said
    and named, as System audio names a new default output."""
    usb = UsbMic(pulse_server)
    writer = FifoWriter(pulse_server.fifo, np.zeros(RATE * 60, np.float32), lead=0.0)
    writer.start()
    c, w = started_window(qtbot, pulse_server, journal_dir, settings, SOURCE="mic", DEVICE="")
    lost: list[str] = []
    c.device_lost.connect(lost.append)
    try:
        assert c.input_description == "Virtual Mic (16 kHz)"
        wait_recording(pulse_server)
        pulse_server.pactl("set-default-source", "usb_mic")
        qtbot.waitUntil(lambda: "USB-Mic" in w.banner.label.text(), timeout=5000)
        assert w.banner.label.text() == "The default microphone changed; now captioning \u201cUSB-Mic\u201d."
        assert c.input_description == "USB-Mic (16 kHz)" and w.status.input_label.text() == "Input: USB-Mic (16 kHz)"
        assert journal_inputs(journal_dir)[-1] == "USB-Mic (16 kHz)"
        pulse_server.pactl("set-default-source", "fakemic")
        qtbot.waitUntil(lambda: c.input_description == "Virtual Mic (16 kHz)", timeout=5000)
        assert c.state == "running" and not lost, lost
        with qtbot.waitSignal(c.session_finished, timeout=10000):
            c.stop()
    finally:
        end_session(c, writer)
        usb.remove()


def test_a_default_microphone_taken_for_a_chosen_one_that_comes_back_is_named_again(pulse_server):
    """Started with the chosen microphone unplugged, livecap captioned the default one (said, and named so); when
    the chosen one came back the server made it the default again and moved the recording to it, but the status
    bar and the session still named the other one (QA). The recording is named after the source it records."""
    usb = UsbMic(pulse_server)
    pulse_server.pactl("set-default-source", "usb_mic")  # the user's microphone, and the server's default
    usb.unplug()  # the server's default falls back to the virtual microphone
    said: list[str] = []
    source = AudioSystem(pulse_server.sd).make_source(
        "mic", "pulse:usb_mic", None, said.append, {"pulse:usb_mic": "USB-Mic"}
    )
    source.open()
    try:
        assert said == ["The microphone \u201cUSB-Mic\u201d is not connected; using the default one."]
        assert source.description == "Virtual Mic (16 kHz)"
        wait_recording(pulse_server)
        usb.plug_in()  # the configured default is back: the server moves the recording to it
        collect(source, 3.0, until=lambda: "USB-Mic" in source.description)
        assert source.description == "USB-Mic (16 kHz)" and source.name == "USB-Mic" and not source.lost
        assert source.notices() == ["The default microphone changed; now captioning \u201cUSB-Mic\u201d."]
    finally:
        source.close()
        usb.remove()
        pulse_server.pactl("set-default-source", "fakemic")


def test_a_default_microphone_that_becomes_the_speakers_is_lost(pulse_server):
    """The last microphone went and the server made an output's monitor its default source: "System default"
    must not caption the speakers as the user's voice. The capture is lost (the worker then falls back)."""
    usb = UsbMic(pulse_server)
    pulse_server.pactl("set-default-source", "usb_mic")
    source = AudioSystem(pulse_server.sd).make_source("mic", "")
    source.open()
    try:
        assert source.description == "USB-Mic (16 kHz)"
        wait_recording(pulse_server)
        pulse_server.pactl("set-default-source", "virt_out.monitor")
        collect(source, 3.0, until=lambda: source.lost)
        assert source.lost and source.notices() == []
    finally:
        source.close()
        usb.remove()
        pulse_server.pactl("set-default-source", "fakemic")


def test_a_chosen_microphone_keeps_recording_when_the_default_source_changes(pulse_server, monkeypatch):
    """The chosen microphone was the server's default and the user made another one the default: the server moved
    livecap's recording to that one, and livecap took the chosen microphone for lost ("stopped delivering audio",
    then "Back on …"; QA). It is still connected: it is recorded again (on a stream of its own), and nothing of the
    other microphone comes out."""
    from app.sources import pulse

    monkeypatch.setattr(pulse, "CHECK_EVERY_S", 30.0)  # only the checks before handing out blocks
    usb = UsbMic(pulse_server)  # a silent microphone
    writer = FifoWriter(pulse_server.fifo, tone(440, 30.0), lead=0.0)  # the chosen one hears a 440 Hz tone
    writer.start()
    source = AudioSystem(pulse_server.sd).make_source("mic", "pulse:fakemic")
    source.open()
    try:
        wait_recording(pulse_server)
        collect(source, 1.0)
        pulse_server.pactl("set-default-source", "usb_mic")
        time.sleep(0.5)  # the recording is moved now: nothing of it must come out
        after = collect(source, 3.0)
        assert not source.lost and source.description == "Virtual Mic (16 kHz)" and source.notices() == []
        assert band_power(after[-RATE:], 440) > 0.5  # the chosen microphone's tone again
        cmd = ["pactl", "list", "short", "source-outputs"]
        streams = subprocess.run(cmd, env=pulse_server.env, capture_output=True, text=True, timeout=10).stdout
        fakemic = next(s.index for s in source._server.capture_sources() if s.name == "fakemic")
        assert [line.split()[1] for line in streams.splitlines() if "protocol-native" in line] == [str(fakemic)]
    finally:
        source.close()
        writer.stop.set()
        writer.join(2)
        usb.remove()
