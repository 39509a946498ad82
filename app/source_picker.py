"""The Source picker: System audio / Microphone / Both, the output and microphone pickers, and the level
meters (one per input under Both). GUI thread only.

The widgets live in the main window's toolbar (``install``) and the choice is mirrored in the Session menu
(``menu``). Every choice is saved in ``Settings`` at once (``Key.SOURCE``, ``Key.OUTPUT``, ``Key.DEVICE``);
on a first run the source is System audio where this machine can capture it, else the microphone. The output
and microphone lists are filled again (PortAudio made to look again) each time one of them opens, so a device
plugged in since is there; they are disabled during a session, when a re-scan would stop it.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, QSize, Qt, Signal
from PySide6.QtGui import QAction, QActionGroup
from PySide6.QtWidgets import (
    QComboBox,
    QGridLayout,
    QLabel,
    QMenu,
    QStyle,
    QStyleOptionComboBox,
    QStylePainter,
    QToolBar,
    QToolButton,
    QWidget,
)

from app.capture import refresh_devices
from app.level_meter import LevelMeter
from app.settings import Key, Settings
from app.sources import BOTH, DEFAULT_OUTPUT_LABEL, KIND_LABELS, KINDS, MIC, SERVER_ALIASES, SYSTEM
from app.sources.base import SERVER_SILENT, START_WHEN_SERVER_ANSWERS, ServerSilent
from engine.errors import AudioError

log = logging.getLogger(__name__)

DEVICE_COMBO_CHARS = 10  # the toolbar's device pickers show about this many characters
WAIT_POLL_S = 0.5  # how often the wait asks (the pulse backend answers "silent" at once for 2 s after a miss)
WAITING_ENTRY = "Waiting for the sound server"  # the microphone picker's one entry until the server answers
NOT_CONNECTED = "notConnectedEntry"  # a picker's property: the index of its entry for a chosen device not connected

HEADPHONES_TIP = (
    "Both mixes the microphone and what the computer plays; use headphones, or remote voices are heard twice."
)


class SoundSystemWait(QObject):
    """Asks, on a thread of its own, until the sound server answers, and then starts PortAudio there (imports
    ``sounddevice``, which would wait for a server that does not answer: livecap began while it was stopped or
    hung). ``ready`` carries the module, or None when PortAudio is missing; after ``stop`` nothing more comes."""

    ready = Signal(object)

    def __init__(self, parent: QObject, load: Callable[[], Any]) -> None:
        super().__init__(parent)
        self._load = load
        self._stop = threading.Event()

    def start(self) -> None:
        threading.Thread(target=self._run, name="sound-server-wait", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                sd = self._load()
            except ServerSilent:  # asked for a second at most; again after the server's back-off
                self._stop.wait(WAIT_POLL_S)
                continue
            except AudioError:
                sd = None
            if not self._stop.is_set():
                with contextlib.suppress(RuntimeError):  # the window went meanwhile
                    self.ready.emit(sd)
            return


class SourcePicker(QObject):
    """Owns the source widgets; ``kind``, ``device`` and ``output`` give the current choice."""

    changed = Signal()
    notice = Signal(str)  # a sentence for the user about the lists (the sound server does not answer)

    def __init__(self, parent: QWidget, settings: Settings, audio: Any) -> None:
        super().__init__(parent)
        self.settings = settings
        self.audio = audio  # app.sources.AudioSystem, or None when PortAudio is missing or not started yet
        self.waiting = False  # no audio yet: the sound server does not answer (PortAudio would wait for it)
        self._unavailable: str | None = None
        self.source_combo = QComboBox(parent)
        self.source_combo.setObjectName("sourceCombo")
        self.source_combo.setAccessibleName("Audio source")
        for kind in KINDS:
            self.source_combo.addItem(KIND_LABELS[kind], kind)
        self.source_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.output_combo = _combo(parent, "outputCombo", "Output whose sound is captioned")
        self.device_combo = _combo(parent, "deviceCombo", "Microphone")
        for box in (self.output_combo, self.device_combo):
            box.opening = lambda: self.refresh(rescan=True)
        self.refresh_button = QToolButton(parent)
        self.refresh_button.setObjectName("refreshDevices")
        self.refresh_button.setIcon(parent.style().standardIcon(QStyle.StandardPixmap.SP_BrowserReload))
        self.refresh_button.setToolTip("Refresh the lists of outputs and microphones")
        self.refresh_button.setAccessibleName("Refresh the lists of outputs and microphones")
        self.refresh_button.clicked.connect(lambda: self.refresh(rescan=True))
        self.meters = QWidget(parent)
        grid = QGridLayout(self.meters)
        grid.setContentsMargins(4, 0, 4, 0)
        grid.setVerticalSpacing(2)
        self.level_meter = LevelMeter(self.meters)
        self.system_meter = LevelMeter(self.meters)
        self.system_meter.setObjectName("systemLevelMeter")
        self.system_meter.set_name("System audio level")
        self.mic_label = _small_label("Mic", self.meters)
        self.system_label = _small_label("System", self.meters)
        grid.addWidget(self.mic_label, 0, 0)
        grid.addWidget(self.level_meter, 0, 1)
        grid.addWidget(self.system_label, 1, 0)
        grid.addWidget(self.system_meter, 1, 1)
        self.menu = QMenu("Audio source")
        self._group = QActionGroup(self)
        for kind in KINDS:
            action = self.menu.addAction(KIND_LABELS[kind])
            action.setCheckable(True)
            action.setData(kind)
            self._group.addAction(action)
        self._group.triggered.connect(lambda action: self.set_kind(str(action.data())))
        self.source_combo.activated.connect(lambda _: self.set_kind(str(self.source_combo.currentData())))
        self.output_combo.activated.connect(self._output_chosen)
        self.device_combo.activated.connect(self._device_chosen)
        self._toolbar_actions: dict[str, QAction] = {}

    # -- placement -----------------------------------------------------------------------------------
    def install(self, bar: QToolBar) -> None:
        """Add the widgets to ``bar``."""
        label = QLabel("Source", bar)
        label.setBuddy(self.source_combo)  # a screen reader names the combo by its label (Linux: else its value)
        label.setContentsMargins(6, 0, 4, 0)
        bar.addWidget(label)
        bar.addWidget(self.source_combo)
        self._toolbar_actions = {
            "output": bar.addWidget(self.output_combo),
            "device": bar.addWidget(self.device_combo),
        }
        bar.addWidget(self.refresh_button)
        bar.addWidget(self.meters)
        self._apply_kind()

    # -- choice --------------------------------------------------------------------------------------
    @property
    def kind(self) -> str:
        return str(self.source_combo.currentData())

    @property
    def device(self) -> str | None:
        return str(self.device_combo.currentData() or "") or None

    @property
    def output(self) -> str | None:
        return str(self.output_combo.currentData() or "") or None

    def set_kind(self, kind: str, save: bool = True) -> None:
        """Choose ``kind`` ("system" | "mic" | "both"); saved unless ``save`` is False."""
        index = self.source_combo.findData(kind)
        if index < 0:
            return
        self.source_combo.setCurrentIndex(index)
        if save:
            self.settings.set_value(Key.SOURCE, kind)
        self._apply_kind()
        self.changed.emit()

    def choose(self, combo: str, ident: str) -> None:
        """Select ``ident`` in the ``"device"`` or ``"output"`` picker for this run (not saved)."""
        box = self.device_combo if combo == "device" else self.output_combo
        index = box.findData(ident)
        if index < 0:
            box.addItem(ident, ident)
            index = box.count() - 1
        box.setCurrentIndex(index)

    def _apply_kind(self) -> None:
        kind = self.kind
        for action in self._group.actions():
            action.setChecked(action.data() == kind)
        if self._toolbar_actions:
            self._toolbar_actions["output"].setVisible(kind in (SYSTEM, BOTH))
            self._toolbar_actions["device"].setVisible(kind in (MIC, BOTH))
        both = kind == BOTH
        for widget in (self.system_meter, self.mic_label, self.system_label):
            widget.setVisible(both)
        self.level_meter.set_name("Microphone level" if both else "Input level")
        self.source_combo.setToolTip(HEADPHONES_TIP if both else "What to caption")

    def set_enabled(self, enabled: bool) -> None:
        for widget in (self.source_combo, self.output_combo, self.device_combo, self.refresh_button):
            widget.setEnabled(enabled)
        self.menu.setEnabled(enabled)

    def show_levels(self, level_db: float, tracks: dict[str, float] | None) -> None:
        """The mixed level, or each input's under Both."""
        if tracks and self.kind == BOTH:
            self.level_meter.set_level(tracks.get("mic", -90.0))
            self.system_meter.set_level(tracks.get("system", -90.0))
        else:
            self.level_meter.set_level(level_db)

    def clear_levels(self) -> None:
        self.level_meter.set_level(-90)
        self.system_meter.set_level(-90)

    # -- lists ---------------------------------------------------------------------------------------
    def refresh(self, rescan: bool = False, idle: bool = True) -> None:
        """Fill the pickers from the sound system (``rescan``: make PortAudio look again; only ``idle``)."""
        audio = self.audio
        if audio is None:
            self.device_combo.clear()
            self.device_combo.addItem(WAITING_ENTRY if self.waiting else "No audio system", "")
            self._unavailable = self.no_audio()
            self._fill_outputs([])
            self._restore_kind()
            return
        if audio.server_silent(fresh=True):  # asked (a second at most): its lists now would be empty, not what is there
            self.notice.emit(f"{SERVER_SILENT}; the outputs and microphones are listed as they were.")
            return
        if rescan and idle and audio.sd is not None:
            try:
                refresh_devices(audio.sd)
            except Exception:
                log.warning("device rescan failed", exc_info=True)
        self._unavailable = audio.system_unavailable()
        self._fill_outputs(audio.outputs() if self._unavailable is None else [])
        self._fill_mics(audio.microphones())
        self._restore_kind()

    def no_audio(self) -> str | None:
        """Why nothing can be captured now (one sentence), or None when the sound system is at hand."""
        if self.audio is not None:
            return None
        if self.waiting:
            return START_WHEN_SERVER_ANSWERS
        return "Audio capture is unavailable because PortAudio is not installed."

    def set_audio(self, audio: Any) -> None:
        """The sound system came (``audio``: an ``AudioSystem``, None when PortAudio is missing): fill the pickers."""
        self.audio, self.waiting = audio, False
        self.refresh()

    def _restore_kind(self) -> None:
        # while the sound server does not answer, the saved source stays chosen (nothing can start anyway)
        unavailable = None if self.waiting else self._unavailable
        model = self.source_combo.model()
        for kind in (SYSTEM, BOTH):
            item = model.item(self.source_combo.findData(kind))  # type: ignore[attr-defined]
            item.setEnabled(unavailable is None)
            item.setToolTip(unavailable or "")
            action = next(a for a in self._group.actions() if a.data() == kind)
            action.setEnabled(unavailable is None)
            action.setToolTip(unavailable or "")
        saved = self.settings.value(Key.SOURCE)
        if saved not in KINDS:
            saved = SYSTEM if unavailable is None else MIC
        if saved in (SYSTEM, BOTH) and unavailable is not None:
            saved = MIC
        self.set_kind(saved, save=False)

    def _fill_outputs(self, outputs: list[Any]) -> None:
        wanted = self.settings.value(Key.OUTPUT)
        box = self.output_combo
        box.clear()
        box.addItem(DEFAULT_OUTPUT_LABEL, "")
        for out in outputs:
            box.addItem(out.name, out.id)
        _select(box, wanted, self.settings.value(Key.OUTPUT_NAME))
        _fit_device_combo(box)  # its width was fitted while only the first entry was there

    def _fill_mics(self, mics: list[Any]) -> None:
        wanted = self.settings.value(Key.DEVICE)
        if wanted in SERVER_ALIASES and all(m.id != wanted for m in mics):
            wanted = ""  # ALSA's name for the sound server, chosen before it left the list: "System default" is it
        box = self.device_combo
        box.clear()
        box.addItem("System default", "")
        for mic in mics:
            box.addItem(mic.name, mic.id)
        _select(box, wanted, self.settings.value(Key.DEVICE_NAME))
        if not mics:
            box.setItemText(0, "No microphone found")
        _fit_device_combo(box)  # its width was fitted while only the first entry was there

    def _output_chosen(self) -> None:
        _save_choice(self.settings, self.output_combo, Key.OUTPUT, Key.OUTPUT_NAME)

    def _device_chosen(self) -> None:
        _save_choice(self.settings, self.device_combo, Key.DEVICE, Key.DEVICE_NAME)

    @property
    def names(self) -> dict[str, str]:
        """What the chosen microphone and output were called when they were chosen, by id (for the messages
        while one of them is not connected: its id means nothing to a user)."""
        s = self.settings
        pairs = ((s.value(Key.DEVICE), s.value(Key.DEVICE_NAME)), (s.value(Key.OUTPUT), s.value(Key.OUTPUT_NAME)))
        return {key: name for key, name in pairs if key and name}


