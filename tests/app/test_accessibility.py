"""Accessibility: every control that takes focus has a name a screen reader can say, and the keyboard
reaches every control (Tab walks the main window and the dialogs)."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QAccessible
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QAbstractButton, QApplication, QWidget

from app.main_window import MainWindow
from app.settings import Key

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


def _luminance(c) -> float:
    def ch(v: float) -> float:
        return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4

    return 0.2126 * ch(c.redF()) + 0.7152 * ch(c.greenF()) + 0.0722 * ch(c.blueF())


def _contrast(a, b) -> float:
    la, lb = _luminance(a), _luminance(b)
    return (max(la, lb) + 0.05) / (min(la, lb) + 0.05)


@pytest.fixture
def themed():
    """Apply themes in a test (``themed(name)``); the app goes back to "system" after it."""
    from app.theme import apply_theme

    app = QApplication.instance()
    yield lambda name: apply_theme(app, name)
    apply_theme(app, "system")


def test_error_text_is_readable_in_every_theme(qtbot, tmp_path, themed):
    """An error under the export dialog has at least 4.5:1 contrast on each theme (a fixed red on the dark and
    high-contrast backgrounds had about 2.5:1 and 3.6:1)."""
    from PySide6.QtGui import QPalette

    from app.export_dialog import ExportDialog
    from engine.events import Line

    for theme in ("light", "dark", "high-contrast"):
        themed(theme)
        d = ExportDialog([Line("a line", 0, 1)], folder=str(tmp_path))
        qtbot.addWidget(d)
        d._show_error("The transcript could not be saved.")
        d.show()
        qtbot.waitExposed(d)
        label = d.error_label
        fg = label.palette().color(label.foregroundRole())
        bg = d.palette().color(QPalette.ColorRole.Window)
        assert _contrast(fg, bg) >= 4.5, (theme, fg.name(), bg.name())
        d.close()


def _bright_pixels(image, rect) -> int:
    return sum(
        1
        for y in range(rect.top(), rect.bottom() + 1)
        for x in range(rect.left(), rect.right() + 1)
        if _luminance(image.pixelColor(x, y)) > 0.4
    )


def test_high_contrast_check_box_shows_its_box(qtbot, themed):
    """An unchecked check box ("Keep audio", "Remember on this computer") draws a white box on the black
    high-contrast background (it drew black on black: the label read as plain text), and checked looks different."""
    from PySide6.QtWidgets import QCheckBox, QStyle, QStyleOptionButton

    themed("high-contrast")
    box = QCheckBox("Keep audio")
    qtbot.addWidget(box)
    box.show()
    qtbot.waitExposed(box)
    opt = QStyleOptionButton()
    box.initStyleOption(opt)
    rect = box.style().subElementRect(QStyle.SubElement.SE_CheckBoxIndicator, opt, box)
    unchecked = _bright_pixels(box.grab().toImage(), rect)
    assert unchecked >= 2 * rect.width(), (unchecked, rect)  # its outline, at least
    box.setChecked(True)
    assert _bright_pixels(box.grab().toImage(), rect) > unchecked * 1.5


def test_toolbar_overflow_button_is_visible_in_dark_themes(qtbot, controller, settings, fake_sd, themed):
    """In a narrow window the toolbar's overflow button shows its "\u00bb" in the dark and high-contrast themes
    (the platform's black one vanished; high contrast drew an empty box)."""
    from PySide6.QtCore import QRect
    from PySide6.QtWidgets import QToolButton

    w = shown_window(qtbot, controller, settings, fake_sd, 520)
    load(qtbot, w)
    for theme in ("dark", "high-contrast"):
        themed(theme)
        w.set_theme(theme)
        button = w.toolbar.findChild(QToolButton, "qt_toolbar_ext_button")
        qtbot.waitUntil(lambda b=button: b.isVisible(), timeout=2000)
        image = button.grab().toImage()
        inside = QRect(3, 3, image.width() - 6, image.height() - 6)  # within any border
        assert _bright_pixels(image, inside) >= 6, theme


def test_the_toolbar_fits_the_first_window_size_in_every_theme(qtbot, controller, settings, themed):
    """At the first window size every toolbar entry shows in every theme. The device pickers were fitted to their
    first entry while their lists were filled ("System default", "Default output (follows changes)": up to 342 px
    instead of about 10 characters), and the high-contrast toolbar then put Export and Sessions behind its overflow."""
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QToolButton

    from app.main_window import FIRST_SIZE
    from tests.app.fake_sounddevice import FakeSoundDevice, make_device

    settings.set_value(Key.SOURCE, "mic")
    sd = FakeSoundDevice([make_device("Fake Mic"), make_device("USB Headset")])
    for theme in ("system", "light", "dark", "high-contrast"):
        themed(theme)
        settings.set_value(Key.THEME, theme)
        w = MainWindow(controller, settings, sounddevice=sd)
        qtbot.addWidget(w)
        w.resize(*FIRST_SIZE)
        w.show()
        qtbot.waitExposed(w)
        assert w.device_combo.currentText() == "System default"
        extension = w.toolbar.findChild(QToolButton, "qt_toolbar_ext_button")
        assert extension is None or not extension.isVisible(), (theme, w.toolbar.sizeHint().width())
        qtbot.wait(20)  # the toolbar's fit (toolbar_fit) runs once the layout has settled
        assert w.toolbar.toolButtonStyle() == Qt.ToolButtonStyle.ToolButtonTextBesideIcon, theme  # names shown
        w.close()


def test_a_toolbar_too_narrow_for_its_names_shows_its_icons_alone(qtbot, controller, settings, themed):
    """At a 1280 px screen's first window size (1152 px) the high-contrast toolbar put Sessions (and Export) behind its
    overflow; it now shows its buttons' icons alone there (their names in the tooltips and for screen readers), and
    every entry shows. Wide again, the names come back."""
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QToolButton

    from tests.app.fake_sounddevice import FakeSoundDevice, make_device

    settings.set_value(Key.SOURCE, "mic")
    sd = FakeSoundDevice([make_device("Fake Mic"), make_device("USB Headset")])
    themed("high-contrast")
    settings.set_value(Key.THEME, "high-contrast")
    w = MainWindow(controller, settings, sounddevice=sd)
    qtbot.addWidget(w)
    w.resize(1152, 680)
    w.show()
    qtbot.waitExposed(w)
    bar = w.toolbar
    extension = bar.findChild(QToolButton, "qt_toolbar_ext_button")
    qtbot.waitUntil(lambda: extension is None or not extension.isVisible(), timeout=2000)
    for action in (w.start_action, w.export_action, w.sessions_action):
        button = bar.widgetForAction(action)
        assert button.isVisible() and button.text() and button.toolTip()  # what a screen reader says, and a tooltip
    assert bar.toolButtonStyle() == Qt.ToolButtonStyle.ToolButtonIconOnly
    w.resize(1800, 680)
    qtbot.waitUntil(lambda: bar.toolButtonStyle() == Qt.ToolButtonStyle.ToolButtonTextBesideIcon, timeout=2000)
    assert extension is None or not extension.isVisible()
    w.resize(1152, 680)
    qtbot.waitUntil(lambda: bar.toolButtonStyle() == Qt.ToolButtonStyle.ToolButtonIconOnly, timeout=2000)


def test_the_partial_tail_is_readable_in_every_theme(qtbot, themed):
    """The grey tail had 4.23:1 on the light theme's white and 3.54:1 on the system theme's (a fixed #888888), under
    the 4.5:1 normal text needs: Ctrl+minus takes captions down to 8 pt (keyboard QA)."""
    from PySide6.QtGui import QColor, QPalette

    from app.theme import contrast, tail_color

    assert round(contrast(QColor("#767676"), QColor("#ffffff")), 2) == 4.54  # the WCAG formula itself
    for theme in ("light", "dark", "high-contrast", "system"):
        themed(theme)
        base = QApplication.palette().color(QPalette.ColorRole.Base)
        assert contrast(tail_color(theme), base) >= 4.5, (theme, tail_color(theme).name(), base.name())
        assert tail_color(theme) != QApplication.palette().color(QPalette.ColorRole.Text)  # still a muted grey


def test_the_source_and_delay_combos_are_labelled_for_a_screen_reader(qtbot, window):
    """On Linux Qt names a combo box by its current value ("Microphone, combo box"); its purpose comes from a Label
    relation, which none of the toolbar's combos had (keyboard QA)."""
    from PySide6.QtGui import QAccessible

    for combo, text in ((window.sources.source_combo, "Source"), (window.delay_combo, "Delay")):
        iface = QAccessible.queryAccessibleInterface(combo)
        labels = [rel[0].text(QAccessible.Text.Name) for rel in iface.relations(QAccessible.RelationFlag.Label)]
        assert labels == [text], (combo.objectName(), labels)


def test_the_caption_view_shows_when_it_has_the_keyboard(qtbot, window, themed):
    """The caption view, where Space starts captioning, looked the same with and without the keyboard focus in every
    theme (no border, no caret; keyboard QA)."""
    load(qtbot, window)  # the captions replace the welcome
    window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window, timeout=3000)
    for theme in ("light", "dark", "high-contrast", "system"):
        themed(theme)
        window.history.search.setFocus()
        qtbot.waitUntil(lambda: not window.caption_view.hasFocus(), timeout=2000)
        before = window.caption_view.grab().toImage()
        window.caption_view.setFocus()
        qtbot.waitUntil(lambda: window.caption_view.hasFocus(), timeout=2000)
        after = window.caption_view.grab().toImage()
        changed = sum(
            before.pixel(x, y) != after.pixel(x, y)
            for x in range(0, before.width(), 2)
            for y in (1, before.height() // 2, before.height() - 2)
        )
        assert changed > before.width() // 4, theme


def test_the_toolbars_buttons_show_when_they_have_the_keyboard(qtbot, window, themed):
    """The Model and Refresh buttons looked the same with and without the keyboard focus outside high contrast
    (keyboard QA)."""
    load(qtbot, window)
    window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window, timeout=3000)
    for theme in ("light", "dark", "high-contrast", "system"):
        themed(theme)
        for button in (window.model_button, window.refresh_button):
            window.caption_view.setFocus()
            qtbot.waitUntil(lambda: window.caption_view.hasFocus(), timeout=2000)
            before = button.grab().toImage()
            button.setFocus()
            qtbot.waitUntil(lambda b=button: b.hasFocus(), timeout=2000)
            after = button.grab().toImage()
            assert before.size() == after.size() and before != after, (theme, button.objectName())


