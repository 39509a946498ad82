"""The Sessions window: every kept session listed, searched, opened, exported, renamed, deleted and
re-transcribed. GUI thread only; the files are the store's (``app.session_store``).

Left: a search across all sessions and the list (date or title, duration, source, model, lines, first
words), with the retention and "keep audio" settings below. Right: the open session with its versions,
its lines (``HistoryPane``: search and copy) and the actions. "Re-transcribe with" runs
``livecap --retranscribe`` in a child process (``QProcess``): the model loads and runs outside the GUI
and the engine worker, its progress comes back as JSON lines, and Cancel kills it (nothing is stored
then: a version is written only when complete).
"""

from __future__ import annotations

import html
import json
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from PySide6.QtCore import QEvent, QObject, QProcess, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QCloseEvent, QKeyEvent, QKeySequence
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QInputDialog,
    QLabel,
    QLineEdit,
    QMenu,
    QProgressBar,
    QPushButton,
    QSplitter,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app import placement, questions
from app.export_dialog import ExportDialog
from app.history import HistoryPane
from app.paths import documents_dir
from app.session_store import BUSY, Retention, SessionNotFound, SessionStore, SessionSummary
from app.settings import Key, Settings
from app.worker import model_name
from engine.errors import LivecapError

log = logging.getLogger(__name__)

ID_ROLE = Qt.ItemDataRole.UserRole
RETENTION_CHOICES: tuple[tuple[str, str], ...] = (
    ("all", "All sessions"),
    ("days:7", "The last 7 days"),
    ("days:30", "The last 30 days"),
    ("days:90", "The last 90 days"),
    ("days:365", "The last year"),
    ("sessions:10", "The last 10 sessions"),
    ("sessions:50", "The last 50 sessions"),
    ("sessions:200", "The last 200 sessions"),
)
COLUMNS = ("Session", "Duration", "Source", "Model", "Lines", "First words")
GONE = "That session is no longer there."
ALREADY = "That session is being re-transcribed already; wait until that has finished."


def apply_session_settings(controller: Any, settings: Settings) -> None:
    """Give the controller the saved retention and keep-audio choices (retention runs now)."""
    controller.keep_audio = bool(settings.value(Key.SESSIONS_KEEP_AUDIO))
    controller.set_retention(Retention.parse(settings.value(Key.SESSIONS_RETENTION)))