class _DeviceCombo(QComboBox):
    """A device picker that calls ``opening`` just before its list shows, and that narrows again when its
    minimum contents length does (``_fit_device_combo``): QComboBox forgets its cached size hint then but not its
    minimum size hint, so a picker widened for a one-entry message ("Waiting for the sound server") stayed that wide
    in the toolbar once the devices were listed, and pushed Export and Sessions behind the overflow."""

    opening: Callable[[], None] | None = None

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt's name
        return self.sizeHint()  # the same for AdjustToMinimumContentsLengthWithIcon, and recomputed when it changes

    def shown_text(self) -> str:
        """The current entry as the picker draws it: elided with "…" where it is wider than its field (a name cut
        mid-word, "Default output (fc", read as a different device)."""
        opt = QStyleOptionComboBox()
        self.initStyleOption(opt)
        field = self.style().subControlRect(
            QStyle.ComplexControl.CC_ComboBox, opt, QStyle.SubControl.SC_ComboBoxEditField, self
        )
        room = field.width() - (opt.iconSize.width() + 4 if not opt.currentIcon.isNull() else 0)
        return self.fontMetrics().elidedText(opt.currentText, Qt.TextElideMode.ElideRight, max(room, 0))

    def paintEvent(self, event) -> None:  # noqa: N802 - Qt's name
        painter = QStylePainter(self)
        opt = QStyleOptionComboBox()
        self.initStyleOption(opt)
        painter.drawComplexControl(QStyle.ComplexControl.CC_ComboBox, opt)
        opt.currentText = self.shown_text()
        painter.drawControl(QStyle.ControlElement.CE_ComboBoxLabel, opt)

    def showPopup(self) -> None:  # noqa: N802 - Qt's name
        if self.opening is not None:
            try:
                self.opening()
            except Exception:  # a list not filled again still opens
                log.warning("refreshing the device list failed", exc_info=True)
        super().showPopup()