def test_tab_follows_the_layout_and_reaches_the_session_buttons(qtbot, controller, settings, fake_sd):
    """Tab went search field, history list, Model, Source, device, Refresh, then the captions: it began in the
    right-hand pane, and Start/Pause/Stop, Overlay, Export and Sessions could not be reached at all (keyboard QA).
    Now Tab goes through the toolbar left to right, then the captions, then the history."""
    from engine.events import Line

    window = shown_window(qtbot, controller, settings, fake_sd, width=1500)  # the whole toolbar shown
    load(qtbot, window)  # Voxtral: the Delay combo is shown
    for i, text in enumerate(LINES_TEXT):
        window.controller._commit(Line(text, i, i + 1))
    qtbot.wait(20)
    bar = window.toolbar
    buttons = {a: bar.widgetForAction(a) for a in (window.start_action, window.overlays.toggle_action)}
    buttons[window.sessions_action] = bar.widgetForAction(window.sessions_action)
    buttons[window.export_action] = bar.widgetForAction(window.export_action)
    expected = [buttons[window.start_action], window.model_button, window.sources.source_combo]
    expected += [window.device_combo, window.refresh_button, window.delay_combo]
    expected += [buttons[window.overlays.toggle_action], buttons[window.export_action]]
    expected += [buttons[window.sessions_action], window.caption_view, window.history.search, window.history.list]
    assert [w for w in expected if not (w.isVisible() and w.isEnabled())] == []
    order = tab_cycle(qtbot, expected[0])
    assert [w for w in order if w in expected] == expected, names_of(order)


