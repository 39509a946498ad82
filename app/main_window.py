"""The main window: toolbar (Start/Pause/Stop, model, input device, level, delay), the caption view and
the history pane side by side, a message banner and the status bar. GUI thread only.

The window holds no session logic: it sends commands to ``SessionController`` and shows what it
reports. Everything the user chooses (model, backend, device, delay, fonts, theme, layout) is saved
in ``Settings`` as soon as it changes.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Qt, QTimer, Signal, Slot
from PySide6.QtGui import QAction, QActionGroup, QCloseEvent, QColor, QFont, QGuiApplication, QKeySequence
from PySide6.QtWidgets import (
    QApplication,
    QComboBox,
    QFileDialog,
    QFontDialog,
    QLabel,
    QMainWindow,
    QMessageBox,
    QSplitter,
    QStyle,
    QToolBar,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.banner import Banner
from app.caption_view import CaptionView
from app.capture import list_input_devices, refresh_devices
from app.controller import SessionController
from app.export_dialog import ExportDialog
from app.history import HistoryPane
from app.icons import media_icon
from app.journal import RecoveredSession
from app.level_meter import LevelMeter
from app.overlay_manager import OverlayManager
from app.paths import documents_dir
from app.settings import BACKENDS, DELAY_CHOICES_MS, THEMES, Key, Settings, Shortcut
from app.status_bar import SessionStatusBar
from app.theme import apply_theme, tail_color
from app.worker import SessionSpec, Stats

log = logging.getLogger(__name__)

AUDIO_FILTER = (
    "Audio and video (*.wav *.flac *.ogg *.oga *.opus *.mp3 *.m4a *.aac *.mp4 *.m4v *.mov *.mkv *.webm);;"
    "All files (*)"
)


class _Notifier(QObject):
    """Carries messages from any thread to the GUI thread (used by the excepthook)."""

    message = Signal(str)


class MainWindow(QMainWindow):
    """The livecap main window. ``sounddevice`` gives the module used to list devices (lazy import when
    ``None``); the controller's worker captures with the same module."""

    def __init__(
        self,
        controller: SessionController,
        settings: Settings,
        *,
        sounddevice: Any = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("mainWindow")
        self.setWindowTitle("livecap")
        self.controller = controller
        self.settings = settings
        self._sd = sounddevice
        self._notifier = _Notifier(self)
        self._notifier.message.connect(lambda text: self.banner.show_message("error", text))
        self._input_file: str | None = None

        self._build_widgets()
        self._build_actions()
        self._build_toolbar()
        self._build_menus()
        self._connect()
        self._restore()
        self.refresh_devices(rescan=False)
        self._on_state(controller.state)

        self._clock = QTimer(self)
        self._clock.setInterval(500)
        self._clock.timeout.connect(lambda: self.status.set_elapsed(self.controller.elapsed()))
        self._clock.start()

    # -- construction ----------------------------------------------------------------------------
    def _build_widgets(self) -> None:
        self.banner = Banner(self)
        self.caption_view = CaptionView(self)
        self.history = HistoryPane(self)
        self.splitter = QSplitter(Qt.Orientation.Horizontal, self)
        self.splitter.setObjectName("mainSplitter")
        self.splitter.addWidget(self.caption_view)
        self.splitter.addWidget(self.history)
        self.splitter.setStretchFactor(0, 3)
        self.splitter.setStretchFactor(1, 2)
        self.splitter.setChildrenCollapsible(False)
        central = QWidget(self)
        layout = QVBoxLayout(central)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.banner)
        layout.addWidget(self.splitter, 1)
        self.setCentralWidget(central)
        self.status = SessionStatusBar(self)
        self.setStatusBar(self.status)
        self.overlays = OverlayManager(self.controller, self.settings, self)

        self.model_button = QToolButton(self)
        self.model_button.setObjectName("modelButton")
        self.model_button.setText("Choose model\u2026")
        self.model_button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.model_button.setIcon(self.style().standardIcon(QStyle.StandardPixmap.SP_DirIcon))
        self.model_button.setToolTip("Choose, download or add a model")
        self.model_button.clicked.connect(self.choose_model)
        self.device_combo = QComboBox(self)
        self.device_combo.setObjectName("deviceCombo")
        self.device_combo.setMinimumContentsLength(14)
        self.device_combo.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        self.device_combo.setToolTip("Microphone")
        self.refresh_button = QToolButton(self)
        self.refresh_button.setObjectName("refreshDevices")
        self.refresh_button.setIcon(self.style().standardIcon(QStyle.StandardPixmap.SP_BrowserReload))
        self.refresh_button.setToolTip("Refresh the list of microphones")
        self.refresh_button.clicked.connect(lambda: self.refresh_devices(rescan=True))
        self.level_meter = LevelMeter(self)
        self.delay_combo = QComboBox(self)
        self.delay_combo.setObjectName("delayCombo")
        for ms in DELAY_CHOICES_MS:
            self.delay_combo.addItem(f"{ms} ms", ms)
        self.delay_combo.setToolTip(
            "Voxtral: how far the model may look ahead. Shorter is faster, longer is more accurate."
        )

    def _action(
        self, text: str, shortcut: Shortcut | None = None, icon: QStyle.StandardPixmap | None = None
    ) -> QAction:
        action = QAction(text, self)
        if icon is not None:
            action.setIcon(self.style().standardIcon(icon))
        if shortcut is not None:
            action.setShortcut(QKeySequence(self.settings.shortcut(shortcut)))
            action.setToolTip(f"{shortcut.value[2]} ({self.settings.shortcut(shortcut)})")
        self.addAction(action)
        return action

    def _build_actions(self) -> None:
        sp = QStyle.StandardPixmap
        self.start_action = self._action("Start")
        self.start_action.setToolTip("Start captioning (Space)")
        self.pause_action = self._action("Pause")
        self.pause_action.setToolTip("Pause captioning (Space)")
        self.stop_action = self._action("Stop", Shortcut.STOP)
        self._refresh_icons()
        self.toggle_action = self._action("Start / pause", Shortcut.START_PAUSE)
        self.open_model_action = self._action("Models\u2026", Shortcut.OPEN_MODEL, sp.SP_DirOpenIcon)
        self.open_folder_action = self._action("Open model folder\u2026")
        self.replay_action = self._action("Replay audio file\u2026", Shortcut.REPLAY_FILE)
        self.export_action = self._action("Export transcript\u2026", Shortcut.EXPORT, sp.SP_DialogSaveButton)
        self.export_action.setIconText("Export")
        self.live_srt_action = self._action("Live SRT file\u2026")
        self.live_srt_action.setCheckable(True)
        self.live_srt_action.setToolTip("Keep an SRT file growing while captioning (for OBS and the like)")
        self.copy_all_action = self._action("Copy transcript", Shortcut.COPY_ALL)
        self.find_action = self._action("Search history", Shortcut.FIND)
        self.quit_action = self._action("Quit", Shortcut.QUIT)
        self.overlays.toggle_action.setIconText("Overlay")
        self.overlays.toggle_action.setShortcut(QKeySequence(self.settings.shortcut(Shortcut.OVERLAY)))
        self.overlays.presentation_action.setShortcut(
            QKeySequence(self.settings.shortcut(Shortcut.PRESENTATION))
        )
        self.addAction(self.overlays.toggle_action)
        self.addAction(self.overlays.presentation_action)

    def _build_toolbar(self) -> None:
        bar = QToolBar("Session", self)
        bar.setObjectName("sessionToolbar")
        bar.setMovable(False)
        bar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        bar.addAction(self.start_action)
        bar.addAction(self.pause_action)
        bar.addAction(self.stop_action)
        bar.addSeparator()
        bar.addWidget(self.model_button)
        bar.addSeparator()
        bar.addWidget(_label("Input", self))
        bar.addWidget(self.device_combo)
        bar.addWidget(self.refresh_button)
        bar.addWidget(self.level_meter)
        bar.addSeparator()
        self.delay_label = _label("Delay", self)
        self._delay_widgets = [bar.addWidget(self.delay_label), bar.addWidget(self.delay_combo)]
        bar.addSeparator()
        bar.addAction(self.overlays.toggle_action)
        bar.addAction(self.export_action)
        self.toolbar = bar
        self.addToolBar(bar)

    def _build_menus(self) -> None:
        menus = self.menuBar()
        file_menu = menus.addMenu("&File")
        file_menu.addAction(self.replay_action)
        file_menu.addSeparator()
        file_menu.addAction(self.export_action)
        file_menu.addAction(self.live_srt_action)
        file_menu.addAction(self.copy_all_action)
        file_menu.addSeparator()
        file_menu.addAction(self.quit_action)

        session_menu = menus.addMenu("&Session")
        for action in (self.start_action, self.pause_action, self.stop_action):
            session_menu.addAction(action)

        model_menu = menus.addMenu("&Model")
        model_menu.addAction(self.open_model_action)
        model_menu.addAction(self.open_folder_action)
        backend_menu = model_menu.addMenu("Backend")
        self.backend_group = QActionGroup(self)
        current = self.settings.value(Key.BACKEND)
        for name in BACKENDS:
            action = backend_menu.addAction(name)
            action.setCheckable(True)
            action.setChecked(name == current)
            action.setData(name)
            self.backend_group.addAction(action)
        self.backend_group.triggered.connect(self._backend_chosen)

        view_menu = menus.addMenu("&View")
        view_menu.addMenu(self.overlays.menu)
        view_menu.addAction(self.overlays.presentation_action)
        view_menu.addSeparator()
        view_menu.addAction("Caption font\u2026").triggered.connect(self.choose_caption_font)
        theme_menu = view_menu.addMenu("Theme")
        self.theme_group = QActionGroup(self)
        for name in THEMES:
            action = theme_menu.addAction(name.replace("-", " ").capitalize())
            action.setCheckable(True)
            action.setData(name)
            action.setChecked(name == self.settings.value(Key.THEME))
            self.theme_group.addAction(action)
        self.theme_group.triggered.connect(lambda action: self.set_theme(action.data()))
        view_menu.addAction(self.find_action)

        help_menu = menus.addMenu("&Help")
        help_menu.addAction("Keyboard shortcuts").triggered.connect(self.show_shortcuts)
        help_menu.addAction("About livecap").triggered.connect(self._about)

    def _connect(self) -> None:
        c = self.controller
        self.start_action.triggered.connect(self.start_or_resume)
        self.pause_action.triggered.connect(c.pause)
        self.stop_action.triggered.connect(c.stop)
        self.toggle_action.triggered.connect(self.toggle)
        self.open_model_action.triggered.connect(self.choose_model)
        self.open_folder_action.triggered.connect(self.choose_model_folder)
        self.replay_action.triggered.connect(self.choose_replay_file)
        self.export_action.triggered.connect(self.export_dialog)
        self.live_srt_action.triggered.connect(self._live_srt_toggled)
        self.copy_all_action.triggered.connect(self._copy_all)
        self.find_action.triggered.connect(self.history.focus_search)
        self.quit_action.triggered.connect(self.close)
        self.device_combo.activated.connect(self._device_chosen)
        self.delay_combo.activated.connect(
            lambda: self.settings.set_value(Key.DELAY_MS, int(self.delay_combo.currentData()))
        )
        self.history.copied.connect(lambda n: self.status.showMessage(f"Copied {n} line(s).", 3000))

        c.state_changed.connect(self._on_state)
        c.model_changed.connect(self._on_model)
        c.lines_reset.connect(self._on_lines_reset)
        c.line_committed.connect(self.caption_view.commit)
        c.line_committed.connect(self.history.add_line)
        c.partial_changed.connect(self.caption_view.set_partial)
        c.stats_changed.connect(self._on_stats)
        c.input_changed.connect(self.status.set_input)
        c.message.connect(self.show_message)
        c.session_finished.connect(self._on_session_finished)

    def _restore(self) -> None:
        s = self.settings
        if s.value(Key.WINDOW_GEOMETRY):
            self.restoreGeometry(s.value(Key.WINDOW_GEOMETRY))
        else:
            self.resize(1100, 640)
        if s.value(Key.SPLITTER_STATE):
            self.splitter.restoreState(s.value(Key.SPLITTER_STATE))
        else:
            self.splitter.setSizes([640, 420])
        delay = s.value(Key.DELAY_MS)
        index = self.delay_combo.findData(delay)
        self.delay_combo.setCurrentIndex(index if index >= 0 else DELAY_CHOICES_MS.index(480))
        self._apply_caption_font()
        self.caption_view.set_tail_color(tail_color(s.value(Key.THEME)))
        live = s.value(Key.LIVE_SRT_PATH)
        if live:
            self.controller.set_live_srt(live)
            self.live_srt_action.setChecked(True)
            self.live_srt_action.setText(f"Live SRT file: {Path(live).name}")
        if s.value(Key.OVERLAY_VISIBLE):
            QTimer.singleShot(0, lambda: self.overlays.set_visible(True))

    # -- public commands ---------------------------------------------------------------------------
    def load_model(self, source: str, backend: str | None = None) -> None:
        """Load ``source`` on ``backend`` (default: the saved backend) and remember the choice."""
        backend = backend or self.settings.value(Key.BACKEND)
        local = Path(source).expanduser()
        if local.exists():  # remember folders absolutely; hub ids stay as they are
            source = str(local.resolve())
        self.settings.set_value(Key.MODEL_SOURCE, source)
        self.status.set_model(None, loading=True)
        self.controller.load_model(source, backend)

    def choose_model(self) -> None:
        """Open the model dialog (catalog, downloads, custom folders) and load the chosen model."""
        from .model_dialog import choose_model

        source = choose_model(self, self.settings)
        if source:
            self.load_model(source)

    def choose_model_folder(self) -> None:
        """Ask for a model folder directly and load it."""
        start = self.settings.value(Key.MODEL_SOURCE) or str(Path.home())
        folder = QFileDialog.getExistingDirectory(self, "Choose a model folder", start)
        if folder:
            self.load_model(folder)

    def start_or_resume(self) -> None:
        """Start a session on the chosen microphone, or resume a paused one."""
        if self.controller.state == "paused":
            self.controller.resume()
        elif self.controller.state == "idle":
            self.start_session(self._session_spec())

    def toggle(self) -> None:
        """Space: start when idle, pause when running, resume when paused."""
        if self.controller.state == "running":
            self.controller.pause()
        else:
            self.start_or_resume()

    def start_file(self, path: str, speed: float = 1.0) -> None:
        """Replay ``path`` as if it were live (``speed`` times real time)."""
        self.start_session(self._session_spec(input_file=path, speed=speed))

    def start_session(self, spec: SessionSpec) -> None:
        self.banner.dismiss()
        self.status.reset_session()
        self.controller.start(spec)

    def choose_replay_file(self) -> None:
        if self.controller.state != "idle":
            return
        path, _ = QFileDialog.getOpenFileName(self, "Replay an audio file", str(Path.home()), AUDIO_FILTER)
        if path:
            self.start_file(path)

    def export_dialog(self) -> ExportDialog:
        """Open the export dialog (modal); returns it after it closed."""
        folder = self.settings.value(Key.EXPORT_FOLDER) or str(documents_dir())
        dialog = ExportDialog(
            self.controller.lines, folder=folder, fmt_key=self.settings.value(Key.EXPORT_FORMAT), parent=self
        )
        if dialog.exec() and dialog.saved_path is not None:
            self.settings.set_value(Key.EXPORT_FOLDER, str(dialog.saved_path.parent))
            self.settings.set_value(Key.EXPORT_FORMAT, dialog.format.key)
            self.status.showMessage(f"Saved the transcript to {dialog.saved_path}.", 8000)
        return dialog

    def refresh_devices(self, rescan: bool = True) -> None:
        """Fill the device picker (``rescan``: make PortAudio look for new devices; only while idle)."""
        sd = self._sounddevice()
        if sd is None:
            self.device_combo.clear()
            self.device_combo.addItem("No audio system", "")
            return
        if rescan and self.controller.state in ("idle", "no-model", "loading"):
            try:
                refresh_devices(sd)
            except Exception:
                log.warning("device rescan failed", exc_info=True)
        wanted = self.settings.value(Key.DEVICE)
        devices = list_input_devices(sd)
        self.device_combo.clear()
        self.device_combo.addItem("System default", "")
        for dev in devices:
            label = dev.name + (f" ({dev.hostapi})" if dev.hostapi else "")
            self.device_combo.addItem(label, dev.name)
        index = self.device_combo.findData(wanted)
        if wanted and index < 0:
            self.device_combo.addItem(f"{wanted} (not connected)", wanted)
            index = self.device_combo.count() - 1
        self.device_combo.setCurrentIndex(max(index, 0))
        if not devices:
            self.device_combo.setItemText(0, "No microphone found")

    def choose_caption_font(self) -> None:
        ok, font = QFontDialog.getFont(self.caption_view.font(), self, "Caption font")
        if ok:
            self.settings.set_value(Key.CAPTION_FONT, font.toString())
            self.settings.set_value(Key.CAPTION_FONT_SIZE, max(font.pointSize(), 1))
            self._apply_caption_font()

    def set_theme(self, name: str) -> None:
        app = QApplication.instance()
        if isinstance(app, QApplication):
            name = apply_theme(app, name)
        self.settings.set_value(Key.THEME, name)
        self.caption_view.set_tail_color(tail_color(name))
        self._refresh_icons()

    def offer_recovery(self) -> RecoveredSession | None:
        """If the last session did not end cleanly, offer its lines in the banner."""
        recovered = self.controller.pending_recovery()
        if recovered is None:
            return None
        n = len(recovered.lines)
        when = recovered.started.replace("T", " ") or "an earlier session"
        self.banner.show_message(
            "warning",
            f"livecap did not close cleanly last time; {n} line{'s' if n != 1 else ''} from {when} "
            "were saved.",
            [
                ("Recover", lambda: self._recover(recovered)),
                ("Discard", lambda: self.controller.discard_recovery(recovered)),
            ],
        )
        return recovered

    def show_message(self, level: str, text: str) -> None:
        """Info goes to the status bar for a few seconds; warnings and errors to the banner."""
        if level == "info":
            self.status.showMessage(text, 6000)
        else:
            self.banner.show_message(level, text)

    def notify_error(self, text: str) -> None:
        """Thread-safe: show ``text`` as an error in the banner (used by the excepthook)."""
        self._notifier.message.emit(text)

    def show_shortcuts(self) -> None:
        rows = "".join(
            f"<tr><td><b>{self.settings.shortcut(s)}</b></td><td>{s.value[2]}</td></tr>" for s in Shortcut
        )
        QMessageBox.information(self, "Keyboard shortcuts", f"<table cellspacing=6>{rows}</table>")

    # -- handlers ------------------------------------------------------------------------------------
    def _sounddevice(self) -> Any:
        if self._sd is None:
            try:
                import sounddevice
            except OSError:
                return None
            self._sd = sounddevice
        return self._sd

    def _session_spec(self, input_file: str | None = None, speed: float = 1.0) -> SessionSpec:
        options: dict[str, Any] = {}
        model = self.controller.model
        if model is not None and model.has_delay:
            options["delay_ms"] = int(self.delay_combo.currentData())
        device = self.device_combo.currentData() or None
        return SessionSpec(input_file=input_file, speed=speed, device=device, options=options)

    @Slot(str)
    def _on_state(self, state: str) -> None:
        idle = state == "idle"
        active = state in ("running", "paused")
        self.start_action.setEnabled(idle or state == "paused")
        self.start_action.setText("Resume" if state == "paused" else "Start")
        self.pause_action.setEnabled(state == "running")
        self.stop_action.setEnabled(active)
        self.toggle_action.setEnabled(idle or active)
        self.model_button.setEnabled(not active and state != "loading")
        self.open_model_action.setEnabled(not active and state != "loading")
        self.backend_group.setEnabled(not active)
        self.device_combo.setEnabled(not active)
        self.refresh_button.setEnabled(not active)
        self.replay_action.setEnabled(idle)
        model = self.controller.model
        has_delay = model is not None and model.has_delay
        for action in self._delay_widgets:
            action.setVisible(has_delay)
        self.delay_combo.setEnabled(has_delay and not active)
        if state == "no-model":
            self.start_action.setToolTip("Choose a model first (Model \u25b8 Models\u2026)")
        else:
            self.start_action.setToolTip("Start captioning (Space)")
        suffix = {
            "running": " \u2014 captioning",
            "paused": " \u2014 paused",
            "loading": " \u2014 loading model",
        }
        self.setWindowTitle("livecap" + suffix.get(state, ""))
        if not active:
            self.level_meter.set_level(-90)

    @Slot(object)
    def _on_model(self, info: Any) -> None:
        self.status.set_model(info)
        if info is None:
            self.model_button.setText("Choose model\u2026")
        else:
            name = info.name if len(info.name) <= 28 else info.name[:27] + "\u2026"
            self.model_button.setText(name)
            self.model_button.setToolTip(f"{info.source}\nClick to choose another model")
        self._on_state(self.controller.state)

    def _on_lines_reset(self) -> None:
        self.caption_view.set_lines(self.controller.lines)
        self.history.set_lines(self.controller.lines)

    @Slot(object)
    def _on_stats(self, stats: Stats) -> None:
        self.level_meter.set_level(stats.level_db)
        self.status.set_stats(stats)

    @Slot(str)
    def _on_session_finished(self, reason: str) -> None:
        self.caption_view.flush()
        n = len(self.controller.lines)
        if reason == "input ended":
            self.status.showMessage(f"The file ended; {n} line(s) transcribed.", 8000)
        elif reason == "stopped":
            self.status.showMessage(f"Stopped; {n} line(s) in the transcript.", 8000)

    def _device_chosen(self) -> None:
        self.settings.set_value(Key.DEVICE, str(self.device_combo.currentData() or ""))

    def _backend_chosen(self, action: QAction) -> None:
        self.settings.set_value(Key.BACKEND, str(action.data()))
        source = self.settings.value(Key.MODEL_SOURCE)
        if source and self.controller.state in ("idle", "no-model"):
            self.load_model(source, str(action.data()))

    def _live_srt_toggled(self, checked: bool) -> None:
        if not checked:
            self.controller.set_live_srt(None)
            self.settings.set_value(Key.LIVE_SRT_PATH, "")
            self.live_srt_action.setText("Live SRT file\u2026")
            return
        folder = Path(self.settings.value(Key.EXPORT_FOLDER) or documents_dir())
        path, _ = QFileDialog.getSaveFileName(
            self,
            "Live SRT file (rewritten by each new session)",
            str(folder / "livecap-live.srt"),
            "SubRip subtitles (*.srt)",
        )
        if not path:
            self.live_srt_action.setChecked(False)
            return
        self.controller.set_live_srt(path)
        self.settings.set_value(Key.LIVE_SRT_PATH, path)
        self.live_srt_action.setText(f"Live SRT file: {Path(path).name}")

    def _copy_all(self) -> None:
        text = "\n".join(line.text for line in self.controller.lines)
        QGuiApplication.clipboard().setText(text)
        self.status.showMessage(f"Copied {len(self.controller.lines)} line(s).", 3000)

    def _recover(self, recovered: RecoveredSession) -> None:
        self.controller.recover(recovered)
        self.status.showMessage(
            f"Recovered {len(recovered.lines)} line(s); export them before starting a new session.", 10000
        )

    def _refresh_icons(self) -> None:
        """Redraw the media icons in the current theme's colours."""
        palette = self.palette()
        plain = self.settings.value(Key.THEME) == "high-contrast"
        for action, kind, accent in (
            (self.start_action, "start", "#2e9d4f"),
            (self.pause_action, "pause", None),
            (self.stop_action, "stop", "#d13b3b"),
        ):
            action.setIcon(media_icon(kind, palette, None if plain or accent is None else QColor(accent)))

    def _apply_caption_font(self) -> None:
        font = QFont(QGuiApplication.font())
        stored = self.settings.value(Key.CAPTION_FONT)
        if not (stored and font.fromString(stored)):
            font.setPointSize(self.settings.value(Key.CAPTION_FONT_SIZE))
        self.caption_view.set_caption_font(font)

    def _about(self) -> None:
        QMessageBox.about(
            self, "About livecap", "livecap: on-device live captions (Voxtral Realtime, Moonshine Streaming)."
        )

    def closeEvent(self, event: QCloseEvent) -> None:
        """Save the layout, end the session cleanly (its lines are journaled), stop the worker."""
        s = self.settings
        s.set_value(Key.WINDOW_GEOMETRY, bytes(self.saveGeometry().data()))
        s.set_value(Key.SPLITTER_STATE, bytes(self.splitter.saveState().data()))
        self.overlays.close()
        self.controller.shutdown()
        s.sync()
        super().closeEvent(event)


def _label(text: str, parent: QWidget) -> QLabel:
    label = QLabel(text, parent)
    label.setContentsMargins(6, 0, 4, 0)
    return label
