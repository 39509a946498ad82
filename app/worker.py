"""The engine worker: a QObject on its own QThread that owns the model and is the ONLY thread touching it.

MLX is not thread-safe (ml-explore/mlx #3078), so loading, every ``feed`` and ``finish``, and dropping a
model all happen here. The GUI drives the worker through queued signals (``request_*`` on
``app.controller.SessionController``) and hears back through the signals below; no widget is ever
touched from this thread.

On each tick (20 ms) the worker takes the audio its source has captured, resamples it statefully to
16 kHz mono (``engine.audio.Resampler``), feeds the session and emits the caption events. It also
watches the source: a microphone that vanished is reported (``device_lost``) and capture moves to the
default device while the session, and its text, carry on; several seconds of exact-zero samples
raise ``silence_hint`` (the usual symptom of a denied microphone permission).
"""

from __future__ import annotations

import collections
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from PySide6.QtCore import QObject, QTimer, Signal, Slot

from app.audio_source import AudioSource
from app.capture import Block, BlockResampler, refresh_devices
from app.file_source import FileSource
from app.session_audio import AudioRecorder
from app.sources.base import SERVER_SILENT, START_WHEN_SERVER_ANSWERS, LevelSum, ServerSilent
from app.timeline import StallWatch, Timeline
from engine.audio import SAMPLE_RATE
from engine.errors import AudioError, LivecapError, user_message
from engine.events import CaptionEvent
from engine.protocols import Model, Session

log = logging.getLogger(__name__)

TICK_MS = 20
STALL_S = 1.0  # livecap did not run this long: the process was stopped, the machine froze or slept (StallWatch)
STALL_GRACE_S = 3.0  # after a stall, the time the input has to hand over what it buffered before it counts as lost
STATS_EVERY_S = 0.1
MAX_SECONDS_PER_TICK = 1.0  # a source may ask for more (``max_read_s``: a replay at high speed)
DRAIN_ON_QUIT_S = 5.0  # on quit, at most this long transcribing what was captured and not yet fed
SILENCE_HINT_AFTER_S = 4.0
RECOVER_EVERY_S = 2.0
SERVER_GRACE_S = 3.0  # once a sound server that did not answer does, its streams have this long to deliver again

ModelLoader = Callable[..., Model]


def model_name(source: str) -> str:
    """The last component of a model folder or hub id ("" stays "")."""
    return source.rstrip("/\\").replace("\\", "/").rsplit("/", 1)[-1]


@dataclass(frozen=True)
class ModelInfo:
    """What the status bar shows about the loaded model."""

    source: str
    family: str
    backend: str
    bits: int = 0  # the bits of the model's quantized matrices, stored so or converted on load (0: float)

    @property
    def name(self) -> str:
        """A short name: the catalog's name for a catalog model (as the welcome and the model dialog call it,
        "Moonshine Streaming small"), else the last path component or repo name."""
        from engine.catalog import find_entry

        entry = find_entry(self.source) if self.source.count("/") == 1 else None  # owner/name: a hub id
        return entry.name if entry is not None else model_name(self.source) or self.source

    @property
    def has_delay(self) -> bool:
        """Whether the model takes a ``delay_ms`` session option (Voxtral Realtime)."""
        return self.family == "voxtral_realtime"


@dataclass(frozen=True)
class SessionSpec:
    """How to start a session: replay ``input_file`` at ``speed``, or capture ``source`` ("mic",
    "system" or "both"; ``app.sources``) from the microphone ``device`` and the output ``output`` ("" or
    None: the defaults). ``options`` go to ``model.start_session``. With ``audio_path`` the audio the
    engine is fed is kept there (``app.session_audio``)."""

    input_file: str | None = None
    speed: float = 1.0
    device: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    audio_path: str | None = None
    source: str = "mic"
    output: str | None = None
    names: dict[str, str] = field(default_factory=dict)  # what a device or output id was called (for messages)