def tab_cycle(qtbot, start: QWidget) -> list[QWidget]:
    """The widgets Tab visits from ``start`` until it comes back to it."""
    start.setFocus(Qt.FocusReason.TabFocusReason)
    qtbot.waitUntil(lambda: QApplication.focusWidget() is start, timeout=2000)
    order = [start]
    for _ in range(40):
        QTest.keyClick(QApplication.focusWidget(), Qt.Key.Key_Tab)
        if QApplication.focusWidget() is start:
            break
        order.append(QApplication.focusWidget())
    return order


def names_of(widgets: list[QWidget]) -> list[str]:
    return [f"{type(w).__name__}:{w.accessibleName() or w.objectName()}" for w in widgets]


def test_tab_reaches_the_welcome_before_the_history_and_the_toolbars_overflow(qtbot, controller, settings, fake_sd):
    """With no model, Tab went toolbar, history, then the welcome's buttons; in a narrow window the toolbar's
    overflow button (and what it hides) could not be reached at all (keyboard QA)."""
    window = shown_window(qtbot, controller, settings, fake_sd, width=1500)
    w, bar = window.welcome, window.toolbar
    expected = [window.model_button, window.sources.source_combo, window.device_combo, window.refresh_button]
    expected += [bar.widgetForAction(window.overlays.toggle_action), bar.widgetForAction(window.sessions_action)]
    expected += [w.download_button, w.folder_button, w.more_button, window.history.search, window.history.list]
    assert [x for x in expected if not (x.isVisible() and x.isEnabled())] == []
    order = tab_cycle(qtbot, expected[0])
    assert [x for x in order if x in expected] == expected, names_of(order)

    window.resize(640, 640)
    more = bar.findChild(QWidget, "qt_toolbar_ext_button")
    qtbot.waitUntil(lambda: more is not None and more.isVisible(), timeout=2000)
    order = tab_cycle(qtbot, window.model_button)
    assert more in order and order.index(more) < order.index(w.download_button), names_of(order)
    # opened, the keyboard goes to the first control it shows, and Tab walks the rest before the welcome
    more.setFocus(Qt.FocusReason.TabFocusReason)
    QTest.keyClick(more, Qt.Key.Key_Space)
    qtbot.waitUntil(lambda: QApplication.focusWidget() is not more, timeout=2000)
    first = QApplication.focusWidget()
    assert first.parentWidget() is bar and first.y() > more.geometry().bottom(), names_of([first])
    order = tab_cycle(qtbot, first)
    revealed = [x for x in order if x.parentWidget() is bar and x is not more]
    sessions = bar.widgetForAction(window.sessions_action)
    assert sessions in revealed and order.index(sessions) < order.index(more) < order.index(w.download_button)


