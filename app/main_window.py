"""The main window: toolbar (Start/Pause/Stop, model, input device, level, delay), the caption view and
the history pane side by side, a message banner and the status bar. GUI thread only.

The window holds no session logic: it sends commands to ``SessionController`` and shows what it
reports. Everything the user chooses (model, backend, device, delay, fonts, theme, layout) is saved
in ``Settings`` as soon as it changes.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

from PySide6.QtCore import QEvent, QObject, QPointF, Qt, QTimer, Signal, Slot
from PySide6.QtGui import (
    QAction,
    QActionGroup,
    QCloseEvent,
    QColor,
    QFont,
    QGuiApplication,
    QIcon,
    QKeyEvent,
    QKeySequence,
    QPainter,
    QPalette,
    QPen,
    QPixmap,
)
from PySide6.QtWidgets import (
    QAbstractButton,
    QApplication,
    QComboBox,
    QFileDialog,
    QFontDialog,
    QLabel,
    QMainWindow,
    QMenu,
    QMessageBox,
    QSplitter,
    QStackedWidget,
    QStyle,
    QToolBar,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app import placement
from app.banner import Banner
from app.caption_view import CaptionView
from app.controller import LOADING, SessionController
from app.export_dialog import ExportDialog
from app.history import HistoryPane
from app.icons import media_icon
from app.info_dialog import InfoDialog
from app.journal import RecoveredSession
from app.overlay_manager import OverlayManager
from app.paths import documents_dir
from app.sessions_view import SessionsWindow, apply_session_settings
from app.settings import CAPTION_SIZES, DELAY_CHOICES_MS, THEMES, WEIGHTS, Key, Settings, Shortcut, weight_bits
from app.source_picker import SoundSystemWait, SourcePicker
from app.sources import ServerSilent, load_sounddevice
from app.sources.base import SERVER_SILENT
from app.status_bar import SessionStatusBar
from app.theme import apply_theme, tail_color
from app.toolbar_fit import ToolbarFit
from app.welcome import WelcomePanel
from app.worker import SessionSpec, Stats
from engine.backends import BACKENDS
from engine.catalog import CatalogEntry
from engine.errors import AudioError

log = logging.getLogger(__name__)

AUDIO_FILTER = (
    "Audio and video (*.wav *.flac *.ogg *.oga *.opus *.mp3 *.m4a *.aac *.mp4 *.m4v *.mov *.mkv *.webm);;All files (*)"
)
SILENT_DB = -90.0  # the level meter's floor: exact digital silence
LOAD_FAILED_KEY = "load-failed"  # the banner's message while the last model load failed
SOUND_SERVER_KEY = "sound-server"  # the banner's message while the sound server does not answer at start
CAPTION_SIZE_STEP = 2
#: Model > Weights: (``Key.WEIGHTS`` value, menu text, tooltip).
WEIGHT_ITEMS = (
    ("stored", "As stored (exact)", "The weights as the model stores them: the reference results"),
    ("8-bit", "8-bit (faster)", "Float weights converted to 8 bits on load (once, then cached): faster, close results"),
    ("4-bit", "4-bit (smallest)", "Float weights converted to 4 bits on load: smallest and fastest, less exact"),
)


class _Notifier(QObject):
    """Carries messages from any thread to the GUI thread (used by the excepthook)."""

    message = Signal(str)


#: The window's size on a first start (no more than 90 % of the screen): the whole toolbar fits in the light and
#: dark themes (at 1100 px Export and Sessions were behind its overflow button).
FIRST_SIZE = (1240, 680)


OTHER_KEYS = (  # keys of one widget, not configurable: listed in Help > Keyboard shortcuts
    ("Ctrl+End, Page Down", "Back to the live captions after scrolling up", "Caption view"),
    ("Ctrl+wheel", "Larger or smaller caption text", "Caption view"),
    ("Ctrl+0", "Default caption text size", "View \u25b8 Default caption text size"),
    ("Esc", "Clear the search", "History search box"),
    ("Esc", "Leave presentation mode", "Overlay (F11)"),
    (
        "Arrows, Shift+arrows",
        "Move, resize the overlay; Enter keeps, Esc undoes",
        "View \u25b8 Overlay \u25b8 Move or resize with the keyboard",
    ),
)


def _missing_catalog_model(source: str) -> CatalogEntry | None:
    """The catalog entry of ``source`` when it is a catalog model not (fully) on this computer, else None (also
    when the cache cannot be read: the load then says what is wrong). No network."""
    from engine import install
    from engine.catalog import find_entry

    entry = find_entry(source)
    if entry is None:
        return None
    try:
        state = install.local_state(entry.repo_ids, entry.revision, entry.required_files)
    except Exception:  # noqa: BLE001 - an unreadable cache
        return None
    return None if state is not None and state.complete else entry


class MainWindow(QMainWindow):
    """The livecap main window. ``sounddevice`` gives the module used to list devices (lazy import when
    ``None``); the controller's worker captures with the same module. ``audio`` (an
    ``app.sources.AudioSystem``) lists microphones and outputs; made from ``sounddevice`` when ``None``."""

    def __init__(
        self,
        controller: SessionController,
        settings: Settings,
        *,
        sounddevice: Any = None,
        audio: Any = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self._audio = audio
        self.setObjectName("mainWindow")
        self.setWindowTitle("livecap")
        self.controller = controller
        self.settings = settings
        self._sd = sounddevice
        self._sound_wait: SoundSystemWait | None = None  # while the sound server does not answer (at start)
        self._requested = ""  # the model last asked for (load_model)
        self._working = ""  # the model that last loaded in this run
        self._after_download: tuple[str | None, int | None] = (None, None)  # a run's backend, bits for an offer
        self._notifier = _Notifier(self)
        self._notifier.message.connect(lambda text: self.banner.show_message("error", text))
        self.sessions_window: SessionsWindow | None = None
        self._held_focus: QWidget | None = None  # the widget that had the keyboard when Pause or Stop was pressed
        self.sessions_child_args: list[str] = []  # extra arguments for re-transcription processes (tests)

        self._build_widgets()
        self._build_actions()
        self._build_toolbar()
        self._build_menus()
        self._order_tab_chain()
        self._connect()
        self._restore()
        if controller.store is not None:
            apply_session_settings(controller, settings)
        self.refresh_devices(rescan=False)
        self._on_state(controller.state)
        self._update_export()

        self._clock = QTimer(self)
        self._clock.setInterval(500)
        self._clock.timeout.connect(lambda: self.status.set_elapsed(self.controller.elapsed()))
        self._clock.start()

    # -- construction ----------------------------------------------------------------------------
    def _build_widgets(self) -> None:
        self.banner = Banner(self)
        self.caption_view = CaptionView(self)
        shortcut = self.settings.shortcut
        self.caption_view.keys = {"start": shortcut(Shortcut.START_PAUSE), "models": shortcut(Shortcut.OPEN_MODEL)}
        self.history = HistoryPane(self)
        self.welcome = WelcomePanel(self)  # in the caption pane's place while no model is loaded
        self.caption_stack = QStackedWidget(self)
        self.caption_stack.setObjectName("captionStack")
        self.caption_stack.addWidget(self.caption_view)
        self.caption_stack.addWidget(self.welcome)
        self.splitter = QSplitter(Qt.Orientation.Horizontal, self)
        self.splitter.setObjectName("mainSplitter")
        self.splitter.addWidget(self.caption_stack)
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
        self.model_button.setAccessibleName("Model: none chosen")
        self.model_button.clicked.connect(self.choose_model)
        self.sources = SourcePicker(self, self.settings, self._audio_system())
        self.sources.waiting = self._sound_wait is not None
        self.sources.notice.connect(lambda text: self.show_message("warning", text))
        self.device_combo = self.sources.device_combo
        self.refresh_button = self.sources.refresh_button
        self.level_meter = self.sources.level_meter
        self.delay_combo = QComboBox(self)
        self.delay_combo.setObjectName("delayCombo")
        for ms in DELAY_CHOICES_MS:
            self.delay_combo.addItem(f"{ms} ms", ms)
        self.delay_combo.setToolTip(
            "Voxtral: how far the model may look ahead. Shorter is faster, longer is more accurate."
        )
        self.delay_combo.setAccessibleName("Delay (how far Voxtral may look ahead)")

    def _action(
        self, text: str, shortcut: Shortcut | None = None, icon: QStyle.StandardPixmap | None = None
    ) -> QAction:
        action = QAction(text, self)
        if icon is not None:
            action.setIcon(self.style().standardIcon(icon))
        if shortcut is not None:
            action.setShortcut(QKeySequence(self.settings.shortcut(shortcut)))
            action.setToolTip(f"{shortcut.value[2]} ({self.settings.shortcut(shortcut)})")
            self._shortcut_actions[shortcut] = action
        self.addAction(action)
        return action

    def _build_actions(self) -> None:
        sp = QStyle.StandardPixmap
        self._shortcut_actions: dict[Shortcut, QAction] = {}
        # Start and Pause share Space: only one of them is enabled at a time (idle/paused vs running).
        start_key = self.settings.shortcut(Shortcut.START_PAUSE)
        self.start_action = self._action("Start", Shortcut.START_PAUSE)
        self.start_action.setToolTip(f"Start captioning ({start_key})")
        self.pause_action = self._action("Pause", Shortcut.START_PAUSE)
        self.pause_action.setToolTip(f"Pause captioning ({start_key})")
        for action in (self.start_action, self.pause_action):  # a held Space toggled Pause/Resume ~15 times a second
            action.setAutoRepeat(False)
        self.stop_action = self._action("Stop", Shortcut.STOP)
        self._refresh_icons()
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
        self.sessions_action = self._action("Sessions\u2026", Shortcut.SESSIONS, sp.SP_FileDialogDetailedView)
        self.sessions_action.setIconText("Sessions")
        self.sessions_action.setEnabled(self.controller.store is not None)
        self.quit_action = self._action("Quit", Shortcut.QUIT)
        self.quit_action.setToolTip("Quit (a session in progress ends and is kept in Sessions)")
        self.larger_action = self._action("Larger caption text", Shortcut.LARGER_TEXT)
        self.larger_action.setShortcuts(
            [QKeySequence(self.settings.shortcut(Shortcut.LARGER_TEXT)), QKeySequence("Ctrl+=")]
        )
        self.smaller_action = self._action("Smaller caption text", Shortcut.SMALLER_TEXT)
        self.default_size_action = QAction("Default caption text size", self)
        self.default_size_action.setShortcut(QKeySequence("Ctrl+0"))
        self.addAction(self.default_size_action)
        self.overlays.toggle_action.setIconText("Overlay")
        self.overlays.toggle_action.setShortcut(QKeySequence(self.settings.shortcut(Shortcut.OVERLAY)))
        self.overlays.toggle_action.setToolTip(
            f"Show the captions in a small always-on-top window ({self.settings.shortcut(Shortcut.OVERLAY)})"
        )
        self.overlays.presentation_action.setShortcut(QKeySequence(self.settings.shortcut(Shortcut.PRESENTATION)))
        self._shortcut_actions[Shortcut.START_PAUSE] = self.start_action
        self._shortcut_actions[Shortcut.OVERLAY] = self.overlays.toggle_action
        self._shortcut_actions[Shortcut.PRESENTATION] = self.overlays.presentation_action
        self.addAction(self.overlays.toggle_action)
        self.addAction(self.overlays.presentation_action)
        # the overlay is a window of its own: active (presentation mode takes the keyboard), the main window's keys
        # did nothing there but Esc (Space, F11, Ctrl+Shift+O: found in QA)
        for action in (self.start_action, self.pause_action, self.stop_action):
            self.overlays.overlay.addAction(action)
        self.overlays.overlay.addAction(self.overlays.toggle_action)
        self.overlays.overlay.addAction(self.overlays.presentation_action)

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
        self.sources.install(bar)
        bar.addSeparator()
        self.delay_label = _label("Delay", self)
        self.delay_label.setBuddy(self.delay_combo)  # a screen reader names the combo by its label
        self._delay_widgets = [bar.addWidget(self.delay_label), bar.addWidget(self.delay_combo)]
        bar.addSeparator()
        bar.addAction(self.overlays.toggle_action)
        bar.addAction(self.export_action)
        bar.addAction(self.sessions_action)
        self.toolbar = bar
        self._toolbar_fit = ToolbarFit(bar)  # icons alone where the names do not fit
        self.addToolBar(bar)
        self._refresh_icons()  # the overflow button's too

    def _order_tab_chain(self) -> None:
        """Tab follows the layout: the toolbar left to right (its buttons too: Start/Pause/Stop, Overlay, Export
        and Sessions were out of reach), the banner, the captions (or the welcome), then the history."""
        chain = []
        widget = self.nextInFocusChain()
        while widget is not self:
            chain.append(widget)
            widget = widget.nextInFocusChain()

        def inside(root: QWidget) -> list[QWidget]:
            return [w for w in chain if w is root or root.isAncestorOf(w)]

        ordered: list[QWidget] = []
        more = self.toolbar.findChild(QToolButton, "qt_toolbar_ext_button")  # what a narrow window hides
        if more is not None:
            more.setAccessibleName("More toolbar buttons")
            more.setToolTip("More toolbar buttons")
            more.clicked.connect(lambda: self._focus_revealed(tries=20))
        widgets = [self.toolbar.widgetForAction(action) for action in self.toolbar.actions()] + [more]
        for widget in widgets:
            if widget is None:
                continue
            if isinstance(widget, QToolButton) and widget.focusPolicy() == Qt.FocusPolicy.NoFocus:
                widget.setFocusPolicy(Qt.FocusPolicy.TabFocus)
            ordered += inside(widget)
        for part in (self.banner, self.caption_stack, self.history):
            ordered += inside(part)
        tab = [w for w in ordered if w.focusPolicy() & Qt.FocusPolicy.TabFocus]  # containers keep their place
        for first, second in zip(tab, tab[1:]):
            QWidget.setTabOrder(first, second)

    def _focus_revealed(self, tries: int = 0) -> None:
        """The toolbar's overflow button opened more rows: the keyboard goes to the first control they show (in Tab
        order they come before the button, so Tab from it went on past them to the captions). The rows are laid
        out (animated) after the click: looked for every 50 ms, ``tries`` times."""
        more = self.toolbar.findChild(QToolButton, "qt_toolbar_ext_button")
        if more is None or not more.isChecked():
            return
        for action in self.toolbar.actions():
            widget = self.toolbar.widgetForAction(action)
            if (
                widget is not None
                and widget.isVisible()
                and widget.isEnabled()
                and widget.y() > more.geometry().bottom()
                and widget.focusPolicy() & Qt.FocusPolicy.TabFocus
            ):
                widget.setFocus(Qt.FocusReason.TabFocusReason)
                return
        if tries > 0:
            QTimer.singleShot(50, lambda: self._focus_revealed(tries - 1))

    def _build_menus(self) -> None:
        menus = self.menuBar()
        file_menu = menus.addMenu("&File")
        file_menu.addAction(self.sessions_action)
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
        session_menu.addSeparator()
        session_menu.addMenu(self.sources.menu)

        model_menu = menus.addMenu("&Model")
        model_menu.addAction(self.open_model_action)
        model_menu.addAction(self.open_folder_action)
        self.backend_group = self._choices(
            model_menu.addMenu("Backend"),
            [(name, name, "") for name in BACKENDS],
            self.settings.value(Key.BACKEND),
            self._backend_chosen,
        )
        weights = self.settings.value(Key.WEIGHTS)
        self.weights_group = self._choices(
            model_menu.addMenu("Weights"),
            WEIGHT_ITEMS,
            weights if weights in WEIGHTS else "stored",
            self._weights_chosen,
        )

        view_menu = menus.addMenu("&View")
        view_menu.addMenu(self.overlays.menu)
        view_menu.addAction(self.overlays.presentation_action)
        view_menu.addSeparator()
        view_menu.addAction("Caption font\u2026").triggered.connect(self.choose_caption_font)
        view_menu.addAction(self.larger_action)
        view_menu.addAction(self.smaller_action)
        view_menu.addAction(self.default_size_action)
        self.theme_group = self._choices(
            view_menu.addMenu("Theme"),
            [(name, name.replace("-", " ").capitalize(), "") for name in THEMES],
            self.settings.value(Key.THEME),
            lambda action: self.set_theme(action.data()),
        )
        view_menu.addAction(self.find_action)

        help_menu = menus.addMenu("&Help")
        help_menu.addAction("Keyboard shortcuts").triggered.connect(self.show_shortcuts)
        help_menu.addAction("About livecap").triggered.connect(self._about)

    def _connect(self) -> None:
        c = self.controller
        self.start_action.triggered.connect(self.start_or_resume)
        self.pause_action.triggered.connect(self.pause)
        self.stop_action.triggered.connect(self.stop)
        self.open_model_action.triggered.connect(self.choose_model)
        self.open_folder_action.triggered.connect(self.choose_model_folder)
        self.replay_action.triggered.connect(self.choose_replay_file)
        self.export_action.triggered.connect(self.export_dialog)
        self.live_srt_action.triggered.connect(self._live_srt_toggled)
        self.copy_all_action.triggered.connect(self._copy_all)
        self.find_action.triggered.connect(self.history.focus_search)
        self.quit_action.triggered.connect(self.close)
        self.sessions_action.triggered.connect(self.show_sessions)
        self.larger_action.triggered.connect(lambda: self.change_caption_size(CAPTION_SIZE_STEP))
        self.smaller_action.triggered.connect(lambda: self.change_caption_size(-CAPTION_SIZE_STEP))
        self.default_size_action.triggered.connect(self.reset_caption_size)
        self.caption_view.size_step_requested.connect(
            lambda notches: self.change_caption_size(notches * CAPTION_SIZE_STEP)
        )
        self.welcome.model_ready.connect(self._welcome_model_ready)
        self.welcome.add_folder_requested.connect(self.choose_model_folder)
        self.welcome.more_models_requested.connect(self.choose_model)
        self.delay_combo.activated.connect(
            lambda: self.settings.set_value(Key.DELAY_MS, int(self.delay_combo.currentData()))
        )
        self.history.copied.connect(self._say_copied)

        c.state_changed.connect(self._on_state)
        c.model_changed.connect(self._on_model)
        c.model_failed.connect(self._on_model_failed)
        c.live_srt_stopped.connect(self._live_srt_stopped)
        c.input_waiting.connect(lambda: self.status.set_state("waiting"))  # not "Captioning": nothing is captured
        c.device_recovered.connect(lambda _d: self.status.set_state(self.controller.state))
        c.server_waiting.connect(lambda waiting: self.status.set_state("server" if waiting else self.controller.state))
        c.lines_reset.connect(self._on_lines_reset)
        c.line_committed.connect(self.caption_view.commit)
        c.line_committed.connect(self.history.add_line)
        c.line_committed.connect(self._update_export)
        c.partial_changed.connect(self.caption_view.set_partial)
        c.stats_changed.connect(self._on_stats)
        c.input_changed.connect(self.status.set_input)
        c.message.connect(self.show_message)
        c.silence_hint.connect(self._on_silence_hint)
        c.session_finished.connect(self._on_session_finished)
        c.session_failed.connect(lambda *_: self._on_state(self.controller.state))  # Start again after a failed one

    def _restore(self) -> None:
        s = self.settings
        if not placement.restore(self, s.value(Key.WINDOW_GEOMETRY)) and not placement.place_relative(
            self, s.value(Key.WINDOW_PLACE)
        ):  # none saved, or not on today's screens
            placement.fit(self, *FIRST_SIZE)
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

    def _choices(self, menu: QMenu, items, current: str, chosen) -> QActionGroup:
        """Checkable, exclusive actions in ``menu``, one per ``(value, text, tooltip or "")`` of ``items``, the one
        whose value is ``current`` checked; ``chosen(action)`` runs on a choice (``action.data()`` is its value)."""
        group = QActionGroup(self)
        for value, text, tip in items:
            action = menu.addAction(text)
            action.setCheckable(True)
            action.setChecked(value == current)
            action.setData(value)
            if tip:
                action.setToolTip(tip)
            group.addAction(action)
        menu.setToolTipsVisible(any(tip for _, _, tip in items))
        group.triggered.connect(chosen)
        return group

    @staticmethod
    def _show_choice(group: QActionGroup, value: str) -> None:
        """Check the action of ``group`` whose value is ``value`` (none when no action has it)."""
        for action in group.actions():
            action.setChecked(action.data() == value)

    # -- public commands ---------------------------------------------------------------------------
    def load_model(
        self, source: str, backend: str | None = None, bits: int | None = None, *, offer_download: bool = True
    ) -> None:
        """Load ``source`` on ``backend`` with its float weights at ``bits`` (defaults: the saved backend and
        weights; 0: as stored). The model is remembered (``Key.MODEL_SOURCE``) once it has loaded: a folder that
        fails to load does not replace the last model that worked. A catalog model that is not on this computer
        is offered for download on the welcome (progress, Cancel) and loaded when it is there; with
        ``offer_download`` False (unattended runs) the load downloads it without asking."""
        if offer_download and self._offer_download(source, backend, bits):
            return
        backend = backend or self.settings.value(Key.BACKEND)
        bits = weight_bits(self.settings.value(Key.WEIGHTS)) if bits is None else bits
        # the menus show what this load uses: a run's --backend/--weights, not only the saved choice
        self._show_choice(self.backend_group, backend)
        self._show_choice(self.weights_group, next((k for k, b in WEIGHTS.items() if b == bits), "stored"))
        local = Path(source).expanduser()
        if local.exists():  # remember folders absolutely; hub ids stay as they are
            source = str(local.resolve())
        self._requested = source  # what a change of backend or weights loads again, whether it loaded or not
        self.status.set_model(None, loading=True)
        self.controller.load_model(source, backend, bits)

    def choose_model(self) -> None:
        """Open the model dialog (catalog, downloads, custom folders) and load the chosen model."""
        from .model_dialog import choose_model

        if self.welcome.busy:  # the dialog would offer the same model a second download beside this one
            self.show_message("warning", "A model is downloading on the welcome page; cancel it or let it finish.")
            return
        source = choose_model(self, self.settings)
        if source:
            self.load_model(source)
        elif self.caption_stack.currentWidget() is self.welcome:
            self.welcome.refresh()  # the dialog may have downloaded or deleted the model the welcome offers

    def choose_model_folder(self) -> None:
        """Ask for a model folder directly and load it (not during a session or a load)."""
        if self.controller.state in ("running", "paused", "loading") or self.controller.starting:
            return
        if self.welcome.busy:  # the download would load its model over the folder's when it ends, mid-session too
            self.show_message("warning", "A model is downloading on the welcome page; cancel it or let it finish.")
            return
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

    def start_file(self, path: str, speed: float = 1.0) -> None:
        """Replay ``path`` as if it were live (``speed`` times real time)."""
        self.start_session(self._session_spec(input_file=path, speed=speed))

    def start_session(self, spec: SessionSpec) -> None:
        self._held_focus = QApplication.focusWidget()  # Space on Start: the keyboard goes on to Pause
        self.banner.dismiss()
        self.status.reset_session()
        self.controller.start(spec)
        self._on_state(self.controller.state)  # starting: Start, Stop and model changes wait for the worker

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
            self.controller.lines,
            folder=folder,
            fmt_key=self.settings.value(Key.EXPORT_FORMAT),
            parent=self,
            audio_end=self.controller.audio_seconds,
        )
        if dialog.exec() and dialog.saved_path is not None:
            self.settings.set_value(Key.EXPORT_FOLDER, str(dialog.saved_path.parent))
            self.settings.set_value(Key.EXPORT_FORMAT, dialog.format.key)
            self.status.showMessage(f"Saved the transcript to {dialog.saved_path}.", 8000)
        return dialog

    def show_sessions(self) -> SessionsWindow | None:
        """Show the sessions library (every kept session), created on first use."""
        if self.controller.store is None:
            return None
        if self.sessions_window is None:
            self.sessions_window = SessionsWindow(
                self.controller.store, self.settings, self.controller, child_args=self.sessions_child_args
            )
        self.sessions_window.refresh()
        self.sessions_window.show()
        self.sessions_window.raise_()
        self.sessions_window.activateWindow()
        return self.sessions_window

    def refresh_devices(self, rescan: bool = True) -> None:
        """Fill the source pickers (``rescan``: make PortAudio look for new devices; only while idle)."""
        self.sources.refresh(rescan, idle=self.controller.state in ("idle", "no-model", "loading"))

    def choose_caption_font(self) -> None:
        ok, font = QFontDialog.getFont(self.caption_view.font(), self, "Caption font")
        if ok:
            self.settings.set_value(Key.CAPTION_FONT, font.toString())
            self.settings.set_value(Key.CAPTION_FONT_SIZE, max(font.pointSize(), 1))
            self._apply_caption_font()

    def change_caption_size(self, step: int) -> int:
        """Make the caption text ``step`` points larger (or smaller), within ``CAPTION_SIZES``; remembered. A size
        outside that range (from the font dialog or the INI file) never jumps the other way: Larger keeps 120 pt,
        Smaller keeps 7 pt."""
        lo, hi = CAPTION_SIZES
        current = self.caption_view.font().pointSize()
        if current <= 0:  # a font sized in pixels
            current = self.settings.value(Key.CAPTION_FONT_SIZE)
        size = current + step
        size = min(size, max(hi, current)) if step > 0 else max(size, min(lo, current))
        stored = self.settings.value(Key.CAPTION_FONT)
        font = QFont()
        if stored and font.fromString(stored):
            font.setPointSize(size)
            self.settings.set_value(Key.CAPTION_FONT, font.toString())
        self.settings.set_value(Key.CAPTION_FONT_SIZE, size)
        self._apply_caption_font()
        self.status.showMessage(f"Caption text {size} pt.", 2000)
        return size

    def reset_caption_size(self) -> int:
        """Back to the default caption text size (Ctrl+0); remembered."""
        default = Key.CAPTION_FONT_SIZE.value[1]
        current = self.caption_view.font().pointSize()
        return self.change_caption_size(default - (current if current > 0 else default))

    def set_theme(self, name: str) -> None:
        app = QApplication.instance()
        if isinstance(app, QApplication):
            name = apply_theme(app, name)
        self.settings.set_value(Key.THEME, name)
        self.caption_view.set_tail_color(tail_color(name))
        self._refresh_icons()

    def offer_recovery(self, handled: Path | None = None) -> RecoveredSession | None:
        """If the last session did not end cleanly, offer its lines in the banner; once it is recovered or
        discarded, the one before it, if any (``handled``: the journal just handled, not offered again where it
        could not be marked so)."""
        recovered = self.controller.pending_recovery()
        if recovered is None or recovered.path == handled:
            return None
        n = len(recovered.lines)
        when = recovered.started.replace("T", " ") or "an earlier session"
        skipped = recovered.unreadable
        note = f" ({skipped} unreadable line{'s were' if skipped != 1 else ' was'} skipped)" if skipped else ""
        self.banner.show_message(
            "warning",
            f"A session was not closed (livecap stopped during it, or its disk filled up); "
            f"{n} line{'s' if n != 1 else ''} from {when} {'were' if n != 1 else 'was'} saved{note}.",
            [
                ("Recover", lambda: (self._recover(recovered), self.offer_recovery(recovered.path))),
                ("Discard", lambda: (self.controller.discard_recovery(recovered), self.offer_recovery(recovered.path))),
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

    def shortcut_rows(self) -> list[tuple[str, str, str]]:
        """``(keys, what it does, where it is in the menus)`` for every shortcut."""
        rows = []
        for s in Shortcut:
            action = self._shortcut_actions.get(s)
            where = self._menu_path(action) if action is not None else ""
            rows.append((self.settings.shortcut(s), s.value[2], where))
        return rows

    def show_shortcuts(self) -> InfoDialog:
        """Help > Keyboard shortcuts: every key, what it does and its menu item (a dialog that fits the screen),
        then the keys that belong to one place (``OTHER_KEYS``)."""
        rows = "".join(
            f"<tr><td><b>{keys}</b></td><td>{what}</td><td>{where}</td></tr>"
            for keys, what, where in self.shortcut_rows()
        )
        larger = self.settings.shortcut(Shortcut.LARGER_TEXT)
        rows = rows.replace(f"<b>{larger}</b>", f"<b>{larger}</b> or <b>Ctrl+=</b>", 1)  # both sequences work
        rows += "<tr><td colspan=3><br><b>In one place</b></td></tr>" + "".join(
            f"<tr><td><b>{keys}</b></td><td>{what}</td><td>{where}</td></tr>" for keys, what, where in OTHER_KEYS
        )
        dialog = InfoDialog(self, "Keyboard shortcuts", f"<table cellspacing=6>{rows}</table>")
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.open()
        return dialog

    # -- handlers ------------------------------------------------------------------------------------
    def _sounddevice(self) -> Any:
        if self._sd is None:
            try:
                self._sd = load_sounddevice()
            except ServerSilent:  # PortAudio's start would wait for the server: waited for on a thread
                if self._sound_wait is None:  # (what it finds comes through the event loop, after __init__)
                    self._sound_wait = SoundSystemWait(self, load_sounddevice)
                    self._sound_wait.ready.connect(self._on_sound_system)
                    self._sound_wait.start()
                    self.banner.show_message(
                        "warning", f"{SERVER_SILENT}; the inputs are listed once it answers.", key=SOUND_SERVER_KEY
                    )
                return None
            except AudioError:  # PortAudio is missing
                return None
        return self._sd

    def _on_sound_system(self, sd: Any) -> None:
        """The sound server answered and PortAudio started (``sd`` None: it is missing): the pickers are filled."""
        self._sound_wait = None
        self._sd = sd
        self.sources.set_audio(self._audio_system())
        self.banner.dismiss(SOUND_SERVER_KEY)

    def _audio_system(self) -> Any:
        if self._audio is None:
            sd = self._sounddevice()
            if sd is not None:
                from app.sources import AudioSystem

                self._audio = AudioSystem(sd)
        return self._audio

    def _session_spec(self, input_file: str | None = None, speed: float = 1.0) -> SessionSpec:
        options: dict[str, Any] = {}
        model = self.controller.model
        if model is not None and model.has_delay:
            options["delay_ms"] = int(self.delay_combo.currentData())
        s = self.sources
        return SessionSpec(input_file, speed, s.device, options, source=s.kind, output=s.output, names=s.names)

    def pause(self) -> None:
        """Pause the session. What was captured is transcribed first (a backlog can take seconds): until the
        session is paused the window says so, and Start, Pause and Stop wait."""
        if self.controller.state == "running":
            self._hold("Pausing")
            self.controller.pause()

    def stop(self) -> None:
        """End the session. What was captured but not yet transcribed still is (a backlog can take seconds):
        until the session has ended the window says so, and Start, Pause and Stop wait."""
        if self.controller.state in ("running", "paused"):
            self._hold("Stopping")
            self.controller.stop()

    def _hold(self, doing: str) -> None:
        """Start, Pause and Stop wait while the captured backlog is transcribed; the status bar says so."""
        self._held_focus = QApplication.focusWidget()  # a session button that had the keyboard gets it back
        for action in (self.start_action, self.pause_action, self.stop_action):
            action.setEnabled(False)
        self.status.showMessage(f"{doing}: transcribing what was already captured\u2026")

    @Slot(str)
    def _on_state(self, state: str) -> None:
        starting = self.controller.starting  # a start the worker has not answered yet counts as a session
        idle = state == "idle" and not starting
        active = state in ("running", "paused") or starting
        start, pause, stop = (
            self.toolbar.widgetForAction(a) for a in (self.start_action, self.pause_action, self.stop_action)
        )
        had, self._held_focus = self._held_focus or QApplication.focusWidget(), None
        self.start_action.setEnabled(idle or state == "paused")
        self.start_action.setText("Resume" if state == "paused" else "Start")
        self.pause_action.setEnabled(state == "running")
        self.stop_action.setEnabled(active and not starting)
        # A model can change only between sessions, and not while one loads: a choice made during a load
        # would be saved and checked while the model loaded as it was asked for.
        can_change_model = not active and state != "loading"
        self.model_button.setEnabled(can_change_model)
        self.open_model_action.setEnabled(can_change_model)
        self.open_folder_action.setEnabled(can_change_model)
        self.backend_group.setEnabled(can_change_model)
        self.weights_group.setEnabled(can_change_model)
        self.sources.set_enabled(not active)
        self.replay_action.setEnabled(idle)
        model = self.controller.model
        has_delay = model is not None and model.has_delay
        for action in self._delay_widgets:
            action.setVisible(has_delay)
        self.delay_combo.setEnabled(has_delay and not active)
        if state == "no-model":
            self.start_action.setToolTip("Choose a model first (Model \u25b8 Models\u2026)")
        else:
            verb = "Resume" if state == "paused" else "Start"
            self.start_action.setToolTip(f"{verb} captioning ({self.settings.shortcut(Shortcut.START_PAUSE)})")
        suffix = {
            "running": " \u2014 captioning",
            "paused": " \u2014 paused",
            "loading": " \u2014 loading model",
        }
        self.setWindowTitle("livecap" + suffix.get(state, ""))
        if state != "running":  # paused or stopped: no audio is read
            self.sources.clear_levels()
        self.caption_view.show_state("starting" if starting and state == "idle" else state)  # not "Ready. Press"
        self.status.set_state(state)
        if state != "running" and self.status.currentMessage().startswith("Pausing"):
            self.status.clearMessage()
        self._show_welcome(state == "no-model")
        self._keep_keyboard(had, [(start, pause), (pause, start), (stop, start)])

    def _keep_keyboard(self, had: QWidget | None, pairs: list[tuple[QWidget, QWidget]]) -> None:
        """A session button that had the keyboard and went grey hands it to the one that now does the opposite
        (Space on Pause, Space again: Resume); Qt had moved it on to the next button (Overlay: the next Space hid
        the overlay). While neither is usable (starting, pausing) it waits; one usable again takes it back."""
        for pressed, then in pairs:
            if had is not pressed:
                continue
            if pressed.isEnabled():
                if QApplication.focusWidget() is not pressed:
                    pressed.setFocus(Qt.FocusReason.OtherFocusReason)  # a start that failed: Start again
            elif then.isEnabled() and then.isVisible():
                then.setFocus(Qt.FocusReason.OtherFocusReason)
            else:
                self._held_focus = pressed  # the state that enables the other one is still to come
            return

    @Slot(object)
    def _on_model(self, info: Any) -> None:
        self.status.set_model(info)
        if info is not None:
            self._working = info.source
            self.settings.set_value(Key.MODEL_SOURCE, info.source)
            self.banner.dismiss(LOAD_FAILED_KEY)  # an earlier load's failure no longer stands above a working model
        if info is None:
            self.model_button.setText("Choose model\u2026")
            self.model_button.setAccessibleName("Model: none chosen")
        else:
            name = info.name if len(info.name) <= 28 else info.name[:27] + "\u2026"
            self.model_button.setText(name)
            self.model_button.setAccessibleName(f"Model: {info.name}")
            self.model_button.setToolTip(f"{info.source}\nClick to choose another model")
        self._on_state(self.controller.state)

    def _on_lines_reset(self) -> None:
        self.caption_view.set_lines(self.controller.lines)
        self.history.set_lines(self.controller.lines)
        self._update_export()

    def _update_export(self) -> None:
        """Export and Copy need lines: with none they would write an empty file or empty the clipboard."""
        has_lines = bool(self.controller.lines)
        self.export_action.setEnabled(has_lines)
        self.copy_all_action.setEnabled(has_lines)
        self.export_action.setToolTip(
            f"{Shortcut.EXPORT.value[2]} ({self.settings.shortcut(Shortcut.EXPORT)})"
            if has_lines
            else "Nothing to export yet: the transcript is empty"
        )

    @Slot(object)
    def _on_stats(self, stats: Stats) -> None:
        self.sources.show_levels(stats.level_db, stats.tracks)
        self.status.set_stats(stats)
        if stats.level_db > SILENT_DB:  # audio arrives: the "pure silence" hint no longer holds
            self.banner.dismiss("silence")

    def _on_silence_hint(self) -> None:
        """The controller just put its "pure silence" warning in the banner: tag it so that it can go again."""
        self.banner.key = "silence"

    @Slot(str)
    def _on_session_finished(self, reason: str) -> None:
        self.caption_view.flush()
        self.status.end_session()
        self.banner.dismiss("silence")
        n = len(self.controller.lines)
        if self.controller.store is None:
            kept = ""
        elif self.controller.session_kept:
            kept = " Kept in Sessions."
        else:  # the journal failed (the banner said why): the lines are only in this window
            kept = " Not kept in Sessions: export it (File \u25b8 Export transcript)."

        stats = self.controller.last_stats
        if stats is not None and stats.dropped_s >= 1.0:  # the label that said so goes with the session
            kept += f" {stats.dropped_s:.0f} s of audio could not be transcribed in time (the model is too slow)."
        if reason == "input ended":
            self.status.showMessage(f"The file ended; {n} line(s) transcribed.{kept}", 8000)
        elif reason == "stopped":
            self.status.showMessage(f"Stopped; {n} line(s) in the transcript.{kept}", 8000)

    def _backend_chosen(self, action: QAction) -> None:
        self.settings.set_value(Key.BACKEND, str(action.data()))
        self._reload_model()

    def _weights_chosen(self, action: QAction) -> None:
        self.settings.set_value(Key.WEIGHTS, str(action.data()))
        self._reload_model()

    def _on_model_failed(self, _text: str, _code: int) -> None:
        """Keep the last model that loaded as the remembered one (the model dialog saved its choice already); the
        banner says why, the status bar no longer says it is loading."""
        if self.status.currentMessage().startswith(LOADING):
            self.status.clearMessage()
        if self.banner.text() == _text:  # the controller's error message, shown just before: dismissed by a load
            self.banner.key = LOAD_FAILED_KEY
        if self._working:
            self.settings.set_value(Key.MODEL_SOURCE, self._working)

    def _reload_model(self) -> None:
        """Load the last requested model again with the saved backend and weights, unless a session runs. One no
        longer on this computer (deleted in the model dialog, its folder gone) is not loaded over the model in
        memory (the load downloaded a catalog model behind "Loading the model...", without progress or Cancel,
        and a failure dropped the model that worked): the banner says so and the loaded model stays."""
        source = self._requested or self.settings.value(Key.MODEL_SOURCE)
        if not source or self.controller.state not in ("idle", "no-model"):
            return
        gone = self._not_here(source) if self.controller.model is not None else None
        if gone:
            self.show_message(
                "warning",
                f"{gone} is no longer on this computer: the new setting applies once it is downloaded or chosen "
                "again (Model \u25b8 Models\u2026); the loaded model stays in use until then.",
            )
            return
        self.load_model(source)

    @staticmethod
    def _not_here(source: str) -> str | None:
        """The name of ``source`` when it is no longer on this computer (a catalog model not fully downloaded, a
        folder that went), else None (also for a hub id outside the catalog: the loader says what is wrong)."""
        path = Path(source).expanduser()
        if path.is_absolute():
            return None if path.exists() else path.name
        entry = _missing_catalog_model(source)
        return entry.name if entry is not None else None

    def _live_srt_stopped(self) -> None:
        """The live SRT file could not be written and is off: the menu says so (it stayed checked)."""
        self.live_srt_action.setChecked(False)
        self._live_srt_toggled(False)

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
        lines = self.controller.lines
        if lines:  # with none the clipboard keeps what it holds
            QGuiApplication.clipboard().setText("\n".join(line.text for line in lines))
        self._say_copied(len(lines))

    def _say_copied(self, n: int) -> None:
        self.status.showMessage(f"Copied {n} line(s)." if n else "Nothing to copy yet.", 3000)

    def _recover(self, recovered: RecoveredSession) -> None:
        self.controller.recover(recovered)
        self.status.showMessage(
            f"Recovered {len(recovered.lines)} line(s); they stay in Sessions (File \u25b8 Sessions).", 10000
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
        # The toolbar's overflow button: the platform's black "»" vanishes on the dark and high-contrast themes.
        toolbar = getattr(self, "toolbar", None)  # None while the actions are made, before the toolbar
        extension = toolbar.findChild(QToolButton, "qt_toolbar_ext_button") if toolbar is not None else None
        if extension is not None:
            extension.setIcon(_overflow_icon(palette.color(QPalette.ColorRole.ButtonText)))

    def _show_welcome(self, on: bool) -> None:
        """The welcome (no model yet) or the captions in the caption pane."""
        showing = self.caption_stack.currentWidget() is self.welcome
        if on and not showing:
            self.welcome.refresh()
            self.caption_stack.setCurrentWidget(self.welcome)
            self.welcome.focus_first()
        elif not on and showing:
            focus = QApplication.focusWidget()
            self.caption_stack.setCurrentWidget(self.caption_view)
            if focus is None or self.welcome.isAncestorOf(focus):  # keep Space one key away from Start
                self.caption_view.setFocus(Qt.FocusReason.OtherFocusReason)

    def _offer_download(self, source: str, backend: str | None, bits: int | None) -> bool:
        """Whether ``source`` is a catalog model missing from this computer, now offered on the welcome (the
        load then ran the whole download inside "Loading the model...", without progress or Cancel)."""
        from engine import hub

        if self.controller.model is not None or Path(source).expanduser().exists() or hub.offline():
            return False
        entry = _missing_catalog_model(source)
        if entry is None:
            return False
        self._after_download = (backend, bits)
        self.welcome.offer(entry)
        self._show_welcome(True)
        self.welcome.focus_first()
        return True

    def _welcome_model_ready(self, source: str) -> None:
        backend, bits = self._after_download
        self._after_download = (None, None)
        if self.controller.state in ("running", "paused") or self.controller.starting:  # never mid-session
            self.show_message("info", f"{Path(source).name} is downloaded; choose it in Model ▸ Models….")
            return
        self.load_model(source, backend, bits)
        self.caption_view.setFocus(Qt.FocusReason.OtherFocusReason)

    def _menu_path(self, action: QAction) -> str:
        """Where ``action`` is in the menu bar, e.g. "Model \u25b8 Models\u2026" ("" when in no menu)."""

        def walk(menu_action: QAction, trail: list[str]) -> str:
            menu = menu_action.menu()
            if menu is None:
                return ""
            for child in menu.actions():
                name = child.text().replace("&", "")
                if child is action:
                    return " \u25b8 ".join([*trail, name])
                found = walk(child, [*trail, name])
                if found:
                    return found
            return ""

        for top in self.menuBar().actions():
            found = walk(top, [top.text().replace("&", "")])
            if found:
                return found
        return ""

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

    def event(self, event: QEvent) -> bool:
        """Space presses a focused button or opens a focused list rather than starting captioning, so every
        control works from the keyboard."""
        if event.type() == QEvent.Type.ShortcutOverride and isinstance(event, QKeyEvent):
            focus = QApplication.focusWidget()
            if event.key() == Qt.Key.Key_Space and isinstance(focus, (QAbstractButton, QComboBox)):
                event.accept()
                return True
        return super().event(event)

    def closeEvent(self, event: QCloseEvent) -> None:
        """Save the layout, end the session cleanly (its lines are journaled), stop the worker."""
        s = self.settings
        s.set_value(Key.WINDOW_GEOMETRY, bytes(self.saveGeometry().data()))
        if not self.isMaximized() and not self.isFullScreen():  # the geometry keeps those states; shares would not
            s.set_value(Key.WINDOW_PLACE, placement.relative(self))
        s.set_value(Key.SPLITTER_STATE, bytes(self.splitter.saveState().data()))
        self.overlays.close()
        if self._sound_wait is not None:
            self._sound_wait.stop()
        if self.sessions_window is not None:
            self.sessions_window.cancel_retranscribe()
            self.sessions_window.close()
        self.welcome.cancel()
        running = self.controller.state in ("running", "paused")
        stopped = self.controller.shutdown()
        if running and not stopped:
            log.error("the engine did not end the session in progress on quit")
            print(
                "livecap: the engine did not stop in time; the lines of the session in progress so far are kept "
                "and offered for recovery at the next start.",
                file=sys.stderr,
            )
        elif running and self.controller.last_session_id and self.controller.store is not None:
            where = self.controller.store.folder / f"{self.controller.last_session_id}.jsonl"
            log.info("the session in progress ended on quit; it is kept in Sessions (%s)", where)
            print(f"livecap: the session in progress ended and is kept in Sessions ({where}).", file=sys.stderr)
        s.sync()
        super().closeEvent(event)


def _overflow_icon(color: QColor) -> QIcon:
    """A "»" (two chevrons) in ``color``, for the toolbar's overflow button."""
    icon = QIcon()
    for size in (12, 16, 24, 32):
        pix = QPixmap(size, size)
        pix.fill(Qt.GlobalColor.transparent)
        p = QPainter(pix)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        p.setPen(QPen(color, max(1.5, size / 8), Qt.PenStyle.SolidLine, Qt.PenCapStyle.RoundCap))
        s = float(size)
        for x in (0.2 * s, 0.5 * s):
            p.drawPolyline([QPointF(x, 0.25 * s), QPointF(x + 0.25 * s, 0.5 * s), QPointF(x, 0.75 * s)])
        p.end()
        icon.addPixmap(pix)
    return icon


def _label(text: str, parent: QWidget) -> QLabel:
    label = QLabel(text, parent)
    label.setContentsMargins(6, 0, 4, 0)
    return label