@dataclass(frozen=True)
class Stats:
    """Health numbers, emitted about ten times a second while a session runs."""

    level_db: float  # RMS of the latest audio, dBFS (-90 when silent)
    latency_s: float | None  # audio-to-caption latency of the latest caption update
    backlog_s: float  # audio captured but not yet fed to the model
    dropped_s: float  # audio dropped because the queue was full (this session), but while livecap could not run
    audio_s: float  # the session's audio so far: fed, and lost on the way (the lines' timeline)
    tracks: dict[str, float] | None = None  # "Both": each input's level, dBFS ({"mic": .., "system": ..})
    invalid_samples: int = 0  # NaN/inf/huge samples the engine replaced by silence (this session)


def default_loader(source: str, *, backend: str = "auto", quantize: int | None = None) -> Model:
    """``engine.load_model`` (imported lazily, so the app starts even while the engine is missing)."""
    from engine import load_model

    return load_model(source, backend=backend, quantize=quantize)


def exit_code(exc: BaseException, default: int) -> int:
    """The process exit code for ``exc`` in unattended runs: the engine's own, else ``default``."""
    return int(getattr(exc, "exit_code", default)) if isinstance(exc, LivecapError) else default


class EngineWorker(QObject):
    """Owns the model, the session, the audio source and the resampler. Live on a QThread; call the slots
    only through queued connections."""

    model_loaded = Signal(object)  # ModelInfo
    model_failed = Signal(str, int)  # one sentence, exit code (engine.errors: 3 model, 2 usage, ...)
    state_changed = Signal(str)  # "idle" | "running" | "paused"
    session_started = Signal(str)  # description of the input
    input_moved = Signal(str)  # the input's new description after it followed a change (a new default output)
    session_failed = Signal(str, int)  # the session could not start: one sentence, exit code
    captions = Signal(object)  # list[CaptionEvent], in order
    stats = Signal(object)  # Stats
    device_lost = Signal(str)
    device_recovered = Signal(str)
    device_returned = Signal(str)  # back on the chosen devices after a fallback: the input's description
    input_waiting = Signal()  # after a loss no input can be opened now: captioning goes on when one comes back
    server_waiting = Signal(bool)  # the sound server stopped answering (True), answers again (False); see notice
    notice = Signal(str)
    silence_hint = Signal()
    error = Signal(str)
    session_finished = Signal(str)  # "stopped" | "input ended" | "error"
    shut_down = Signal()

    def __init__(self, loader: ModelLoader = default_loader, sounddevice: Any = None, audio: Any = None) -> None:
        super().__init__()
        self._loader = loader
        self._sd = sounddevice
        self._audio = audio  # app.sources.AudioSystem, made on first use
        self._spec = SessionSpec()
        self._model: Model | None = None
        self._session: Session | None = None
        self._source: AudioSource | None = None
        self._resampler = BlockResampler()
        self._timer: QTimer | None = None
        self._recorder: AudioRecorder | None = None
        self._stall_watch: StallWatch | None = None  # while a session runs
        self._state = "idle"
        self._started_on_defaults = False  # a chosen device was not connected at Start (``_make_source``)
        self._reset_counters()

    # -- slots (worker thread) -----------------------------------------------------------------
    @Slot(str, str, int)
    def load_model(self, source: str, backend: str, bits: int = 0) -> None:
        """Load ``source`` (a folder or hub id) on ``backend``, its float weights converted to ``bits`` (0: as
        stored); emits ``model_loaded`` or ``model_failed``."""
        if self._session is not None:
            self._stop("stopped")
        self._model = None
        try:
            model = self._loader(source, backend=backend, **({"quantize": bits} if bits else {}))
        except Exception as exc:  # any failure becomes one sentence, the app goes on
            log.warning("model load failed: %s", source, exc_info=True)
            self.model_failed.emit(user_message(exc, f"The model {source} could not be loaded"), exit_code(exc, 3))
            return
        self._model = model
        family, backend = str(getattr(model, "family", "unknown")), str(getattr(model, "backend_name", "?"))
        info = ModelInfo(source, family, backend, int(getattr(model, "weight_bits", None) or 0))
        self.model_loaded.emit(info)

    @Slot(object)
    def start(self, spec: SessionSpec) -> None:
        """Open the input and start a session; emits ``session_started`` or ``session_failed``."""
        if self._session is not None:
            self._stop("stopped")
        if self._model is None:
            self.session_failed.emit("Choose a model before starting.", 2)
            return
        try:
            source = self._make_source(spec)
            source.open()
        except Exception as exc:
            log.warning("input failed", exc_info=not isinstance(exc, LivecapError))
            self.session_failed.emit(user_message(exc, "The audio input could not be opened"), exit_code(exc, 4))
            return
        try:
            session = self._model.start_session(**spec.options)
        except Exception as exc:
            source.close()
            log.warning("start_session failed", exc_info=True)
            self.session_failed.emit(user_message(exc, "The session could not start"), exit_code(exc, 1))
            return
        self._source, self._session = source, session
        self._recorder = AudioRecorder(spec.audio_path) if spec.audio_path else None
        self._reset_counters()
        self._fell_back = self._started_on_defaults  # the chosen device, once plugged in, takes over
        self._stall_watch = StallWatch(STALL_S)
        self._ensure_timer().start()
        self.session_started.emit(source.description)
        self._set_state("running")

    @Slot()
    def pause(self) -> None:
        """Stop capturing but keep the session (and its text); ``resume`` continues it."""
        if self._session is None or self._state != "running":
            return
        self._source.close()
        if getattr(self._source, "kind", "") != "file":  # a file keeps what was due for Resume (no wait here)
            self._feed(self._source.read())
        if self._recovering:  # resume on the default device rather than the one that vanished
            self._source = self._fallback_source()
            self._recovering = False
            self._resume_reports = self._fell_back = True
        if self._session is not None:
            self._set_state("paused")

    @Slot()
    def resume(self) -> None:
        """Capture again after ``pause``."""
        if self._session is None or self._state != "paused":
            return
        if getattr(self._source, "kind", "") != "file" and self._audio_system().server_silent(fresh=True):
            # opening a stream, or PortAudio's re-scan, through a server that does not answer would wait for it
            self.error.emit(f"{SERVER_SILENT}; press Resume once it does.")
            return
        try:
            try:
                self._source.open()
            except AudioError:
                if getattr(self._source, "kind", "") == "file":
                    raise
                refresh_devices(self._sounddevice())  # plugged in while paused: PortAudio sees it after a re-scan
                self._source.open()  # (nothing is open while paused, so the re-scan closes nothing)
        except Exception as exc:  # Refresh is not at hand while paused: Resume tries again
            if isinstance(exc, AudioError) and self._resume_on_defaults():
                return
            text = user_message(exc, "The audio input could not be reopened")
            self.error.emit(text.replace("press Refresh", "press Resume"))
            return
        self._zero_run = 0
        self._set_state("running")
        if self._resume_reports:  # paused while the input was lost: say what it captures now
            self._resume_reports = False
            self.device_recovered.emit(self._source.description)

    @Slot()
    def stop(self) -> None:
        """End the session: feed what was captured, ``finish()``, emit the last captions."""
        if self._session is not None:
            self._stop("stopped")

    @Slot()
    def shutdown(self) -> None:
        """Stop everything and drop the model (on this thread); emits ``shut_down`` last. What was captured and
        not yet transcribed is fed for ``DRAIN_ON_QUIT_S`` at most (a model slower than real time had up to 15 s
        of it: the app's wait for this thread ran out, and a replay's transcript was never saved)."""
        if self._session is not None:
            self._stop("stopped", DRAIN_ON_QUIT_S)
        if self._timer is not None:
            self._timer.stop()
        self._model = None
        self.shut_down.emit()

    # -- internals ------------------------------------------------------------------------------
    def _make_source(self, spec: SessionSpec) -> AudioSource:
        """The session's input; ``_started_on_defaults`` says whether a chosen device that is not connected was
        replaced by the default (the session then goes back to it once it is there, as after a loss)."""
        self._spec = spec
        self._started_on_defaults = False
        if spec.input_file:
            return FileSource(spec.input_file, spec.speed)

        def notify(text: str) -> None:
            self._started_on_defaults = True
            self.notice.emit(text)

        return self._audio_system().make_source(spec.source, spec.device, spec.output, notify, spec.names)

    def _fallback_source(self) -> Any:
        """The same kind of source on the default devices (after a device vanished); under "both", the side that
        still delivered keeps its chosen device (``_kept``): losing the microphone moved the call's output too."""
        spec, kept = self._spec, self._kept
        device = spec.device if "mic" in kept else None
        output = spec.output if "system" in kept else None
        return self._audio_system().make_source(spec.source, device, output)

    def _audio_system(self) -> Any:
        if self._audio is None:
            from app.sources import AudioSystem

            self._audio = AudioSystem(self._sounddevice())
        return self._audio

    def _sounddevice(self) -> Any:
        if self._sd is None:
            from app.sources import load_sounddevice

            try:
                self._sd = load_sounddevice()
            except ServerSilent as exc:  # PortAudio's start would wait for the server (livecap began while it was)
                raise ServerSilent(START_WHEN_SERVER_ANSWERS) from exc
        return self._sd

    def _ensure_timer(self) -> QTimer:
        if self._timer is None:
            self._timer = QTimer(self)
            self._timer.setInterval(TICK_MS)
            self._timer.timeout.connect(self._tick)
        return self._timer

    def _set_state(self, state: str) -> None:
        if state != self._state:
            self._state = state
            self.state_changed.emit(state)

    def _reset_counters(self) -> None:
        self._fed = 0  # 16 kHz samples fed to the session
        self._arrivals: collections.deque[tuple[int, float]] = collections.deque(maxlen=512)
        self._latency: float | None = None
        self._level = LevelSum()
        self._last_stats = 0.0
        self._zero_run = 0
        self._hinted = False
        self._dropped_before = 0.0
        self._recovering = False
        self._server_waited = False  # the input delivers nothing because the sound server does not answer
        self._server_grace = 0.0  # until then a lost input is not handled: the server just answered again
        self._kept: set[str] = set()  # under "both", the sides that still delivered when the input was lost
        self._resume_reports = False  # paused while lost: resume says what it captures (device_recovered)
        self._next_recover = 0.0
        self._fell_back = False  # capturing on the default devices after a loss (``_try_return``)
        self._next_return = 0.0
        self._timeline = Timeline()  # where audio was lost on the way: line times as spoken
        self._drop_source: Any = None  # the input whose dropped seconds ``_drop_seen`` counts
        self._drop_seen = 0.0  # its dropped seconds already put on the timeline
        self._stall_seen = self._last_tick = time.monotonic()  # stalls that ended before are dealt with; tick end
        self._stall_until = 0.0  # after a stall, until then: no loss judged, drops are the stall's
        self._stall_s = 0.0  # how long the last stall was
        self._stall_lost = 0.0  # audio lost to stalls (not the model's doing), this session
        self._stall_told = 0.0  # of which the user was told

    def _tick(self) -> None:
        now = time.monotonic()
        # livecap did not run: this thread's own wait since its last tick ended (no race with the other threads
        # waking) or the watch (a stall while a feed ran; a feed of a slow model alone is no stall)
        stall = self._stall_watch.since(self._stall_seen) if self._stall_watch is not None else None
        if now - self._last_tick > STALL_S:
            stall = (now, now - self._last_tick)
        if stall is not None and self._session is not None:
            self._stall_seen, self._stall_s = stall
            self._stall_until = now + STALL_GRACE_S  # see STALL_GRACE_S
            log.info("livecap did not run for %.1f s", self._stall_s)
        try:
            self._run_tick(now)
        finally:
            self._last_tick = time.monotonic()

    def _run_tick(self, now: float) -> None:
        if self._session is None or self._state != "running":
            return
        source = self._source
        stalled = now < self._stall_until
        if not stalled and self._stall_lost > self._stall_told + 0.05:
            lost, self._stall_told = self._stall_lost - self._stall_told, self._stall_lost
            self.notice.emit(
                f"livecap could not run for {self._stall_s:.0f} s (the computer was busy or asleep), and "
                f"{lost:.1f} s of audio were lost."
            )
        if self._recovering:
            self._try_recover()
        elif source.lost and not stalled and now >= self._server_grace:  # a stall hands over what it buffered
            watch = self._stall_watch
            if watch is not None and not watch.current(time.monotonic()):
                pass  # the watch has not run since: ask again
            elif self._audio_system().server_silent():
                self._wait_for_server()
            elif self._server_waited:
                self._server_answers()
            else:
                self._handle_loss()
        elif self._server_waited and not source.lost:  # delivering again before a check saw the server answer
            self._server_answers()
        else:
            blocks = source.read(getattr(source, "max_read_s", MAX_SECONDS_PER_TICK))
            self._note_drops(source, stalled)  # after the read: what it dropped by then came before these blocks
            notices = getattr(source, "notices", list)()  # output changes, hints
            if notices:  # the new input's name first: a notice on screen never stands beside the old name
                self.input_moved.emit(source.description)
            for text in notices:
                self.notice.emit(text)
            if blocks and not self._feed(blocks):
                return
            if source.ended and not blocks:
                self._stop("input ended")
                return
            if self._fell_back and time.monotonic() >= self._next_return:
                self._next_return = time.monotonic() + RECOVER_EVERY_S
                self._try_return()
        now = time.monotonic()
        if now - self._last_stats >= STATS_EVERY_S:
            self._last_stats = now
            self._emit_stats()

    def _note_drops(self, source: Any, stalled: bool) -> None:
        """Put audio the input dropped (its queue overflowed) before the blocks just read on the timeline, where
        they are fed (the oldest blocks go), and in the kept audio as silence; "Both" keeps its own timeline."""
        dropped = source.dropped_seconds
        if source is not self._drop_source or dropped < self._drop_seen:  # another input, or its count began again
            self._drop_source, self._drop_seen = source, 0.0
        gap, self._drop_seen = dropped - self._drop_seen, dropped
        if gap <= 0:
            return
        if stalled:
            self._stall_lost += gap
        if not getattr(source, "fills_gaps", False):
            self._timeline.add_gap(self._fed / SAMPLE_RATE, gap)
            self._record(np.zeros(round(gap * SAMPLE_RATE), np.float32))

    def _feed(self, blocks: list[Block]) -> bool:
        """Resample and feed ``blocks``; emit the events. False when the session failed (and ended)."""
        if not blocks:
            return True
        parts = []
        for block in blocks:
            pcm = self._resampler.process(block)
            parts.append(pcm)
            self._fed += len(pcm)
            self._arrivals.append((self._fed, block.time))
            self._track_level(block.samples)
        pcm = np.concatenate(parts) if len(parts) > 1 else parts[0]
        self._record(pcm)
        try:
            events = self._session.feed(pcm) if len(pcm) else []
        except Exception as exc:  # the engine failed: keep the text, end cleanly
            log.error("session.feed failed", exc_info=True)
            self._fail(user_message(exc, "Captioning stopped because the engine failed"))
            return False
        self._emit_events(events)
        return True

    def _track_level(self, samples: np.ndarray) -> None:
        if samples.size == 0:
            return
        flat = samples.reshape(-1)
        if not np.isfinite(flat).all():  # NaN/inf: the engine silences them; the meter ignores them
            flat = np.where(np.isfinite(flat), flat, np.float32(0.0))
        self._level.add(flat)
        if self._source is not None and self._source.kind == "microphone":
            if not np.any(samples):
                self._zero_run += len(samples)
                if not self._hinted and self._zero_run / self._source.rate >= SILENCE_HINT_AFTER_S:
                    self._hinted = True
                    self.silence_hint.emit()
            else:
                self._zero_run = 0

    def _emit_events(self, events: list[CaptionEvent]) -> None:
        if not events:
            return
        now = time.monotonic()
        for event in events:
            line = event.partial if event.partial is not None else (event.committed or [None])[-1]
            if line is not None:
                arrived = self._arrival_of(line.end)
                if arrived is not None:
                    self._latency = max(now - arrived, 0.0)
        self.captions.emit([self._timeline.event(event) for event in events])

    def _arrival_of(self, seconds: float) -> float | None:
        """When the audio at session time ``seconds`` arrived from the source (``None``: unknown)."""
        target = seconds * SAMPLE_RATE
        for fed, arrived in self._arrivals:
            if fed >= target:
                return arrived
        return None

    def _emit_stats(self) -> None:
        level = self._level.take()
        source = self._source
        dropped = self._dropped_before + (source.dropped_seconds if source is not None else 0.0) - self._stall_lost
        backlog = source.backlog_seconds if source is not None else 0.0
        tracks = source.track_levels() if hasattr(source, "track_levels") else None
        invalid = int(getattr(self._session, "invalid_samples", 0) or 0)
        audio = self._fed / SAMPLE_RATE + self._timeline.missing  # the session's timeline, gaps included
        self.stats.emit(Stats(level, self._latency, backlog, max(dropped, 0.0), audio, tracks, invalid))

    def _wait_for_server(self) -> None:
        """The input delivers nothing because the sound server does not answer (SIGSTOP, a hung PipeWire): the
        stream stays open and delivers again when the server does. Nothing is closed or tried instead: closing,
        PortAudio's re-scan and any stream through the server would wait for it, and the worker with them (Stop and
        Quit hung)."""
        if not self._server_waited:
            self._server_waited = True
            log.warning("the sound server does not answer; waiting for it")
            self.server_waiting.emit(True)
            self.notice.emit(f"{SERVER_SILENT}; captioning goes on when it does.")

    def _server_answers(self) -> None:
        """The server answers again: the input has ``SERVER_GRACE_S`` to deliver before it is taken for lost."""
        self._server_waited = False
        self._server_grace = time.monotonic() + SERVER_GRACE_S
        log.info("the sound server answers again")
        self.server_waiting.emit(False)
        self.notice.emit("The sound server answers again; captioning goes on.")

    def _handle_loss(self) -> None:
        source = self._source
        log.warning("input lost: %s", source.description)
        sides = {"mic": getattr(source, "mic", None), "system": getattr(source, "system", None)}
        self._kept = {name for name, side in sides.items() if side is not None and not side.lost}
        lost = {frozenset({"system"}): sides["mic"], frozenset({"mic"}): sides["system"]}.get(
            frozenset(self._kept), source
        )
        self._retire(source)
        if self._server_went(lost):
            self.device_lost.emit("The sound server stopped answering.")
        else:
            self.device_lost.emit(f"{_named(lost)} stopped delivering audio.")
        self._recovering = True
        self._next_recover = 0.0
        self._try_recover()
        if self._recovering:
            self.input_waiting.emit()

    def _server_went(self, lost: Any) -> bool:
        """Whether ``lost`` was captured through a sound server (system audio, a microphone by its server name)
        that is gone now: then that, not the device, is what the user is told."""
        if lost.kind != "system" and not hasattr(lost, "pulse_source"):
            return False
        try:
            return self._audio_system().system_unavailable() is not None
        except Exception:  # noqa: BLE001 - only the wording depends on it
            return False

    def _resume_on_defaults(self) -> bool:
        """Resume on the default devices when the chosen one went while paused (every Resume failed with "not
        available", and only Stop got out); says so as a loss does, and returns to the chosen one when it is back.
        False when the defaults do not open either."""
        source = self._source
        self._kept = set()
        try:
            fallback = self._fallback_source()
            fallback.open()
        except AudioError:
            return False
        self._source, self._fell_back, self._zero_run = fallback, True, 0
        self.device_lost.emit(f"{_named(source)} is no longer available.")
        self._set_state("running")
        self.device_recovered.emit(fallback.description)
        return True

    def _try_recover(self) -> None:
        now = time.monotonic()
        if now < self._next_recover:
            return
        self._next_recover = now + RECOVER_EVERY_S
        if self._audio_system().server_silent():  # the re-scan and every stream through it would wait for it
            return
        sd = self._sounddevice()
        try:
            refresh_devices(sd)
        except Exception:  # a failed re-scan leaves the old list; try to open anyway
            log.debug("device refresh failed", exc_info=True)
        try:
            source = self._fallback_source()
            source.open()
        except AudioError:
            return
        self._source = source
        self._recovering = False
        self._fell_back = True
        self._zero_run = 0
        self.device_recovered.emit(source.description)

    def _retire(self, source: Any) -> None:
        """Close a source the session leaves (lost, or a fallback given up) and feed what it still held."""
        source.close()
        self._feed(source.read())
        self._dropped_before += source.dropped_seconds

    def _try_return(self) -> None:
        """Back on the chosen microphone and output once the sound server lists them again (after a fallback to
        the defaults: a USB headset plugged back in). Only devices the server lists: telling whether a device only
        PortAudio knows is back needs a re-scan, which would stop the stream capturing now. The fallback is closed
        before the chosen one opens (two microphones at once would feed the same words twice); when the chosen
        one does not open after all, it is a loss as any (the defaults again)."""
        spec = self._spec
        audio = self._audio_system()
        try:
            if not audio.listed(spec.source, spec.device, spec.output):
                return
            source = audio.make_source(spec.source, spec.device, spec.output, names=spec.names)
        except AudioError:
            return
        self._retire(self._source)
        try:
            source.open()
        except AudioError:
            log.info("the chosen input was listed but did not open; on the defaults again", exc_info=True)
            self._recovering, self._next_recover = True, 0.0
            return
        self._source, self._fell_back, self._kept, self._zero_run = source, False, set(), 0
        self.device_returned.emit(source.description)

    def _stop(self, reason: str, budget_s: float | None = None) -> None:
        """End the session: feed what the input still holds (for ``budget_s`` seconds at most; None: all of it),
        ``finish()``, emit the last captions and ``session_finished``."""
        source, session = self._source, self._session
        events: list[CaptionEvent] = []
        failed = False
        if source is not None:
            source.close()
            if not self._recovering:
                left = self._drain(source, budget_s)
                if left >= 0.5:
                    self.notice.emit(
                        f"The last {left:.0f} s of audio were not transcribed: quitting does not wait for a model "
                        "slower than real time."
                    )
        if self._session is None:  # _feed failed and already ended the session
            return
        try:
            tail = self._resampler.flush()
            self._record(tail)
            if len(tail):
                events += session.feed(tail)
            events += session.finish()
        except Exception as exc:
            log.error("session.finish failed", exc_info=True)
            self.error.emit(user_message(exc, "The end of the session could not be transcribed"))
            failed = True
        self._emit_events(events)
        self._emit_stats()
        self._end("error" if failed else reason)

    def _drain(self, source: Any, budget_s: float | None) -> float:
        """Feed what ``source`` still holds, for ``budget_s`` seconds at most (None: all of it); returns the seconds
        of audio left untranscribed (dropped)."""
        if budget_s is None:
            self._feed(source.read())
            return 0.0
        until = time.monotonic() + budget_s
        while time.monotonic() < until:
            blocks = source.read(MAX_SECONDS_PER_TICK)
            if not blocks or not self._feed(blocks):
                return 0.0
        return sum(len(block.samples) / block.rate for block in source.read())

    def _fail(self, message: str) -> None:
        self.error.emit(message)
        if self._source is not None:
            self._source.close()
        self._end("error")

    def _record(self, pcm: np.ndarray) -> None:
        recorder = self._recorder
        if recorder is not None and recorder.failed is None:
            recorder.write(pcm)
            if recorder.failed is not None:
                self.notice.emit(recorder.failed)

    def _end(self, reason: str) -> None:
        if self._stall_watch is not None:
            self._stall_watch.close()
            self._stall_watch = None
        if self._recorder is not None:
            self._recorder.close()  # compresses to FLAC before the session counts as ended
            self._recorder = None
        self._session = self._source = None
        self._resampler.reset()
        if self._timer is not None:
            self._timer.stop()
        self._set_state("idle")
        self.session_finished.emit(reason)


def _named(source: Any) -> str:
    """``source`` as the user knows it, e.g. 'The output \u201cVirtual Headphones\u201d' (its name without the rate)."""
    what = {"microphone": "The microphone", "system": "The output"}.get(getattr(source, "kind", ""), "The audio input")
    return f"{what} \u201c{getattr(source, 'name', '') or source.description}\u201d"
