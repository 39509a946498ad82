"""The engine worker through the controller: start/stop with a fake microphone, threads, failures."""

from __future__ import annotations

import threading
import time

import numpy as np
from PySide6.QtCore import QObject, Slot

from app.capture import AudioQueue, Block, QueuedInput
from app.worker import SessionSpec
from tests.app import fake_engine
from tests.app.fake_sounddevice import FakeSoundDevice, make_device


class Renaming(QueuedInput):
    """A fake input (silence, a block per read) that, at read ``at``, takes the name ``renamed`` and says ``notice``:
    as a source that follows a new default output or microphone."""

    lost, is_open, rate = False, True, 16000

    def __init__(self, kind: str, description: str, renamed: str = "", notice: str = "", at: int = 0) -> None:
        self.queue = AudioQueue(1.0)
        self.kind, self.description, self.reads = kind, description, 0
        self._renamed, self._notice, self._at = renamed, notice, at
        self._notes: list[str] = []

    def open(self) -> None: ...

    def close(self) -> None: ...

    def notices(self) -> list[str]:
        out, self._notes = self._notes, []
        return out

    def read(self, max_seconds=None):
        self.reads += 1
        if self.reads == self._at:
            self.description = self._renamed
            self._notes.append(self._notice)
        self.queue.put(Block(np.zeros((320, 1), np.float32), 16000, time.monotonic()))
        return super().read(max_seconds)


def run_until_lines(qtbot, controller, n: int, timeout: int = 8000) -> None:
    qtbot.waitUntil(lambda: len(controller.lines) >= n, timeout=timeout)


def test_start_stop_with_fake_microphone(qtbot, loaded, speech):
    controller = loaded
    partials = []
    controller.partial_changed.connect(lambda ev: partials.append(ev))
    with qtbot.waitSignal(controller.state_changed, timeout=3000, check_params_cb=lambda s: s == "running"):
        controller.start(SessionSpec())
    run_until_lines(qtbot, controller, 3)
    with qtbot.waitSignal(controller.session_finished, timeout=5000):
        controller.stop()
    assert controller.state == "idle"
    expected = fake_engine.transcribe(speech)
    assert [line.text for line in controller.lines] == [line.text for line in expected]
    assert any(ev is not None and ev.tail_text for ev in partials), "partials were shown"
    # times are session times of the captured audio
    for got, want in zip(controller.lines, expected):
        assert abs(got.start - want.start) < 0.2


def test_only_the_worker_thread_touches_the_model(qtbot, loaded):
    controller = loaded
    gui = threading.get_ident()
    handler_threads = set()

    class Probe(QObject):  # lives on the GUI thread, like every receiver in the app
        @Slot(object)
        def on_captions(self, _events):
            handler_threads.add(threading.get_ident())

    probe = Probe()
    controller.worker.captions.connect(probe.on_captions)
    controller.line_committed.connect(lambda _line: handler_threads.add(threading.get_ident()))
    controller.start(SessionSpec())
    run_until_lines(qtbot, controller, 1)
    with qtbot.waitSignal(controller.session_finished, timeout=5000):
        controller.stop()
    model = fake_engine.LAST_MODEL
    assert model is not None and model.sessions
    assert len(model.threads) == 1 and gui not in model.threads
    assert handler_threads == {gui}
    assert controller.worker.thread() is controller.worker_thread


def test_callback_only_copies_and_stays_fast(qtbot, loaded, fake_sd):
    loaded.start(SessionSpec())
    run_until_lines(qtbot, loaded, 1)
    with qtbot.waitSignal(loaded.session_finished, timeout=5000):
        loaded.stop()
    times = fake_sd.streams[0].callback_seconds
    assert times and max(times) < 0.064  # under one block period (64 ms), even while the model runs


def test_device_that_refuses_16k_is_opened_at_its_own_rate(qtbot, journal_dir, speech):
    from app.controller import SessionController

    sd = FakeSoundDevice([make_device("USB Mic 48k", 48000.0, inputs=2)], signal=speech, speed=4.0)
    c = SessionController(loader=fake_engine.load_model, sounddevice=sd, journal_dir=journal_dir)
    try:
        with qtbot.waitSignal(c.model_changed, timeout=5000):
            c.load_model("fake", "auto")
        c.start(SessionSpec(device="USB Mic 48k"))
        run_until_lines(qtbot, c, 3)
        with qtbot.waitSignal(c.session_finished, timeout=5000):
            c.stop()
        assert sd.streams[0].samplerate == 48000
        assert "48 kHz" in c.input_description
        assert [line.text for line in c.lines] == [line.text for line in fake_engine.transcribe(speech)]
    finally:
        c.shutdown(5000)


