"""Accessibility: every control that takes focus has a name a screen reader can say, and the keyboard
reaches every control (Tab walks the main window and the dialogs)."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QAccessible
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QAbstractButton, QApplication, QWidget

from app.main_window import MainWindow

LINES_TEXT = ["Good morning.", "Welcome to the talk."]


def focusable(root: QWidget, visible_only: bool = False) -> list[QWidget]:
    """The widgets under ``root`` (itself included) that Tab can focus."""
    out = []
    for w in [root, *root.findChildren(QWidget)]:
        if not (w.focusPolicy() & Qt.FocusPolicy.TabFocus) or w.focusProxy() is not None:
            continue
        if w.window() is not root.window():  # a combo box's popup list: a window of its own
            continue
        if visible_only and not (w.isVisibleTo(root) and w.isEnabled()):
            continue
        out.append(w)
    return out


def spoken_name(w: QWidget) -> str:
    """What a screen reader says for ``w``: a button's text, or else its own accessible name (fields, lists
    and views must carry one: what Qt would guess for them is a group title or the whole content)."""
    if isinstance(w, QAbstractButton):
        iface = QAccessible.queryAccessibleInterface(w)
        return (iface.text(QAccessible.Text.Name) if iface is not None else "").strip()
    return w.accessibleName().strip()


def unnamed(root: QWidget) -> list[str]:
    skip = {"QWidget", "QFrame", "QScrollArea", "QStackedWidget", "QSplitter"}
    missing = []
    for w in focusable(root):
        if type(w).__name__ in skip and not w.children():
            continue
        if not spoken_name(w):
            missing.append(f"{type(w).__name__}#{w.objectName()}")
    return missing


def tab_walk(window: QWidget, qtbot, start: QWidget, steps: int) -> set[QWidget]:
    seen = set()
    start.setFocus(Qt.FocusReason.TabFocusReason)
    qtbot.waitUntil(lambda: QApplication.focusWidget() is start, timeout=2000)
    for _ in range(steps):
        seen.add(QApplication.focusWidget())
        QTest.keyClick(QApplication.focusWidget(), Qt.Key.Key_Tab)
    return seen


def shown_window(qtbot, controller, settings, fake_sd, width: int = 1100, audio=None) -> MainWindow:
    """A main window, shown and active (so that Tab moves the focus)."""
    w = MainWindow(controller, settings, sounddevice=fake_sd, audio=audio)
    qtbot.addWidget(w)
    w.resize(width, 640)
    w.show()
    qtbot.waitExposed(w)
    w.activateWindow()
    qtbot.waitUntil(w.isActiveWindow, timeout=2000)
    return w


@pytest.fixture
def window(qtbot, controller, settings, fake_sd):
    return shown_window(qtbot, controller, settings, fake_sd)


def load(qtbot, window, source="fake-voxtral"):
    with qtbot.waitSignal(window.controller.model_changed, timeout=5000):
        window.load_model(source)


def test_main_window_controls_have_names_and_tab_reaches_them(qtbot, window):
    from engine.events import Line

    # the welcome (no model yet)
    assert unnamed(window) == []
    wanted = [w for w in focusable(window, visible_only=True)]
    assert window.welcome.download_button in wanted and window.welcome.folder_button in wanted
    seen = tab_walk(window, qtbot, wanted[0], 3 * len(wanted))
    assert set(wanted) <= seen, [f"{type(w).__name__}#{w.objectName()}" for w in set(wanted) - seen]

    # a model loaded, lines in the history
    load(qtbot, window)
    for i, text in enumerate(LINES_TEXT):
        window.controller._commit(Line(text, i, i + 1))
    qtbot.wait(20)
    assert unnamed(window) == []
    wanted = focusable(window, visible_only=True)
    assert window.caption_view in wanted and window.history.list in wanted and window.delay_combo in wanted
    seen = tab_walk(window, qtbot, wanted[0], 3 * len(wanted))
    assert set(wanted) <= seen, [f"{type(w).__name__}#{w.objectName()}" for w in set(wanted) - seen]


def test_the_session_runs_from_the_keyboard(qtbot, window):
    load(qtbot, window, "fake-moonshine")
    window.history.search.setFocus()  # typing a space in the search box is typing, not Start
    QTest.keyClick(window.history.search, Qt.Key.Key_Space)
    assert window.controller.state == "idle" and window.history.search.text() == " "
    window.caption_view.setFocus()
    with qtbot.waitSignal(window.controller.state_changed, timeout=3000):
        QTest.keyClick(window.caption_view, Qt.Key.Key_Space)
    assert window.controller.state == "running"
    with qtbot.waitSignal(window.controller.session_finished, timeout=5000):
        QTest.keyClick(window.caption_view, Qt.Key.Key_Period, Qt.KeyboardModifier.ControlModifier)  # Stop
    QTest.keyClick(window.caption_view, Qt.Key.Key_F, Qt.KeyboardModifier.ControlModifier)
    assert QApplication.focusWidget() is window.history.search


def _dialog_check(qtbot, dialog: QWidget) -> None:
    dialog.show()
    qtbot.waitExposed(dialog)
    dialog.activateWindow()
    qtbot.waitUntil(dialog.isActiveWindow, timeout=2000)
    assert unnamed(dialog) == []
    wanted = focusable(dialog, visible_only=True)
    seen = tab_walk(dialog, qtbot, wanted[0], 3 * len(wanted))
    assert set(wanted) <= seen, [f"{type(w).__name__}#{w.objectName()}" for w in set(wanted) - seen]


def test_model_dialog(qtbot, tmp_path, monkeypatch):
    from PySide6.QtCore import QSettings

    from app.model_dialog import ModelDialog
    from engine.catalog import Machine
    from tests.fakehub import FakeHub, block_network, hub_env

    block_network(monkeypatch)
    with FakeHub() as hub:
        hub_env(monkeypatch, hub, tmp_path / "hf")
        d = ModelDialog(
            None, QSettings(str(tmp_path / "d.ini"), QSettings.Format.IniFormat), machine=Machine(16 << 30, False, 2)
        )
        qtbot.addWidget(d)
        _dialog_check(qtbot, d)


def test_export_dialog(qtbot, tmp_path):
    from app.export_dialog import ExportDialog
    from engine.events import Line

    d = ExportDialog([Line(t, i, i + 1) for i, t in enumerate(LINES_TEXT)], folder=str(tmp_path))
    qtbot.addWidget(d)
    _dialog_check(qtbot, d)


@pytest.mark.parametrize("kind", ["system", "mic", "both"])
def test_source_picker_controls_have_names_and_tab_reaches_them(qtbot, controller, settings, fake_sd, kind):
    """The Source picker with System audio available, under each source: its combos and buttons are named and
    reached by Tab, and each level meter says what it measures (under Both: one per input)."""
    from app.level_meter import LevelMeter
    from app.sources import AudioSystem
    from tests.app.fake_audio_backend import FakeBackend

    w = shown_window(qtbot, controller, settings, fake_sd, 1400, AudioSystem(fake_sd, FakeBackend(fake_sd)))
    load(qtbot, w)
    w.sources.set_kind(kind)
    picker = w.sources
    shown = {
        "system": [picker.output_combo],
        "mic": [picker.device_combo],
        "both": [picker.output_combo, picker.device_combo],
    }[kind]
    qtbot.waitUntil(lambda: all(x.isVisibleTo(w) for x in shown), timeout=2000)  # the toolbar lays out anew
    assert unnamed(w) == []
    wanted = focusable(w, visible_only=True)
    assert set(shown + [picker.source_combo, picker.refresh_button]) <= set(wanted)
    seen = tab_walk(w, qtbot, wanted[0], 3 * len(wanted))
    assert set(wanted) <= seen, [f"{type(x).__name__}#{x.objectName()}" for x in set(wanted) - seen]
    meters = [m for m in picker.meters.findChildren(LevelMeter) if m.isVisibleTo(w)]
    names = [m.accessibleName() for m in meters]
    assert len(meters) == (2 if kind == "both" else 1) and all(names) and len(set(names)) == len(names), names


def test_sessions_window(qtbot, window, tmp_path):
    """The Sessions window with a kept session (and its audio) open: every control named, Tab reaches them all."""
    from tests.app import fake_engine

    load(qtbot, window, "fake-moonshine")
    window.controller.keep_audio = True  # so that "Re-transcribe with" is enabled too
    wav = fake_engine.write_wav(tmp_path / "a.wav", fake_engine.speechlike([(0.8, 0.5), (1.0, 0.5)]))
    with qtbot.waitSignal(window.controller.session_saved, timeout=15000):
        window.start_file(str(wav), speed=8)
    view = window.show_sessions()
    assert view is not None and view.current_id() is not None and view.history.lines()
    assert view.retranscribe_button.isEnabled() and view.export_button.isEnabled()
    _dialog_check(qtbot, view)