def test_space_on_pause_leaves_the_keyboard_on_resume(qtbot, window):
    """Space on the focused Pause button paused, Pause went grey and the keyboard jumped on to the Overlay
    button, so the next Space hid the overlay instead of resuming (keyboard QA; Start did the same). The keyboard
    goes to the button that now does the opposite: Start, Pause, Resume, Pause again."""
    load(qtbot, window, "fake-moonshine")
    bar = window.toolbar
    start, pause = bar.widgetForAction(window.start_action), bar.widgetForAction(window.pause_action)
    start.setFocus(Qt.FocusReason.TabFocusReason)
    qtbot.waitUntil(lambda: QApplication.focusWidget() is start, timeout=2000)
    QTest.keyClick(start, Qt.Key.Key_Space)  # Start: the keyboard goes on to Pause, not to Overlay
    qtbot.waitUntil(lambda: window.controller.state == "running", timeout=3000)
    qtbot.waitUntil(lambda: QApplication.focusWidget() is pause, timeout=2000)
    QTest.keyClick(pause, Qt.Key.Key_Space)
    qtbot.waitUntil(lambda: window.controller.state == "paused", timeout=3000)
    qtbot.waitUntil(lambda: QApplication.focusWidget() is start, timeout=2000)
    QTest.keyClick(start, Qt.Key.Key_Space)
    qtbot.waitUntil(lambda: window.controller.state == "running", timeout=3000)
    qtbot.waitUntil(lambda: QApplication.focusWidget() is pause, timeout=2000)
    with qtbot.waitSignal(window.controller.session_finished, timeout=5000):
        window.stop_action.trigger()