def test_pause_keeps_the_session(qtbot, loaded):
    loaded.start(SessionSpec())
    run_until_lines(qtbot, loaded, 1)
    with qtbot.waitSignal(loaded.state_changed, timeout=3000):
        loaded.pause()
    assert loaded.state == "paused"
    n = len(loaded.lines)
    with qtbot.waitSignal(loaded.state_changed, timeout=3000):
        loaded.resume()
    assert loaded.state == "running"
    with qtbot.waitSignal(loaded.session_finished, timeout=5000):
        loaded.stop()
    assert len(loaded.lines) >= n
    assert len(fake_engine.LAST_MODEL.sessions) == 1


def test_no_input_device_is_a_message_not_a_crash(qtbot, journal_dir):
    from app.controller import SessionController

    sd = FakeSoundDevice([])
    c = SessionController(loader=fake_engine.load_model, sounddevice=sd, journal_dir=journal_dir)
    try:
        with qtbot.waitSignal(c.model_changed, timeout=5000):
            c.load_model("fake", "auto")
        with qtbot.waitSignal(c.session_failed, timeout=3000) as blocker:
            c.start(SessionSpec())
        text, code = blocker.args
        assert text == "No microphone was found; connect one and press Refresh."
        assert code == 4
        assert c.state == "idle"
    finally:
        c.shutdown(5000)


def test_permission_denied_is_a_message(qtbot, journal_dir):
    from app.controller import SessionController

    sd = FakeSoundDevice([make_device("Built-in Mic")], deny=True)
    c = SessionController(loader=fake_engine.load_model, sounddevice=sd, journal_dir=journal_dir)
    try:
        with qtbot.waitSignal(c.model_changed, timeout=5000):
            c.load_model("fake", "auto")
        with qtbot.waitSignal(c.session_failed, timeout=3000) as blocker:
            c.start(SessionSpec())
        assert "could not be opened" in blocker.args[0] and "\n" not in blocker.args[0]
    finally:
        c.shutdown(5000)


def test_model_that_fails_to_load(qtbot, controller):
    with qtbot.waitSignal(controller.model_failed, timeout=5000) as blocker:
        controller.load_model("/models/broken", "auto")
    assert blocker.args == ["No model found in /models/broken (no config.json or params.json).", 3]
    assert controller.state == "no-model"
    with qtbot.waitSignal(controller.model_failed, timeout=5000) as blocker:
        controller.load_model("/models/crash", "auto")
    text = blocker.args[0]
    assert text.startswith("The model /models/crash could not be loaded (RuntimeError: segfault-ish)")
    assert "\n" not in text and "Traceback" not in text
    # and a good model still loads afterwards
    with qtbot.waitSignal(controller.model_changed, timeout=5000):
        controller.load_model("fake", "auto")
    assert controller.state == "idle"


def test_engine_failure_mid_session_keeps_the_text(qtbot, controller, journal_dir):
    from app.journal import read_journal

    with qtbot.waitSignal(controller.model_changed, timeout=5000):
        controller.load_model("fake-explode", "auto")
    messages = []
    controller.message.connect(lambda level, text: messages.append((level, text)))
    with qtbot.waitSignal(controller.session_finished, timeout=8000) as blocker:
        controller.start(SessionSpec())
    assert blocker.args == ["error"]
    assert controller.state == "idle"
    assert (
        "error",
        "Captioning stopped because the engine failed (RuntimeError: fake engine exploded).",
    ) in messages
    journals = list(journal_dir.glob("*.jsonl"))
    assert len(journals) == 1 and read_journal(journals[0])[2], "the journal was closed cleanly"