def _combo(parent: QWidget, name: str, tip: str) -> QComboBox:
    box = _DeviceCombo(parent)
    box.setObjectName(name)
    box.setMinimumContentsLength(DEVICE_COMBO_CHARS)
    box.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
    box.setToolTip(tip)
    box.setAccessibleName(tip)
    box.currentTextChanged.connect(lambda _text: _fit_device_combo(box))
    return box


def _fit_device_combo(box: QComboBox) -> None:
    """A device picker in the toolbar shows about 10 characters. "No microphone found" (the only item when there is
    none) gets room for all of it; a longer device name stays clipped, and its tooltip says it whole."""
    text = box.currentText()
    placeholder = box.count() == 1 and not box.currentData()
    box.setMinimumContentsLength(max(DEVICE_COMBO_CHARS, len(text)) if placeholder else DEVICE_COMBO_CHARS)
    name = box.accessibleName()
    box.setToolTip(f"{name}: {text}" if text and len(text) > DEVICE_COMBO_CHARS else name)


def _small_label(text: str, parent: QWidget) -> QLabel:
    label = QLabel(text, parent)
    font = label.font()
    font.setPointSizeF(max(font.pointSizeF() * 0.8, 6.0))
    label.setFont(font)
    label.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
    return label


def _save_choice(settings: Settings, box: QComboBox, key: Key, name_key: Key) -> None:
    """Save the device chosen in ``box`` (its id) and what it is called (kept as it was for the entry of a device
    that is not connected)."""
    chosen = str(box.currentData() or "")
    settings.set_value(key, chosen)
    if box.currentIndex() != box.property(NOT_CONNECTED):
        settings.set_value(name_key, box.currentText() if chosen else "")


def _select(box: QComboBox, wanted: str, name: str = "") -> None:
    """Select the entry of ``wanted`` (an id); one that is not connected gets an entry named by ``name``, what
    it was called when it was chosen (its id, e.g. alsa_output.usb-..., where no name was kept)."""
    index = box.findData(wanted)
    box.setProperty(NOT_CONNECTED, -1)
    if wanted and index < 0:
        box.addItem(f"{name or wanted} (not connected)", wanted)
        index = box.count() - 1
        box.setProperty(NOT_CONNECTED, index)
    box.setCurrentIndex(max(index, 0))