def duration_text(seconds: float) -> str:
    """``1:02:03`` or ``2:03`` for a duration."""
    total = max(int(round(seconds)), 0)
    h, rest = divmod(total, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def retranscribe_command(
    store: SessionStore, session_id: str, source: str, backend: str, extra: Sequence[str] = (), weights: str = "stored"
) -> tuple[str, list[str]]:
    """The program and arguments of the child process that re-transcribes ``session_id`` (with the model's
    ``weights``, a ``Key.WEIGHTS`` value: as the app runs it)."""
    args = [
        "--retranscribe",
        session_id,
        "--model",
        source,
        "--backend",
        backend,
        "--sessions-dir",
        str(store.folder),
        *(["--weights", weights] if weights != "stored" else []),
        *extra,
    ]
    if getattr(sys, "frozen", False):  # the bundled app: its executable is livecap itself
        return sys.executable, args
    return sys.executable, ["-m", "app.main", *args]


class SessionsWindow(QWidget):
    """The sessions library. ``controller`` (optional) tells which session is in progress and when one
    was saved; ``child_args`` are extra arguments for the re-transcription process (tests pass
    ``--engine-factory``)."""

    retranscribed = Signal(str, int)  # session id, new version
    retranscribe_failed = Signal(str)  # one sentence

    def __init__(
        self,
        store: SessionStore,
        settings: Settings,
        controller: Any = None,
        *,
        child_args: Sequence[str] = (),
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent, Qt.WindowType.Window)
        self.setObjectName("sessionsWindow")
        self.setWindowTitle("Sessions \u2014 livecap")
        self.store = store
        self.settings = settings
        self.controller = controller
        self.child_args = list(child_args)
        self.process: QProcess | None = None
        self._process_session: str | None = None
        self._process_out = b""
        self._process_warning = ""  # a {"warning"} row of the child, shown when it has finished
        self._process_version: int | None = None  # the version the child stored (its last row)
        self._hits: dict[str, int] = {}
        self._shown: str | None = None  # the session the right side shows
        self._chosen_version: int | None = None  # the version of it the user chose (None: the latest)
        self._build()
        if not placement.restore(self, settings.value(Key.SESSIONS_GEOMETRY)):
            placement.fit(self, 1100, 620)
        if controller is not None:
            controller.session_saved.connect(lambda _id: self.refresh())
            controller.state_changed.connect(lambda _state: self._update_actions())
            controller.line_committed.connect(self._on_live_line)
        self.refresh()

    # -- construction ----------------------------------------------------------------------------
    def _build(self) -> None:
        self.search = QLineEdit(self)
        self.search.setObjectName("sessionsSearch")
        self.search.setPlaceholderText("Search all sessions")
        self.search.setClearButtonEnabled(True)
        self.search.setAccessibleName("Search all sessions")
        self.search.textChanged.connect(lambda _text: self.refresh(reopen=False))
        # A search reads every line of every session: while the box has focus and nothing is typed yet, the store
        # reads them a session per event-loop turn (a year of hour-long sessions took ~1.3 s in the first keystroke)
        self._to_warm: list[str] = []
        self._warm_timer = QTimer(self)
        self._warm_timer.setInterval(0)
        self._warm_timer.timeout.connect(self._warm_one)
        self.search.installEventFilter(self)
        self.count_label = QLabel(self)
        self.count_label.setObjectName("sessionsCount")
        self.table = QTreeWidget(self)
        self.table.setObjectName("sessionsList")
        self.table.setAccessibleName("Sessions")
        self.table.setHeaderLabels(list(COLUMNS))
        self.table.setRootIsDecorated(False)
        self.table.setUniformRowHeights(True)
        self.table.setAlternatingRowColors(True)
        # Shift/Ctrl+click select several sessions for Delete; the current row is the one shown
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.table.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.table.setTextElideMode(Qt.TextElideMode.ElideRight)
        header = self.table.header()
        header.setStretchLastSection(True)
        for col in range(len(COLUMNS) - 1):
            header.setSectionResizeMode(col, QHeaderView.ResizeMode.ResizeToContents)
        for col, width in ((0, 150), (3, 170)):  # titles and model names can be long: elided, resizable
            header.setSectionResizeMode(col, QHeaderView.ResizeMode.Interactive)
            header.resizeSection(col, width)
        self.table.currentItemChanged.connect(lambda *_: self._open_current())
        self.table.itemSelectionChanged.connect(self._update_actions)

        self.retention_combo = QComboBox(self)
        self.retention_combo.setObjectName("sessionsRetention")
        self.retention_combo.setAccessibleName("Keep sessions")
        current = str(Retention.parse(self.settings.value(Key.SESSIONS_RETENTION)))
        for key, label in RETENTION_CHOICES:
            self.retention_combo.addItem(label, key)
        if self.retention_combo.findData(current) < 0:
            self.retention_combo.addItem(current, current)
        self.retention_combo.setCurrentIndex(self.retention_combo.findData(current))
        self.retention_combo.activated.connect(lambda _i: self.set_retention(self.retention_combo.currentData()))
        self.keep_audio_box = QCheckBox("Keep audio (to re-transcribe later)", self)
        self.keep_audio_box.setObjectName("sessionsKeepAudio")
        self.keep_audio_box.setToolTip(
            "Keep each new session's audio as FLAC (about 30 MB an hour), so it can be transcribed again "
            "with another model"
        )
        self.keep_audio_box.setChecked(bool(self.settings.value(Key.SESSIONS_KEEP_AUDIO)))
        self.keep_audio_box.toggled.connect(self.set_keep_audio)

        left = QWidget(self)
        lv = QVBoxLayout(left)
        lv.setContentsMargins(8, 8, 4, 8)
        top = QHBoxLayout()
        top.addWidget(self.search, 1)
        top.addWidget(self.count_label)
        lv.addLayout(top)
        lv.addWidget(self.table, 1)
        bottom = QHBoxLayout()
        keep_label = QLabel("Keep:", self)
        keep_label.setBuddy(self.retention_combo)
        bottom.addWidget(keep_label)
        bottom.addWidget(self.retention_combo)
        bottom.addSpacing(12)
        bottom.addWidget(self.keep_audio_box)
        bottom.addStretch(1)
        lv.addLayout(bottom)

        self.title_label = QLabel(self)
        self.title_label.setObjectName("sessionTitle")
        font = self.title_label.font()
        font.setPointSizeF(font.pointSizeF() * 1.25)
        font.setBold(True)
        self.title_label.setFont(font)
        self.title_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.title_label.setTextFormat(Qt.TextFormat.PlainText)  # a title is the user's text, never markup
        self.details_label = QLabel(self)
        self.details_label.setObjectName("sessionDetails")
        self.details_label.setWordWrap(True)
        self.details_label.setTextFormat(Qt.TextFormat.PlainText)
        self.version_combo = QComboBox(self)
        self.version_combo.setObjectName("sessionVersion")
        self.version_combo.setAccessibleName("Version")
        self.version_combo.activated.connect(lambda _i: self._version_chosen())
        self.history = HistoryPane(self)
        self.history.search.setPlaceholderText("Search this session")

        self.export_button = QPushButton("Export\u2026", self)
        self.export_button.clicked.connect(self.export_dialog)
        self.rename_button = QPushButton("Rename\u2026", self)
        self.rename_button.clicked.connect(self._rename_clicked)
        self.delete_button = QPushButton("Delete", self)
        self.delete_button.clicked.connect(self._delete_clicked)
        # a push button with a menu, as its neighbours: a tool button drew its menu arrow over the label's end
        self.retranscribe_button = QPushButton("Re-transcribe with\u2026", self)
        self.retranscribe_button.setToolTip("Transcribe the kept audio again with another model, as a new version")
        self.retranscribe_menu = QMenu(self.retranscribe_button)
        self.retranscribe_menu.aboutToShow.connect(self._fill_retranscribe_menu)
        self.retranscribe_button.setMenu(self.retranscribe_menu)
        self.progress = QProgressBar(self)
        self.progress.setObjectName("retranscribeProgress")
        self.progress.setRange(0, 1000)
        self.progress.setTextVisible(True)
        self.progress.hide()
        self.cancel_button = QPushButton("Cancel", self)
        self.cancel_button.clicked.connect(self.cancel_retranscribe)
        self.cancel_button.hide()
        self.error_label = QLabel(self)
        self.error_label.setObjectName("sessionsError")
        self.error_label.setWordWrap(True)
        self.error_label.setTextFormat(Qt.TextFormat.PlainText)
        self.error_label.setProperty("role", "error")  # coloured by the theme's style sheet (QLabel[role="error"])
        self.error_label.hide()

        right = QWidget(self)
        rv = QVBoxLayout(right)
        rv.setContentsMargins(4, 8, 8, 8)
        rv.addWidget(self.title_label)
        rv.addWidget(self.details_label)
        versions = QHBoxLayout()
        version_label = QLabel("Version:", self)
        version_label.setBuddy(self.version_combo)
        versions.addWidget(version_label)
        versions.addWidget(self.version_combo, 1)
        rv.addLayout(versions)
        rv.addWidget(self.history, 1)
        actions = QHBoxLayout()
        for widget in (self.export_button, self.rename_button, self.delete_button, self.retranscribe_button):
            actions.addWidget(widget)
        actions.addStretch(1)
        rv.addLayout(actions)
        busy = QHBoxLayout()
        busy.addWidget(self.progress, 1)
        busy.addWidget(self.cancel_button)
        rv.addLayout(busy)
        rv.addWidget(self.error_label)

        self.splitter = QSplitter(Qt.Orientation.Horizontal, self)
        self.splitter.addWidget(left)
        self.splitter.addWidget(right)
        self.splitter.setStretchFactor(0, 3)
        self.splitter.setStretchFactor(1, 2)
        self.splitter.setChildrenCollapsible(False)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.splitter)

        find = QAction("Search all sessions", self)
        find.setShortcut(QKeySequence.StandardKey.Find)
        find.triggered.connect(lambda: (self.search.setFocus(), self.search.selectAll()))
        self.addAction(find)
        close = QAction("Close", self)  # a window of its own: Esc or Ctrl+W closes it (neither did; keyboard QA)
        keys = {
            QKeySequence("Ctrl+W"),
            QKeySequence(Qt.Key.Key_Escape),
            *QKeySequence.keyBindings(QKeySequence.StandardKey.Close),
        }
        close.setShortcuts(sorted(keys, key=lambda k: k.toString()))
        close.triggered.connect(self.close)
        self.addAction(close)
        self.table.installEventFilter(self)  # the list's Delete key deletes the selected sessions (after a question)

    # -- public ------------------------------------------------------------------------------------
    def refresh(self, reopen: bool = True) -> None:
        """Re-read the store; keeps the open session open when it still exists (shown again unless ``reopen``
        is False: a search keystroke only moves its highlights)."""
        keep = self.current_id()
        needle = self.search.text().strip()
        self._hits = self.store.search(needle) if needle else {}
        summaries = [s for s in self.store.list() if not needle or s.id in self._hits]
        self.table.blockSignals(True)
        self.table.setCurrentItem(None)  # else clear() moves the current row once per row it removes: 9 s for 1200
        self.table.clear()
        recording = self._recording_id()
        for s in summaries:
            item = QTreeWidgetItem(self._row(s, recording))
            item.setData(0, ID_ROLE, s.id)
            item.setToolTip(0, f"{s.name}\n{s.started.replace('T', ' ')}\n{s.input}".strip())
            item.setToolTip(3, s.model)
            item.setToolTip(5, s.first_words)
            item.setTextAlignment(1, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            item.setTextAlignment(4, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            self.table.addTopLevelItem(item)
        self.table.blockSignals(False)
        n = len(summaries)
        if needle:
            self.count_label.setText(f"{n} session{'s' if n != 1 else ''} match")
        else:
            self.count_label.setText(f"{n} session{'s' if n != 1 else ''}")
        target = keep if keep in {s.id for s in summaries} else (summaries[0].id if summaries else None)
        if reopen or target is None or target != self._shown:
            self.select(target)
        else:
            self._set_current(target)
        if not reopen:  # follows the search box, back to the whole session when it is cleared
            self.history.search.setText(self._line_filter(needle))

    def current_id(self) -> str | None:
        item = self.table.currentItem()
        return item.data(0, ID_ROLE) if item is not None else None

    def selected_ids(self) -> list[str]:
        """The selected sessions' ids in list order; the open one alone when no row is selected."""
        picked = {id(item) for item in self.table.selectedItems()}
        rows = [self.table.topLevelItem(i) for i in range(self.table.topLevelItemCount())]
        ids = [item.data(0, ID_ROLE) for item in rows if id(item) in picked]
        current = self.current_id()
        return ids or ([current] if current is not None else [])

    def ids(self) -> list[str]:
        """The listed session ids, in order."""
        return [self.table.topLevelItem(i).data(0, ID_ROLE) for i in range(self.table.topLevelItemCount())]

    def select(self, session_id: str | None, version: int | None = None) -> None:
        """Open ``session_id`` (None: nothing), once: the change of the current row opens nothing itself here.
        It shows ``version`` when given, else the version the user chose when that session is open already (a
        refresh), else the latest; a version that is no longer there gives the latest."""
        self._set_current(session_id)
        self._open_current(version)

    def _set_current(self, session_id: str | None) -> None:
        """Make ``session_id``'s row the current one (none when it is not listed), opening nothing."""
        found = None
        for i in range(self.table.topLevelItemCount()):
            item = self.table.topLevelItem(i)
            if item.data(0, ID_ROLE) == session_id:
                found = item
                break
        self.table.blockSignals(True)
        try:
            self.table.setCurrentItem(found)
        finally:
            self.table.blockSignals(False)

    def selected_version(self) -> int | None:
        data = self.version_combo.currentData()
        return int(data) if data is not None else None

    def export_to(self, path: str | Path, fmt: str | None = None) -> None:
        """Export the open session's shown version to ``path`` (raises ExportError/UsageError)."""
        session_id = self.current_id()
        if session_id is None:
            return
        self.store.export(session_id, path, fmt, self.selected_version())

    def export_dialog(self) -> ExportDialog | None:
        """Open the export dialog for the shown version (modal); returns it after it closed."""
        session_id = self.current_id()
        if session_id is None:
            return None
        try:
            summary = self.store.summary(session_id)
            audio_end, started, title = self.store.audio_seconds(session_id), summary.started, summary.title
        except LivecapError:  # the session went meanwhile: the lines shown, their times as they are
            audio_end, started, title = None, "", ""
        folder = self.settings.value(Key.EXPORT_FOLDER) or str(documents_dir())
        dialog = ExportDialog(
            self.history.lines(),
            folder=folder,
            fmt_key=self.settings.value(Key.EXPORT_FORMAT),
            parent=self,
            audio_end=audio_end,
            started=started,  # the file name offered carries the session's time, not now
            title=title,  # and its title, when it was given one
        )
        if dialog.exec() and dialog.saved_path is not None:
            self.settings.set_value(Key.EXPORT_FOLDER, str(dialog.saved_path.parent))
            self.settings.set_value(Key.EXPORT_FORMAT, dialog.format.key)
        return dialog

    def rename(self, title: str) -> None:
        """Give the open session ``title``."""
        session_id = self.current_id()
        if session_id is None:
            return
        self._guard(lambda: self.store.rename(session_id, title))
        self.refresh()

    def delete_current(self) -> None:
        """Delete the open session (never the one being recorded, nor one being re-transcribed)."""
        session_id = self.current_id()
        if session_id is None or session_id == self._recording_id():
            return
        if self._retranscribing(session_id):
            self._show_error(BUSY)
            return
        self._guard(lambda: self.store.delete(session_id))
        self.refresh()

    def delete_sessions(self, session_ids: Sequence[str]) -> int:
        """Delete each of ``session_ids`` but the one being recorded and one being re-transcribed; returns how many
        went. A session already gone counts as gone; another failure is said and the rest are still deleted."""
        done = 0
        for session_id in session_ids:
            if self._is_busy(session_id):
                continue
            try:
                self.store.delete(session_id)
            except SessionNotFound:
                pass
            except LivecapError as exc:
                self._show_error(str(exc))
                continue
            done += 1
        self.refresh()
        return done

    def retention_deletes(self, text: str) -> list[SessionSummary]:
        """The sessions the policy ``text`` would delete now, newest first (nothing is deleted)."""
        protect = [i for i in (self._recording_id(), self._process_session) if i]  # the store knows the rest
        out = []
        for session_id in self.store.would_delete(Retention.parse(text), protect):
            try:
                out.append(self.store.summary(session_id))
            except SessionNotFound:  # gone meanwhile
                continue
        return out

    def set_retention(self, text: str) -> bool:
        """Keep sessions by the policy ``text`` ("all", "days:N", "sessions:N"), applied now. When that deletes
        sessions, the user is asked first (``retention_question``); declined, nothing changes and the choice shown
        goes back to the saved one. Returns whether the policy was applied."""
        policy = Retention.parse(text)
        doomed = self.retention_deletes(str(policy))
        if doomed and not self._confirm_retention(policy, doomed):
            self._show_retention(self.settings.value(Key.SESSIONS_RETENTION))
            return False
        self.settings.set_value(Key.SESSIONS_RETENTION, str(policy))
        self._show_retention(str(policy))
        if self.controller is not None:
            self.controller.set_retention(policy)
        else:
            self.store.apply_retention(policy)
        self.refresh()
        return True

    def retention_question(self, policy: Retention, doomed: Sequence[SessionSummary]) -> str:
        """What the user is asked before ``policy`` deletes ``doomed`` (rich text: the titles are escaped)."""
        n = len(doomed)
        label = next((lab for key, lab in RETENTION_CHOICES if key == str(policy)), str(policy))
        dates = sorted(s.started for s in doomed if s.started)
        oldest = f", the oldest from {dates[0].replace('T', ' ')[:16]}" if dates else ""
        text = f"This deletes {n} session{'s' if n != 1 else ''} now{oldest}"
        titled = [s.title for s in doomed if s.title]
        if titled:
            names = ", ".join(f"\u201c{html.escape(t)}\u201d" for t in titled[:3])
            more = f" and {len(titled) - 3} more" if len(titled) > 3 else ""
            text += f", among them {names}{more}"
        return (
            f"<p>{text}, with all their versions and audio.</p>"
            f"<p>Keep \u201c{html.escape(label)}\u201d and delete them?</p>"
        )

    def _confirm_retention(self, policy: Retention, doomed: Sequence[SessionSummary]) -> bool:
        return self._ask("Delete sessions", self.retention_question(policy, doomed))

    def _ask(self, title: str, text: str) -> bool:
        """A Yes/No question before a deletion, No by default; True for Yes."""
        return questions.ask(self, title, text)

    def _show_retention(self, text: str) -> None:
        """Show the policy ``text`` in the "Keep" choice."""
        key = str(Retention.parse(text))
        index = self.retention_combo.findData(key)
        if index < 0:
            self.retention_combo.addItem(key, key)
            index = self.retention_combo.count() - 1
        self.retention_combo.setCurrentIndex(index)

    def set_keep_audio(self, on: bool) -> None:
        """Keep the audio of new sessions (or not)."""
        self.settings.set_value(Key.SESSIONS_KEEP_AUDIO, bool(on))
        if self.controller is not None:
            self.controller.keep_audio = bool(on)
        if self.keep_audio_box.isChecked() != bool(on):
            self.keep_audio_box.setChecked(bool(on))

    def retranscribe(self, source: str, backend: str | None = None) -> None:
        """Start re-transcribing the open session with the model ``source`` (a child process)."""
        session_id = self.current_id()
        if session_id is None or self.process is not None:
            return
        if self.store.busy(session_id):  # by another process (livecap --retranscribe)
            self._show_error(ALREADY)
            self._update_actions()
            return
        backend = backend or self.settings.value(Key.BACKEND)
        weights = self.settings.value(Key.WEIGHTS)
        program, args = retranscribe_command(self.store, session_id, source, backend, self.child_args, weights)
        self.error_label.hide()
        process = QProcess(self)
        process.setProgram(program)
        process.setArguments(args)
        process.setWorkingDirectory(str(Path(__file__).resolve().parent.parent))
        process.readyReadStandardOutput.connect(self._on_process_output)
        process.finished.connect(self._on_process_finished)
        process.errorOccurred.connect(self._on_process_error)
        self.process, self._process_session, self._process_out = process, session_id, b""
        self._process_warning, self._process_version = "", None
        self.progress.setValue(0)
        self.progress.setFormat(f"Loading {model_name(source)}\u2026")
        self.progress.show()
        self.cancel_button.show()
        self._update_actions()
        process.start()

    def cancel_retranscribe(self) -> None:
        """Stop a running re-transcription (nothing is stored)."""
        process = self.process
        if process is not None:
            process.kill()
            process.waitForFinished(5000)

    # -- internals ---------------------------------------------------------------------------------
    def _row(self, s: SessionSummary, recording: str | None) -> list[str]:
        source = s.source + (" \u00b7 recording" if s.id == recording else "")
        if not s.finished and s.id != recording:
            source += " \u00b7 unfinished"
        lines = str(s.lines)
        if s.id in self._hits:
            lines = f"{self._hits[s.id]} / {s.lines}"
        name = s.title or s.started.replace("T", " ")[:16] or s.id
        model = (f"v{s.latest.number} \u00b7 " if len(s.versions) > 1 else "") + model_name(s.model)
        return [name, duration_text(s.duration), source, model, lines, s.first_words]

    def _on_live_line(self, line: Any) -> None:
        """The open session is the one in progress: show its new line as it commits."""
        session_id = self.current_id()
        if session_id is not None and session_id == self._recording_id() and self.isVisible():
            self.history.add_line(line)

    def _retranscribing(self, session_id: str) -> bool:
        """Whether ``session_id`` is being re-transcribed, by this window or another process."""
        return session_id == self._process_session or self.store.busy(session_id)

    def _is_busy(self, session_id: str) -> bool:
        """Whether ``session_id`` cannot be deleted now: it is being recorded or re-transcribed."""
        return session_id == self._recording_id() or self._retranscribing(session_id)

    def _recording_id(self) -> str | None:
        return getattr(self.controller, "session_id", None) if self.controller is not None else None

    def _open_current(self, version: int | None = None) -> None:
        session_id = self.current_id()
        if version is None and session_id == self._shown:
            version = self._chosen_version  # opened again (a refresh): the version chosen stays
        self._shown, self._chosen_version = session_id, version
        self.version_combo.clear()
        if session_id is None:
            empty = not self.table.topLevelItemCount()
            needle = self.search.text().strip()
            if empty and needle:
                self.title_label.setText("Nothing found")
                self.details_label.setText(f"No session contains \u201c{needle}\u201d.")
            else:
                self.title_label.setText("No session" if empty else "")
                self.details_label.setText("Every captioning session is kept here." if empty else "")
            self.history.clear()
            self._update_actions()
            return
        try:
            s = self.store.summary(session_id)
        except SessionNotFound:  # deleted by another process since it was listed
            self._gone()
            return
        self.title_label.setText(s.name)
        parts = [s.started.replace("T", " "), duration_text(s.duration), s.input or s.source]
        if s.unreadable:
            parts.append(f"{s.unreadable} unreadable line{'s' if s.unreadable != 1 else ''} skipped")
        if s.audio is not None:
            parts.append("audio kept")
        self.details_label.setText(" \u00b7 ".join(p for p in parts if p))
        for v in s.versions:
            label = f"{v.number}: {'live' if v.number == 1 else 're-transcribed'}"
            how = f", {v.how}" if v.how else ""
            label += (
                f" \u2014 {model_name(v.model) or 'unknown model'}{how}, {v.lines} line{'s' if v.lines != 1 else ''}"
            )
            self.version_combo.addItem(label, v.number)
        index = self.version_combo.findData(version) if version is not None else -1
        if index < 0:
            self._chosen_version = None
        self.version_combo.setCurrentIndex(index if index >= 0 else self.version_combo.count() - 1)
        self.version_combo.setEnabled(len(s.versions) > 1)
        self._show_lines()
        needle = self.search.text().strip()
        if needle:
            self.history.search.setText(self._line_filter(needle))
        self._update_actions()

    def _line_filter(self, needle: str) -> str:
        """What the open session's lines are filtered by for the search of all sessions ``needle``: ``needle``,
        or nothing when no line holds it (the session was found by its title: it is shown whole)."""
        folded = needle.casefold()
        return needle if any(folded in line.text.casefold() for line in self.history.lines()) else ""

    def _version_chosen(self) -> None:
        """The user chose a version: shown, and kept while the session is shown again (rename, refresh)."""
        self._chosen_version = self.selected_version()
        self._show_lines()

    def _show_lines(self) -> None:
        session_id = self.current_id()
        if session_id is None:
            return
        try:
            lines = list(self.store.lines(session_id, self.selected_version()))
        except SessionNotFound:
            self.history.clear()
            return
        if lines != self.history.lines():  # the same text shown again keeps where the reader is (another
            self.history.set_lines(lines)  # session ending, a rename, a delete refresh the whole window)

    def _update_actions(self) -> None:
        session_id = self.current_id()
        has = session_id is not None
        recording = has and session_id == self._recording_id()
        self.export_button.setEnabled(has)
        self.rename_button.setEnabled(has)
        self.delete_button.setEnabled(any(not self._is_busy(i) for i in self.selected_ids()))
        has_audio = False
        if has and not recording:
            try:
                has_audio = self.store.summary(session_id).audio is not None
            except SessionNotFound:
                has_audio = False
        retranscribing = has_audio and self._retranscribing(session_id)
        self.retranscribe_button.setEnabled(has_audio and self.process is None and not retranscribing)
        if retranscribing:
            tip = "The session is being re-transcribed"
        elif has_audio:
            tip = "Transcribe the kept audio again with another model, as a new version"
        else:
            tip = "Only sessions recorded with \u201cKeep audio\u201d on can be re-transcribed"
        self.retranscribe_button.setToolTip(tip)

    def _guard(self, action: Callable[[], None]) -> bool:
        try:
            action()
        except SessionNotFound:  # deleted meanwhile (another livecap, a file manager): the caller refreshes the list
            self._show_error(GONE)
            return False
        except LivecapError as exc:
            self._show_error(str(exc))
            return False
        return True

    def _show_error(self, text: str) -> None:
        self.error_label.setText(text)
        self.error_label.show()

    def _gone(self) -> None:
        """The open session is no longer on disk: say so, and list what there is."""
        self.refresh()
        self._show_error(GONE)

    def _open_summary(self) -> SessionSummary | None:
        """The open session's summary; None (said in one sentence) when it has gone from disk meanwhile."""
        session_id = self.current_id()
        if session_id is None:
            return None
        try:
            return self.store.summary(session_id)
        except SessionNotFound:
            self._gone()
            return None

    def _rename_clicked(self) -> None:
        summary = self._open_summary()
        if summary is None:
            return
        title, ok = QInputDialog.getText(self, "Rename session", "Name:", text=summary.title)
        if ok:
            self.rename(title)

    def _delete_clicked(self) -> None:
        ids = self.selected_ids()
        if len(ids) > 1:
            self._delete_several(ids)
            return
        summary = self._open_summary()
        if summary is None:
            return
        if self._retranscribing(summary.id):
            self._show_error(BUSY)
            self._update_actions()
            return
        if self._ask(
            "Delete session", f"<p>Delete \u201c{html.escape(summary.name)}\u201d with all its versions and audio?</p>"
        ):
            self.delete_current()

    def _delete_several(self, ids: list[str]) -> None:
        """Delete the selected sessions after one question that says how many (and which stay, if any)."""
        doomed = [i for i in ids if not self._is_busy(i)]
        if not doomed:
            return
        text = f"<p>Delete {len(doomed)} sessions with all their versions and audio?</p>"
        if len(doomed) < len(ids):
            text += "<p>The session being recorded or re-transcribed stays.</p>"
        if self._ask("Delete sessions", text):
            self.delete_sessions(doomed)

    def _fill_retranscribe_menu(self) -> None:
        menu = self.retranscribe_menu
        menu.clear()
        current = self.settings.value(Key.MODEL_SOURCE)
        weights = self.settings.value(Key.WEIGHTS)  # Model > Weights applies here too: say so where it is not float
        how = f", {weights} weights" if weights != "stored" else ""
        if current:
            menu.addAction(f"{model_name(current)} (the current model{how})").triggered.connect(
                lambda: self.retranscribe(current)
            )
            menu.addSeparator()
        suffix = f" ({weights} weights)" if how else ""
        menu.addAction(f"Another model\u2026{suffix}").triggered.connect(self._choose_model)
        menu.addAction(f"A model folder\u2026{suffix}").triggered.connect(self._choose_folder)

    def _choose_model(self) -> None:
        from app.model_dialog import choose_model

        source = choose_model(self, self.settings, remember=False)  # not the live model
        if source:
            self.retranscribe(source)

    def _choose_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Choose a model folder", str(Path.home()))
        if folder:
            self.retranscribe(folder)

    def _on_process_output(self) -> None:
        process = self.process
        if process is None:
            return
        self._process_out += bytes(process.readAllStandardOutput().data())
        *rows, self._process_out = self._process_out.split(b"\n")
        for row in rows:
            try:
                record = json.loads(row)
            except ValueError:
                continue
            if isinstance(record, dict) and isinstance(record.get("warning"), str):
                self._process_warning = record["warning"]  # shown when the new version is there
            if isinstance(record, dict) and type(record.get("version")) is int:
                self._process_version = record["version"]
            if isinstance(record, dict) and "progress" in record:
                total = float(record.get("total") or 0) or 1.0
                self.progress.setValue(int(1000 * min(float(record["progress"]) / total, 1.0)))
                self.progress.setFormat(
                    f"Re-transcribing\u2026 {duration_text(record['progress'])} of {duration_text(total)}"
                )

    def _on_process_finished(self, code: int, status: QProcess.ExitStatus) -> None:
        process, session_id = self.process, self._process_session
        if process is None:
            return
        self._on_process_output()
        err = bytes(process.readAllStandardError().data()).decode("utf-8", "replace")
        self.process, self._process_session = None, None
        process.deleteLater()
        self.progress.hide()
        self.cancel_button.hide()
        if status == QProcess.ExitStatus.NormalExit and code == 0 and session_id is not None:
            # the new version is shown (the child's, else the latest), not the one chosen before
            self._chosen_version = None
            self.refresh()
            self.select(session_id, self._process_version)
            version = self.selected_version() or 0
            if self._process_warning:
                self._show_error(self._process_warning)
            self.retranscribed.emit(session_id, version)
        else:
            sentence = next((ln[len("livecap: ") :] for ln in err.splitlines() if ln.startswith("livecap: ")), "")
            text = sentence or (
                "Re-transcription cancelled."
                if status != QProcess.ExitStatus.NormalExit
                else f"The re-transcription failed (exit code {code})."
            )
            self._show_error(text)
            self.retranscribe_failed.emit(text)
        self._update_actions()

    def _on_process_error(self, error: QProcess.ProcessError) -> None:
        if error == QProcess.ProcessError.FailedToStart and self.process is not None:
            self._on_process_finished(-1, QProcess.ExitStatus.CrashExit)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.search and event.type() == QEvent.Type.FocusIn and not self._warm_timer.isActive():
            self._to_warm = list(reversed(self.store.ids()))
            self._warm_timer.start()
        if (
            watched is self.table
            and event.type() == QEvent.Type.KeyPress
            and isinstance(event, QKeyEvent)
            and event.matches(QKeySequence.StandardKey.Delete)
        ):
            self._delete_clicked()
            return True
        return super().eventFilter(watched, event)

    def _warm_one(self) -> None:
        if not self._to_warm or not self.isVisible():
            self._warm_timer.stop()
            return
        try:
            self.store.prepare_search(self._to_warm.pop())
        except (OSError, ValueError):  # read again, and reported, by the search itself
            pass

    def changeEvent(self, event: QEvent) -> None:
        if event.type() == QEvent.Type.ActivationChange:  # back from a terminal: another livecap may have started
            self._update_actions()  # or ended re-transcribing the open session meanwhile
        super().changeEvent(event)

    def closeEvent(self, event: QCloseEvent) -> None:
        self.settings.set_value(Key.SESSIONS_GEOMETRY, bytes(self.saveGeometry().data()))
        super().closeEvent(event)