def test_device_unplugged_mid_session_moves_to_default(qtbot, journal_dir, speech):
    from app.controller import SessionController

    long_speech = np.concatenate([speech, speech])
    sd = FakeSoundDevice([make_device("Headset"), make_device("Laptop Mic")], signal=long_speech, speed=4.0)
    sd.default.device = [1, -1]
    c = SessionController(loader=fake_engine.load_model, sounddevice=sd, journal_dir=journal_dir)
    try:
        with qtbot.waitSignal(c.model_changed, timeout=5000):
            c.load_model("fake", "auto")
        c.start(SessionSpec(device="Headset"))
        run_until_lines(qtbot, c, 1)
        kept = list(c.lines)
        with qtbot.waitSignal(c.device_lost, timeout=3000) as lost:
            sd.unplug("Headset")
        assert "Headset" in lost.args[0]
        assert lost.args[0] == "The microphone \u201cHeadset\u201d stopped delivering audio."  # not "Headset (16 kHz)"
        with qtbot.waitSignal(c.device_recovered, timeout=5000) as found:
            pass
        assert "Laptop Mic" in found.args[0]
        assert sd.rescans >= 1
        assert c.state == "running"
        n = len(c.lines)
        qtbot.waitUntil(lambda: len(c.lines) > n, timeout=8000)  # captions continue from the new device
        assert c.lines[: len(kept)] == kept
        assert len(fake_engine.LAST_MODEL.sessions) == 1  # the same session went on
        with qtbot.waitSignal(c.session_finished, timeout=5000):
            c.stop()
    finally:
        c.shutdown(5000)


def test_exact_zero_silence_gives_a_permission_hint(qtbot, journal_dir):
    from app.controller import SessionController

    sd = FakeSoundDevice([make_device("Mic")], signal=np.zeros(16000, dtype=np.float32), speed=8.0)
    c = SessionController(loader=fake_engine.load_model, sounddevice=sd, journal_dir=journal_dir)
    try:
        with qtbot.waitSignal(c.model_changed, timeout=5000):
            c.load_model("fake", "auto")
        messages = []
        c.message.connect(lambda level, text: messages.append((level, text)))
        with qtbot.waitSignal(c.silence_hint, timeout=4000):
            c.start(SessionSpec())
        assert any(level == "warning" and "privacy" in text for level, text in messages)
        with qtbot.waitSignal(c.session_finished, timeout=5000):
            c.stop()
    finally:
        c.shutdown(5000)


def test_slow_engine_shows_cant_keep_up(qtbot, journal_dir, speech):
    from app.controller import SessionController

    sd = FakeSoundDevice([make_device("Mic")], signal=np.tile(speech, 3), speed=8.0)
    c = SessionController(loader=fake_engine.load_model, sounddevice=sd, journal_dir=journal_dir)
    try:
        with qtbot.waitSignal(c.model_changed, timeout=5000):
            c.load_model("fake-slow", "auto")
        c.start(SessionSpec())
        qtbot.waitUntil(
            lambda: c.last_stats is not None and c.last_stats.backlog_s + c.last_stats.dropped_s > 0.5,
            timeout=6000,
        )
        with qtbot.waitSignal(c.session_finished, timeout=8000):
            c.stop()
    finally:
        c.shutdown(5000)


def test_the_loaded_model_reports_its_weights(qtbot):
    """The real engine through the worker's slot: ``ModelInfo.bits`` is what the model holds. Float32 as stored
    is 0, a float checkpoint at 8 bits is 8, and the mlx-community 4-bit checkpoint is 4 whether or not 8 bits
    were asked for (its matrices stay as stored)."""
    import pytest

    pytest.importorskip("onnxruntime")
    from app.worker import EngineWorker, default_loader
    from tests.conftest import FIXTURES

    worker = EngineWorker(default_loader)
    got = []
    worker.model_loaded.connect(lambda info: got.append(info.bits))
    worker.model_failed.connect(lambda text, code: got.append(text))
    for name, bits in [("moon_tiny_like", 0), ("moon_tiny_like", 8), ("vox_tiny_mlx4", 0), ("vox_tiny_mlx4", 8)]:
        worker.load_model(str(FIXTURES / "models" / name), "numpy", bits)
    assert got == [0, 8, 4, 4]


def test_a_catalog_model_is_named_as_the_welcome_names_it():
    """After the welcome's "Download" of "Moonshine Streaming small", the toolbar and the status bar said
    "moonshine-streaming-small" (the repo's name; QA)."""
    from app.worker import ModelInfo
    from tests.app.catalog_hub import catalog_entry

    small = catalog_entry("moonshine-streaming-small")
    assert ModelInfo(small.repo_id, "moonshine_streaming", "numpy").name == small.name == "Moonshine Streaming small"
    assert ModelInfo("/models/my-model/", "moonshine_streaming", "numpy").name == "my-model"
    assert ModelInfo("someone/other-model", "voxtral_realtime", "numpy").name == "other-model"


