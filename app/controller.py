"""The GUI-thread side of a captioning session: drives the engine worker, keeps the transcript.

``SessionController`` lives on the GUI thread. It starts the worker's QThread, talks to the worker only
through queued signals (``request_*``), and turns the worker's replies into what the windows need:
committed lines (kept in ``lines``, journaled to disk and to the optional live SRT file as they
arrive), the latest partial, health numbers, and one-sentence messages.

Every session is kept in the session store (``app.session_store``): its journal is created when the
session is asked for, optionally with its audio, closed with an end record when it ends (also on quit),
and retention (``set_retention``) runs at start-up and after each session.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from PySide6.QtCore import QCoreApplication, QEventLoop, QObject, QThread, QTimer, Signal, Slot

from app import journal as journal_mod
from app import session_audio
from app.session_store import Retention, SessionStore, made_with
from app.worker import EngineWorker, ModelInfo, ModelLoader, SessionSpec, Stats, default_loader
from engine.events import CaptionEvent, Line

log = logging.getLogger(__name__)

LOAD_WAIT_MS = 1000  # on quit, how long a model load (which cannot be interrupted) is given to end by itself
LOADING = "Loading the model"  # the status bar's words while a model loads (taken back when it fails)


class SessionController(QObject):
    """Owns the engine worker thread and the current transcript. GUI thread only.

    States (``state``): "no-model", "loading", "idle", "running", "paused".
    """

    # to the worker (queued: the worker lives on its own thread)
    request_load = Signal(str, str, int)
    request_start = Signal(object)
    request_pause = Signal()
    request_resume = Signal()
    request_stop = Signal()
    request_shutdown = Signal()

    # to the windows
    state_changed = Signal(str)
    model_changed = Signal(object)  # ModelInfo | None
    lines_reset = Signal()  # the transcript was replaced (new or recovered session): views show ``lines``
    line_committed = Signal(object)  # Line
    partial_changed = Signal(object)  # CaptionEvent | None: the current partial state
    stats_changed = Signal(object)  # Stats
    input_changed = Signal(str)  # description of the audio input
    message = Signal(str, str)  # level ("info" | "warning" | "error"), one sentence
    model_failed = Signal(str, int)  # one sentence, exit code
    session_failed = Signal(str, int)
    session_finished = Signal(str)  # "stopped" | "input ended" | "error"
    silence_hint = Signal()
    live_srt_stopped = Signal()  # the live SRT file could not be written and is off now (message says why)
    device_lost = Signal(str)
    device_recovered = Signal(str)
    device_returned = Signal(str)  # back on the chosen devices after a fallback: the input's description
    input_waiting = Signal()  # after a loss nothing can be captured until an input comes back (see ``waiting``)
    server_waiting = Signal(bool)  # the sound server stopped answering (True) / answers again (see ``waiting``)
    session_saved = Signal(str)  # a session ended and is in the store: its id

    def __init__(
        self,
        *,
        loader: ModelLoader = default_loader,
        sounddevice: Any = None,
        journal_dir: str | Path | None = None,
        audio: Any = None,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.lines: list[Line] = []
        self.model: ModelInfo | None = None
        self.input_description = ""
        self.state = "no-model"
        self.last_stats: Stats | None = None
        self._recovered_audio_s: float | None = None  # a recovered transcript's length (it has no stats)
        self._journal_dir = Path(journal_dir) if journal_dir is not None else None
        self.store = SessionStore(self._journal_dir) if self._journal_dir is not None else None
        self.retention = Retention()
        self.keep_audio = False  # keep each session's audio (for "Re-transcribe with...")
        self.session_id: str | None = None  # the session in progress (its id in the store)
        self.last_session_id: str | None = None
        self._journal: journal_mod.Journal | None = None
        self.session_kept = False  # the current (or last) session's journal is whole on disk (or is being written)
        self._session_started = False
        self.starting = False  # a start was asked for and the worker has not answered yet (start or fail)
        self._before: tuple[list[Line], Stats | None, str | None, float | None] | None = None
        self._live_srt_path: str | None = None
        self._live_srt: Any = None
        self._elapsed = 0.0
        self._resumed_at: float | None = None
        self._clock_stopped = False  # Pause or Stop was clicked: the clock stands until the worker runs again
        self._replay = False
        self.waiting = False  # running, but the input was lost and none can be opened now (``input_waiting``)
        self._partial: CaptionEvent | None = None
        self._lost_text = ""
        self._keep_backup = False
        self._loading = 0  # model loads asked of the worker and not yet answered

        if self.store is not None:
            self.store.repair()

        self._thread = QThread()
        self._thread.setObjectName("engine-worker")
        self._worker = EngineWorker(loader, sounddevice, audio)  # audio: app.sources.AudioSystem or None
        self._worker.moveToThread(self._thread)
        w = self._worker
        self.request_load.connect(w.load_model)
        self.request_start.connect(w.start)
        self.request_pause.connect(w.pause)
        self.request_resume.connect(w.resume)
        self.request_stop.connect(w.stop)
        self.request_shutdown.connect(w.shutdown)
        w.model_loaded.connect(self._on_model_loaded)
        w.model_failed.connect(self._on_model_failed)
        w.state_changed.connect(self._on_worker_state)
        w.session_started.connect(self._on_session_started)
        w.session_failed.connect(self._on_session_failed)
        w.captions.connect(self._on_captions)
        w.stats.connect(self._on_stats)
        w.device_lost.connect(self._on_device_lost)
        w.device_recovered.connect(self._on_device_recovered)
        w.device_returned.connect(self._on_device_returned)
        w.input_moved.connect(self._on_input_moved)
        w.input_waiting.connect(self._on_input_waiting)
        w.server_waiting.connect(self._on_server_waiting)
        w.notice.connect(lambda text: self.message.emit("warning", text))
        w.silence_hint.connect(self._on_silence_hint)
        w.error.connect(lambda text: self.message.emit("error", text))
        w.session_finished.connect(self._on_session_finished)
        w.shut_down.connect(self._thread.quit)
        self._thread.start()

    # -- commands (GUI thread) -------------------------------------------------------------------
    @property
    def worker(self) -> EngineWorker:
        """The worker object (lives on the worker thread; do not call its methods directly)."""
        return self._worker

    @property
    def worker_thread(self) -> QThread:
        return self._thread

    def load_model(self, source: str, backend: str = "auto", bits: int = 0) -> None:
        """Load a model on the worker thread (float weights converted to ``bits``, 0: as stored);
        ``model_changed`` or ``model_failed`` follows. Not during a session (nor while one starts): ignored then,
        a model changes only between sessions."""
        if self.state in ("running", "paused") or self.starting:
            log.warning("model load asked during a session, ignored: %s", source)
            return
        self.model = None
        self._set_state("loading")
        self._loading += 1
        self.message.emit("info", f"{LOADING} {Path(source).name or source}\u2026")
        self.request_load.emit(source, backend, bits)

    def start(self, spec: SessionSpec) -> None:
        """Start a new session. The previous one stays in the store; the views start empty."""
        if self.state != "idle" or self.starting:  # a second Start before the worker answered the first
            return
        before = (self.lines, self.last_stats, self.session_id, self._recovered_audio_s)
        self._before = before  # shown again if this start fails
        self._recovered_audio_s = None
        spec = self._open_session(spec)
        self.lines = []
        self._partial = None
        self._elapsed = 0.0
        self._resumed_at, self._clock_stopped = None, False
        self._replay = spec.input_file is not None
        self.last_stats = None
        self.starting = True  # before the views hear of the empty transcript: they say "starting", not "idle"
        self.lines_reset.emit()
        self.partial_changed.emit(None)
        self.request_start.emit(spec)

    def pause(self) -> None:
        """Stop capturing, keep the session. The clock stops now: capture does, though the worker may still be
        transcribing what it captured (a model slower than real time: seconds) before it says "paused"."""
        if self.state == "running":
            self._hold_clock(time.monotonic())
            self._clock_stopped = True
            self.request_pause.emit()

    def resume(self) -> None:
        if self.state == "paused":
            self.request_resume.emit()

    def stop(self) -> None:
        """End the session (its last words are still transcribed; the clock stops now, as for ``pause``)."""
        if self.state in ("running", "paused"):
            self._hold_clock(time.monotonic())
            self._clock_stopped = True
            self.request_stop.emit()

    def elapsed(self) -> float:
        """Seconds the current session has been capturing (pauses excluded); in a replay, the position in the
        file (audio fed plus audio due), which the captions' times count, at any replay speed."""
        stats = self.last_stats
        if self._replay and stats is not None:
            return stats.audio_s + stats.backlog_s
        running = time.monotonic() - self._resumed_at if self._resumed_at is not None else 0.0
        return self._elapsed + running

    def set_live_srt(self, path: str | None) -> None:
        """Keep an SRT file growing at ``path`` during sessions (``None``: off). A new session rewrites it."""
        self._close_live_srt()
        self._live_srt_path = path or None
        if path and self.state in ("running", "paused"):
            self._open_live_srt(self.lines)

    @property
    def live_srt_path(self) -> str | None:
        return self._live_srt_path

    def set_retention(self, policy: Retention) -> list[str]:
        """Keep sessions by ``policy`` from now on, and apply it now; returns the deleted ids."""
        self.retention = policy
        return self._apply_retention()

    def pending_recovery(self) -> journal_mod.RecoveredSession | None:
        """The last session that did not end cleanly, if its journal holds any lines."""
        if self._journal_dir is None:
            return None
        try:
            return journal_mod.find_unfinished(self._journal_dir, [self.session_id] if self.session_id else [])
        except OSError:
            return None

    def recover(self, recovered: journal_mod.RecoveredSession) -> None:
        """Show a recovered session's lines as the current transcript (for reading and export)."""
        if self.state in ("running", "paused"):
            return
        self._recovered_audio_s = self._mark_handled(recovered, "recovered")
        self.last_stats = None  # the last session's: its length was taken for the recovered one's (exports cut to it)
        self.last_session_id = recovered.path.stem
        self.lines = list(recovered.lines)
        self._partial = None
        self.lines_reset.emit()  # the views read ``lines``
        self.partial_changed.emit(None)

    def discard_recovery(self, recovered: journal_mod.RecoveredSession) -> None:
        """Do not offer ``recovered`` again (it stays in the store, like every session)."""
        self._mark_handled(recovered, "discarded")

    def _mark_handled(self, recovered: journal_mod.RecoveredSession, reason: str) -> float | None:
        """End ``recovered``'s journal and compress its kept audio; the session's length is that audio's, which
        runs past its last line (the Sessions list and exports showed the last line's end). Returns that length
        (None: no audio was kept)."""
        audio_s = None
        if self.store is not None:
            session_id = recovered.path.stem
            self.store.finish_audio(session_id)
            kept = self.store.audio_file(session_id)
            if kept is not None:
                last = max((line.end for line in recovered.lines), default=0.0)
                audio_s = max(session_audio.audio_seconds(kept), last) or None
        self._marked(journal_mod.mark_finished(recovered.path, reason, audio_s))
        return audio_s

    def _marked(self, problem: str | None) -> None:
        if problem:  # a read-only sessions folder: Recover or Discard seemed to work, and it came back every start
            self.message.emit(
                "warning", f"The session could not be marked as handled ({problem}); it is offered again next time."
            )

    def shutdown(self, timeout_ms: int = 15000, load_wait_ms: int = LOAD_WAIT_MS) -> bool:
        """End the session cleanly (its last lines are journaled), drop the model, stop the thread. Returns
        whether the worker thread has stopped.

        A session in progress is waited for (up to ``timeout_ms``, twice): the worker feeds what was captured and
        its last lines are committed. A model load cannot be interrupted (library code: a hub download inside
        ``load_model``, quantizing), so while one runs and no session is in progress this waits ``load_wait_ms``
        at most and leaves the thread running (False): the process must then end without destroying the running
        thread, which aborts it (``app.main`` ends it with ``os._exit``)."""
        if not self._thread.isRunning():
            return True
        loop = QEventLoop()
        stopped: list[bool] = []
        started = time.monotonic()

        def check() -> None:
            waited_ms = (time.monotonic() - started) * 1000
            if waited_ms >= timeout_ms or (self._only_loading() and waited_ms >= load_wait_ms):
                loop.quit()

        mark = lambda: stopped.append(True)  # noqa: E731 - may run on the worker's thread: a list append only
        self._worker.shut_down.connect(mark)
        self._worker.shut_down.connect(loop.quit)  # a slot of the GUI thread's loop: queued, as the reply comes
        poll = QTimer()
        poll.setInterval(20)
        poll.timeout.connect(check)
        poll.start()
        self.request_shutdown.emit()
        loop.exec()
        poll.stop()
        self._worker.shut_down.disconnect(mark)
        self._worker.shut_down.disconnect(loop.quit)
        self._thread.quit()
        if not stopped and self._only_loading():
            log.info("quitting while a model loads: not waiting for the load, which cannot be interrupted")
            done = False
        else:
            done = self._thread.wait(timeout_ms)
            if not done:
                log.error("the engine worker did not stop within %d ms", timeout_ms)
        if done:  # its last replies (captions, stats, the session's end, shut_down) may wait in this thread's
            QCoreApplication.sendPostedEvents()  # queue: deliver them, so the journal gets them before it closes
        if not stopped and self._journal is not None:  # the session was not ended (still feeding its backlog, or the
            self._journal = None  # thread left with the request unread): no end record, so the next start offers
        self._close_session_files()  # the lines journaled so far for recovery instead of a session cut short
        return done

    def _only_loading(self) -> bool:
        """Whether the worker is loading a model with no session in progress (nothing to wait for)."""
        return self._loading > 0 and self.session_id is None and self._journal is None

    # -- worker replies (GUI thread) ------------------------------------------------------------
    def _set_state(self, state: str) -> None:
        if state != self.state:
            self.state = state
            self.state_changed.emit(state)

    @Slot(object)
    def _on_model_loaded(self, info: ModelInfo) -> None:
        self._loading = max(self._loading - 1, 0)
        self.model = info
        self._set_state("idle")
        self.model_changed.emit(info)
        weights = f", {info.bits}-bit weights" if info.bits else ""
        self.message.emit("info", f"Model {info.name} is ready ({info.backend}{weights}).")

    @Slot(str, int)
    def _on_model_failed(self, text: str, code: int) -> None:
        self._loading = max(self._loading - 1, 0)
        self.model = None
        self.model_changed.emit(None)
        self._set_state("no-model")
        self.message.emit("error", text)
        self.model_failed.emit(text, code)

    @Slot(str)
    def _on_worker_state(self, state: str) -> None:
        now = time.monotonic()
        if state != "running":
            self.waiting = False
        if state == "running":
            self._resumed_at, self._clock_stopped = now, False
        else:
            self._hold_clock(now)
        if state == "idle":
            state = "idle" if self.model is not None else "no-model"
        self._set_state(state)

    @Slot(str)
    def _on_session_started(self, description: str) -> None:
        self._set_input(description)
        self._session_started, self._before, self.starting = True, None, False
        if self._live_srt_path:
            self._open_live_srt([])

    @Slot(str, int)
    def _on_session_failed(self, text: str, code: int) -> None:
        self.starting = False
        if not self._session_started and self._journal is not None and self.store is not None:
            self.store.discard(self._journal)  # nothing was captured: nothing to keep
            self._journal = None
            self.session_id = None
        if not self._session_started and self._before is not None:  # the last transcript comes back to the views
            self.lines, self.last_stats, self.session_id, self._recovered_audio_s = self._before
            self._before = None
            self.lines_reset.emit()
        self.message.emit("error", text)
        self.session_failed.emit(text, code)

    @Slot(object)
    def _on_captions(self, events: Sequence[CaptionEvent]) -> None:
        for event in events:
            for line in event.committed:
                self._commit(line)
            self._partial = event if event.partial is not None else None
        self.partial_changed.emit(self._partial)

    @Slot(object)
    def _on_stats(self, stats: Stats) -> None:
        self.last_stats = stats
        self.stats_changed.emit(stats)

    @Slot(str)
    def _on_device_lost(self, text: str) -> None:
        self._lost_text = text
        self.message.emit("warning", text + " Switching to the default device\u2026")
        self.device_lost.emit(text)

    def _hold_clock(self, now: float) -> None:
        """Stop the session clock (``elapsed``) at ``now``, keeping what it counted; nothing when it is stopped."""
        if self._resumed_at is not None:
            self._elapsed += now - self._resumed_at
            self._resumed_at = None

    def _input_back(self, now: float) -> None:
        """Audio comes again after a wait (``waiting``): the clock runs from ``now``, unless Pause or Stop was
        clicked meanwhile (it stands until the worker runs again)."""
        if self.waiting and self.state == "running" and not self._clock_stopped:
            self._resumed_at = now

    @Slot()
    def _on_input_waiting(self) -> None:
        self.waiting = True
        self._hold_clock(time.monotonic())  # the clock counts time captured: none while waiting
        self.message.emit(
            "warning", f"{self._lost_text} No other input is available; captioning goes on when one is connected."
        )
        self.input_waiting.emit()

    @Slot(bool)
    def _on_server_waiting(self, waiting: bool) -> None:
        """The sound server stopped answering, or answers again: nothing is captured meanwhile (the clock counts
        time captured); the worker's notice says so."""
        now = time.monotonic()
        if waiting:
            self._hold_clock(now)
        else:
            self._input_back(now)
        self.waiting = waiting
        self.server_waiting.emit(waiting)

    @Slot(str)
    def _on_device_recovered(self, description: str) -> None:
        self._input_back(time.monotonic())
        self.waiting = False
        self._set_input(description)
        lost = self._lost_text
        self.message.emit("warning", f"{lost} Now capturing from {description}; the transcript continues.".strip())
        self.device_recovered.emit(description)

    @Slot(str)
    def _on_device_returned(self, description: str) -> None:
        self._set_input(description)
        self.message.emit("warning", f"Back on {description}; the transcript continues.")  # in the loss's place
        self.device_returned.emit(description)

    @Slot(str)
    def _on_input_moved(self, description: str) -> None:
        """The input followed a change by itself (a new default output): the status bar and the journal name the
        new one (they kept the first)."""
        if description and description != self.input_description:
            self._set_input(description)

    def _set_input(self, description: str) -> None:
        """The input is ``description`` now: for the status bar (``input_changed``) and the journal."""
        self.input_description = description
        self.input_changed.emit(description)
        if self._journal is not None:
            self._journal.set_input(description)

    @Slot()
    def _on_silence_hint(self) -> None:
        self.message.emit(
            "warning",
            "The microphone delivers pure silence; check that livecap may use it (system privacy settings) "
            "and that it is not muted.",
        )
        self.silence_hint.emit()

    def keep_session_backup(self) -> None:
        """Called from a ``session_finished`` handler: leave this session's journal unfinished (every line
        in it is already on disk), so that the next start offers the lines for recovery. For a final save
        of the transcript that failed."""
        self._keep_backup = True

    @Slot(str)
    def _on_session_finished(self, reason: str) -> None:
        if self._partial is not None:
            self._partial = None
            self.partial_changed.emit(None)
        self._keep_backup = False
        self.session_finished.emit(reason)  # handlers run now (direct connections) and may keep the backup
        if self._keep_backup:
            self._journal = None  # dropped without its end record: still "unfinished" on disk
        self._close_session_files()

    # -- files ------------------------------------------------------------------------------------
    def _open_session(self, spec: SessionSpec) -> SessionSpec:
        """Create the session's journal (and recording path); returns ``spec`` with the audio path."""
        self._session_started = False
        self.session_kept = False
        if self.store is None:
            return spec
        kinds = {"mic": "microphone", "system": "system audio", "both": "microphone + system audio"}
        info: dict[str, Any] = {"source": "file" if spec.input_file else kinds.get(spec.source, spec.source)}
        if self.model is not None:
            info |= {"model": self.model.source, "family": self.model.family, "backend": self.model.backend}
            info |= made_with(self.model.bits, spec.options)
        if spec.input_file:
            info["input"] = Path(spec.input_file).name
        info["audio"] = self.keep_audio
        journal = self.store.create(info)
        if journal.failed:
            self.message.emit("warning", journal.failed)
            return spec
        self._journal = journal
        self.session_kept = True
        self.session_id = journal.session_id
        if self.keep_audio:
            try:
                spec = dataclasses.replace(spec, audio_path=str(self.store.recording_path(journal.session_id)))
            except OSError as exc:
                self.message.emit("warning", f"The session audio cannot be kept ({exc.strerror or exc}).")
        return spec

    def _apply_retention(self, just_finished: str | None = None) -> list[str]:
        if self.store is None:
            return []
        protect = [i for i in (self.session_id, just_finished) if i]
        try:
            return self.store.apply_retention(self.retention, protect)
        except Exception:  # retention must never stop the app
            log.warning("retention failed", exc_info=True)
            return []

    def _commit(self, line: Line) -> None:
        self.lines.append(line)
        if self._journal is not None:
            restored = self._journal.restored
            self._journal.add(line)
            if self._journal.failed:
                self.message.emit("warning", self._journal.failed)
                self._journal, self.session_kept = None, False
            elif self._journal.restored > restored:
                self.message.emit(
                    "warning", "The session\u2019s file was deleted while it was recorded; livecap wrote it again."
                )
        if self._live_srt is not None:
            try:
                restored = self._live_srt.restored
                self._live_srt.add(line)
                if self._live_srt.restored > restored:
                    self.message.emit(
                        "warning", "The live SRT file was deleted while captioning; livecap wrote it again."
                    )
            except Exception as exc:  # a failing live file must not stop captioning
                self._live_srt_failed(exc)
        self.line_committed.emit(line)

    def _open_live_srt(self, lines: Sequence[Line]) -> None:
        try:
            from engine.transcript import LiveSrtWriter

            self._live_srt = LiveSrtWriter(Path(self._live_srt_path or ""))
            self._live_srt.extend(lines)  # one write (an add each rewrote the file 5000 times: 5.6 s)
        except Exception as exc:
            self._live_srt_failed(exc)

    def _live_srt_failed(self, exc: Exception) -> None:
        from engine.errors import user_message

        log.warning("live SRT failed", exc_info=True)
        self._live_srt, self._live_srt_path = None, None
        text = user_message(exc, "The live SRT file could not be written").rstrip(".")
        self.message.emit("error", f"{text}; the live SRT file is off (File \u25b8 Live SRT file turns it on again).")
        self.live_srt_stopped.emit()

    @property
    def audio_seconds(self) -> float | None:
        """Seconds of audio the current (or last) session was fed, as the worker last said; ``None`` when
        unknown (no session yet, or recovered lines whose audio was not kept). No transcript time passes it."""
        return self.last_stats.audio_s if self.last_stats is not None else self._recovered_audio_s

    def _close_live_srt(self, audio_end: float | None = None) -> None:
        writer, self._live_srt = self._live_srt, None
        if writer is not None:
            try:
                writer.close(audio_end)  # the last cue ends by the end of the audio
            except Exception:
                log.warning("closing the live SRT failed", exc_info=True)

    def _close_session_files(self) -> None:
        audio_s = self.audio_seconds
        if self._journal is not None:
            self._journal.close(**({"audio_s": round(audio_s, 3)} if audio_s is not None else {}))
            if self._journal.failed:  # its end (or the file, written again) could not be written
                self.message.emit("warning", self._journal.failed)
                self.session_kept = False
            self._journal = None
        self._close_live_srt(audio_s)
        finished, self.session_id = self.session_id, None
        if finished is not None:
            self.last_session_id = finished
            self._apply_retention(finished)  # never the session just recorded, whatever the clock says
            self.session_saved.emit(finished)