def test_a_start_that_fails_gives_the_keyboard_back_to_start(qtbot, settings, journal_dir):
    """Space on Start, and the microphone could not be opened: the keyboard had moved on to Overlay, so the next
    Space hid the overlay (keyboard QA). It is back on Start."""
    from app.controller import SessionController
    from tests.app import fake_engine
    from tests.app.fake_sounddevice import FakeSoundDevice, make_device

    sd = FakeSoundDevice([make_device("Built-in Mic")], deny=True)
    controller = SessionController(loader=fake_engine.load_model, sounddevice=sd, journal_dir=journal_dir)
    try:
        window = shown_window(qtbot, controller, settings, sd, width=1500)
        load(qtbot, window, "fake-moonshine")
        start = window.toolbar.widgetForAction(window.start_action)
        start.setFocus(Qt.FocusReason.TabFocusReason)
        qtbot.waitUntil(lambda: QApplication.focusWidget() is start, timeout=2000)
        with qtbot.waitSignal(window.controller.session_failed, timeout=5000):
            QTest.keyClick(start, Qt.Key.Key_Space)
        qtbot.waitUntil(lambda: window.controller.state == "idle" and start.isEnabled(), timeout=3000)
        qtbot.waitUntil(lambda: QApplication.focusWidget() is start, timeout=2000)
    finally:
        controller.shutdown(5000)


@pytest.mark.parametrize("installed_under", [None, "O'Brien"])
def test_dark_check_box_shows_its_box(qtbot, themed, tmp_path, monkeypatch, installed_under):
    """HiDPI QA: an unchecked check box in the dark theme was a #181a1e square on the #23262b window with the
    platform's outline (the window's colour darkened), about 1.1:1: "Keep audio" read as plain text. Its outline
    now has at least 3:1 against the window (non-text contrast), and checked looks different, wherever livecap
    is installed (review: the folder's path in the style sheet's url, with an apostrophe, made Qt drop the rule)."""
    import shutil

    from PySide6.QtGui import QPalette
    from PySide6.QtWidgets import QCheckBox, QStyle, QStyleOptionButton

    from app import theme
    from tests.app.conftest import REPO

    if installed_under:
        resources = tmp_path / installed_under / "resources"
        shutil.copytree(REPO / "resources" / "themes", resources / "themes")
        monkeypatch.setattr(theme, "resources_dir", lambda: resources)
    themed("dark")
    box = QCheckBox("Keep audio")
    qtbot.addWidget(box)
    box.show()
    qtbot.waitExposed(box)
    window = box.palette().color(QPalette.ColorRole.Window)
    opt = QStyleOptionButton()
    box.initStyleOption(opt)
    rect = box.style().subElementRect(QStyle.SubElement.SE_CheckBoxIndicator, opt, box)

    def visible(image) -> int:
        return sum(
            1
            for y in range(rect.top(), rect.bottom() + 1)
            for x in range(rect.left(), rect.right() + 1)
            if _contrast(image.pixelColor(x, y), window) >= 3
        )

    unchecked = visible(box.grab().toImage())
    assert unchecked >= 2 * rect.width(), (unchecked, rect)  # its outline, at least
    box.setChecked(True)
    assert visible(box.grab().toImage()) > unchecked * 1.5