def test_a_stall_of_livecap_is_no_lost_input_and_later_lines_keep_their_times(qtbot, journal_dir, monkeypatch):
    """Freeze QA: livecap stopped for 3 s (SIGSTOP; a busy or sleeping computer) took its microphone for lost when
    it ran again before the capture thread had handed over what the sound server kept, moved to the default one
    and lost that audio; and audio the full queue dropped moved every later line earlier by as much."""
    from PySide6.QtCore import QTimer

    from app import timeline, worker
    from app.controller import SessionController

    speech = fake_engine.speechlike([(0.5, 0.5)] * 40)  # 40 s of bursts, one line each
    sd = FakeSoundDevice([make_device("Headset"), make_device("Laptop Mic")], signal=speech, speed=4.0)

    class FrozenToo(timeline.StallWatch):  # the whole process stops: this thread as well
        def _run(self) -> None:
            before = time.monotonic()
            while not self._stop.wait(self.EVERY_S):
                while sd.frozen.is_set():
                    time.sleep(0.005)
                now = time.monotonic()
                if now - before > self.stall_s:
                    self._last = (now, now - before)
                before = self.beat = now

    monkeypatch.setattr(worker, "StallWatch", FrozenToo)
    sd.default.device = [1, -1]
    c = SessionController(loader=fake_engine.load_model, sounddevice=sd, journal_dir=journal_dir)
    lost, notices, stats = [], [], []
    c.device_lost.connect(lost.append)
    c.message.connect(lambda _level, text: notices.append(text))
    c.stats_changed.connect(stats.append)
    try:
        with qtbot.waitSignal(c.model_changed, timeout=5000):
            c.load_model("fake", "auto")
        c.start(SessionSpec(device="Headset"))
        run_until_lines(qtbot, c, 2)
        sd.frozen.set()  # the whole process stops: the capture thread, and the worker (below) ...
        QTimer.singleShot(0, c.worker, lambda: time.sleep(3.0))
        qtbot.wait(3200)  # ... which runs again a moment before the capture thread hands over its backlog
        sd.frozen.clear()
        qtbot.waitUntil(lambda: c.state == "idle" or len(c.lines) >= 30, timeout=15000)
        with qtbot.waitSignal(c.session_finished, timeout=5000):
            c.stop()
        assert lost == []  # the same microphone throughout
        assert stats[-1].dropped_s == 0.0  # not counted as the model's "can't keep up"
        expected = {round(line.start, 1) for line in fake_engine.transcribe(speech)}
        starts = [round(line.start, 1) for line in c.lines]
        assert len(starts) >= 25
        # as spoken, after it too; a line whose speech the full queue cut begins where the audio kept begins, in its
        # burst (a word is 0.24 s of voice: up to 0.26 s in, and 80 ms frames)
        astray = [s for s in starts if not any(e - 0.2 <= s <= e + 0.35 for e in expected)]
        assert not astray, f"lines at {astray} (expected near {sorted(expected)}; all: {starts})"
        assert any("could not run" in text for text in notices), notices
    finally:
        c.shutdown(5000)


def test_audio_dropped_while_the_worker_reads_moves_no_line(qtbot, journal_dir):
    """The stall test above failed now and then under load: after the stall the capture thread put its backlog
    back to back, so the full queue dropped audio between the worker's look at the dropped seconds and its read.
    That gap went on the timeline after the blocks read, and the lines in them came out early by it. Here the
    capture runs exactly inside each read (a block a read), and one read's backlog overflows the queue."""
    from app.capture import BLOCK_SECONDS, AudioQueue, Block, QueuedInput
    from app.controller import SessionController

    speech = fake_engine.speechlike([(0.5, 1.5)] * 6)  # a line every 2 s
    block = round(BLOCK_SECONDS * 16000)

    class BackToBack(QueuedInput):
        kind, rate, description, lost, is_open = "microphone", 16000, "Back to back", False, True

        def __init__(self) -> None:
            self.queue = AudioQueue(1.0)
            self.reads = self.pos = 0

        def open(self) -> None: ...

        def close(self) -> None: ...

        def read(self, max_seconds=None):
            self.reads += 1
            for _ in range(20 if self.reads == 17 else 1):  # read 17: 20 blocks at once, the oldest 5 dropped
                pcm = speech[self.pos : self.pos + block]
                pcm = np.pad(pcm, (0, block - len(pcm)))
                self.queue.put(Block(pcm.reshape(-1, 1), 16000, time.monotonic()))
                self.pos += block
            return super().read(max_seconds)

    c = SessionController(loader=fake_engine.load_model, sounddevice=FakeSoundDevice(), journal_dir=journal_dir)
    try:
        with qtbot.waitSignal(c.model_changed, timeout=5000):
            c.load_model("fake", "auto")
        c.worker._make_source = lambda spec: BackToBack()
        c.start(SessionSpec())
        run_until_lines(qtbot, c, 4)
        with qtbot.waitSignal(c.session_finished, timeout=5000):
            c.stop()
        dropped = 5 * block / 16000  # 1.024 to 1.344 s: quiet, after the first line ended
        assert abs(c.last_stats.dropped_s - dropped) < 1e-6
        assert [round(line.start, 2) for line in c.lines][:4] == [0.0, 2.0, 4.0, 6.0]  # 2.0 was 1.68
    finally:
        c.shutdown(5000)


def test_a_worker_busy_with_a_slow_model_is_no_stall(qtbot, journal_dir, speech):
    """A feed that takes longer than a stall (1.5 s for each second of audio) is the worker at work, not livecap
    stopped: audio the full queue drops is the model's "can't keep up", not "livecap could not run"."""
    from app.controller import SessionController

    sd = FakeSoundDevice([make_device("Mic")], signal=np.tile(speech, 6), speed=8.0)
    c = SessionController(loader=fake_engine.load_model, sounddevice=sd, journal_dir=journal_dir)
    notices = []
    c.message.connect(lambda _level, text: notices.append(text))
    try:
        with qtbot.waitSignal(c.model_changed, timeout=5000):
            c.load_model("fake-slower", "auto")
        c.start(SessionSpec())
        qtbot.waitUntil(lambda: c.last_stats is not None and c.last_stats.dropped_s > 1.0, timeout=12000)
        qtbot.wait(2000)
        assert c.worker._stall_lost == 0.0  # all of it the model's (counted from each tick's start: 26 of 37 s)
        assert not any("could not run" in text for text in notices), notices
    finally:
        c.shutdown(15000)


def test_a_notice_of_a_new_output_comes_after_the_new_name(qtbot, journal_dir):
    """The input followed a new default output: its notice in the banner stood for a moment beside the old
    output's name in the status bar (the pulse test saw the banner and the old name together under load)."""
    from app.controller import SessionController

    c = SessionController(loader=fake_engine.load_model, sounddevice=FakeSoundDevice(), journal_dir=journal_dir)
    seen = []  # the input's name where each warning reaches the banner
    c.message.connect(lambda level, text: seen.append((text, c.input_description)))
    try:
        with qtbot.waitSignal(c.model_changed, timeout=5000):
            c.load_model("fake", "auto")
        c.worker._make_source = lambda spec: Renaming(
            "system", "Speakers", "Headphones", "The output changed; livecap follows it.", at=5
        )
        c.start(SessionSpec())
        qtbot.waitUntil(lambda: any("follows" in text for text, _ in seen), timeout=5000)
        assert [name for text, name in seen if "follows" in text] == ["Headphones"]
    finally:
        c.shutdown(5000)


def test_under_both_a_part_that_follows_a_new_default_renames_the_input(qtbot, journal_dir):
    """Both: the microphone part followed a new default microphone (or the system part a new default output) and
    said so, but the status bar and the session journal kept the mix's first name (QA)."""
    from app.controller import SessionController
    from app.sources.mix import MixSource

    c = SessionController(loader=fake_engine.load_model, sounddevice=FakeSoundDevice(), journal_dir=journal_dir)
    seen = []
    c.message.connect(lambda level, text: seen.append(text))
    try:
        with qtbot.waitSignal(c.model_changed, timeout=5000):
            c.load_model("fake", "auto")
        mic = Renaming(
            "microphone", "Virtual Mic (16 kHz)", "USB-Mic (16 kHz)", "The default microphone changed.", at=10
        )
        system = Renaming("system", "System audio: Speakers (16 kHz)")
        c.worker._make_source = lambda spec: MixSource(mic, system)
        c.start(SessionSpec(source="both"))
        qtbot.waitUntil(lambda: "The default microphone changed." in seen, timeout=5000)
        assert c.input_description == "USB-Mic (16 kHz) + System audio: Speakers (16 kHz)"
        with qtbot.waitSignal(c.session_finished, timeout=5000):
            c.stop()
        journal = "".join(path.read_text() for path in journal_dir.glob("*.jsonl"))
        assert '"input": "USB-Mic (16 kHz) + System audio: Speakers (16 kHz)"' in journal
    finally:
        c.shutdown(5000)


def load_fake(qtbot, controller, name: str) -> None:
    with qtbot.waitSignal(controller.model_changed, timeout=5000):
        controller.load_model(name, "auto")


def test_quitting_with_a_model_behind_waits_a_few_seconds_not_for_the_whole_backlog(qtbot, controller, monkeypatch):
    """Quit (Ctrl+C, SIGTERM) with a model slower than real time transcribed the whole backlog first: the app's wait
    for the worker ran out (15 s), a replay's --save-transcript was never written, the session stayed unfinished
    (QA). The worker now feeds it for DRAIN_ON_QUIT_S at most and says how much was not transcribed."""
    from app import worker

    monkeypatch.setattr(worker, "DRAIN_ON_QUIT_S", 0.3, raising=False)
    load_fake(qtbot, controller, "fake-slower")  # 1.5 s of work per second of audio, the mic at 4x real time
    said: list[str] = []
    controller.message.connect(lambda _level, text: said.append(text))
    controller.start(SessionSpec())
    qtbot.waitUntil(lambda: controller.state == "running", timeout=5000)
    qtbot.waitUntil(lambda: (controller.last_stats or 0) and controller.last_stats.backlog_s > 6.0, timeout=10000)
    began = time.monotonic()
    assert controller.shutdown(15000)
    assert time.monotonic() - began < 5.0  # the tick at work (1.5 s), 0.3 s of backlog, finish; the whole: 9 s
    assert any("were not transcribed: quitting does not wait" in text for text in said), said


def test_a_replay_pauses_at_once_and_a_fast_one_keeps_up(qtbot, controller, tmp_path, monkeypatch):
    """A replay behind a slow model took 16 s to pause after 30 s (it transcribed the backlog first: the file
    keeps it for Resume); at --speed 200 the worker read one second a tick and the status bar said "can't keep up"
    with a model that costs nothing (QA)."""
    from app import worker

    monkeypatch.setattr(worker, "DRAIN_ON_QUIT_S", 0.3, raising=False)
    wav = fake_engine.write_wav(tmp_path / "talk.wav", fake_engine.speechlike([(0.5, 0.5)] * 40))
    load_fake(qtbot, controller, "fake-slower")
    controller.start(SessionSpec(input_file=str(wav), speed=4.0))
    qtbot.waitUntil(lambda: (controller.last_stats or 0) and controller.last_stats.backlog_s > 6.0, timeout=10000)
    began = time.monotonic()
    controller.pause()
    qtbot.waitUntil(lambda: controller.state == "paused", timeout=30000)
    assert time.monotonic() - began < 4.0  # the tick at work (1.5 s); the backlog: 9 s
    qtbot.waitUntil(lambda: controller.last_stats.backlog_s > 0, timeout=2000)  # stats while paused
    assert controller.elapsed() >= controller.last_stats.audio_s + 5.0  # the backlog is still due: the position
    controller.shutdown(15000)


def test_a_fast_replay_is_read_at_its_pace(qtbot, controller, tmp_path):
    wav = fake_engine.write_wav(tmp_path / "talk.wav", fake_engine.speechlike([(0.5, 0.5)] * 40))
    load_fake(qtbot, controller, "fake")
    backlog: list[float] = []
    controller.stats_changed.connect(lambda stats: backlog.append(stats.backlog_s))
    with qtbot.waitSignal(controller.session_finished, timeout=20000):
        controller.start(SessionSpec(input_file=str(wav), speed=200.0))
    assert backlog and max(backlog) < 2.0, max(backlog)  # "can't keep up" shows from 2 s
