"""The caption overlay: frameless, on top, last N lines, style and geometry remembered, click-through,
presentation mode."""

from __future__ import annotations

from contextlib import contextmanager

from PySide6.QtCore import QPoint, Qt

from app.overlay import CaptionOverlay, OverlayStyle
from app.overlay_manager import OverlayManager
from app.settings import Key
from engine.events import CaptionEvent, Line


def test_window_flags_and_translucency(qtbot):
    overlay = CaptionOverlay()
    qtbot.addWidget(overlay)
    flags = overlay.windowFlags()
    assert flags & Qt.WindowType.FramelessWindowHint
    assert flags & Qt.WindowType.WindowStaysOnTopHint
    assert not flags & Qt.WindowType.WindowTransparentForInput
    assert overlay.testAttribute(Qt.WidgetAttribute.WA_TranslucentBackground)
    overlay.set_overlay_style(OverlayStyle(click_through=True))
    assert overlay.windowFlags() & Qt.WindowType.WindowTransparentForInput


def test_shows_only_the_last_lines_with_partial_tail(qtbot):
    overlay = CaptionOverlay()
    qtbot.addWidget(overlay)
    overlay.resize(400, 100)
    for i in range(6):
        overlay.commit(Line(f"committed sentence number {i} with several words", i, i + 1))
    overlay.set_partial(CaptionEvent(partial=Line("and the open tail", 6, 7), partial_stable=8))
    for lines in (2, 3, 5):
        overlay.set_overlay_style(OverlayStyle(lines=lines))
        shown = overlay.visible_lines()
        assert len(shown) == lines
        assert shown[-1].endswith("open tail")
    assert overlay.text().endswith("and the open tail")
    overlay.set_overlay_style(OverlayStyle(lines=9))
    assert overlay.overlay_style().lines == 5  # clamped to 2..5
    # the height follows the number of lines
    overlay.set_overlay_style(OverlayStyle(lines=2))
    two = overlay.height()
    overlay.set_overlay_style(OverlayStyle(lines=4))
    assert overlay.height() > two * 1.5
    image = overlay.grab()
    assert not image.isNull()


def test_drag_moves_the_overlay(qtbot):
    overlay = CaptionOverlay()
    qtbot.addWidget(overlay)
    overlay.resize(400, 100)
    overlay.move(100, 100)
    overlay.show()
    qtbot.waitExposed(overlay)
    start = overlay.pos()
    from PySide6.QtTest import QTest

    QTest.mousePress(overlay, Qt.MouseButton.LeftButton, pos=QPoint(200, 50))
    QTest.mouseMove(overlay, QPoint(260, 80))
    QTest.mouseRelease(overlay, Qt.MouseButton.LeftButton, pos=QPoint(260, 80))
    # offscreen has no system move: the manual fallback moved it
    assert overlay.pos() != start


def test_manager_remembers_style_and_geometry(qtbot, settings, controller):
    from PySide6.QtWidgets import QWidget

    parent = QWidget()
    qtbot.addWidget(parent)
    manager = OverlayManager(controller, settings, parent)
    qtbot.addWidget(manager.overlay)
    manager.toggle_action.setChecked(True)
    assert manager.overlay.isVisible() and settings.value(Key.OVERLAY_VISIBLE)
    manager.set_style(lines=4, opacity=0.5, text_color="#ffff00")
    manager.overlay.setGeometry(50, 60, 700, manager.overlay.height())
    manager.save_geometry()
    manager.click_through_action.setChecked(True)
    assert settings.value(Key.OVERLAY_CLICK_THROUGH)
    assert manager.overlay.windowFlags() & Qt.WindowType.WindowTransparentForInput
    manager.close()
    assert settings.value(Key.OVERLAY_LINES) == 4 and settings.value(Key.OVERLAY_OPACITY) == 0.5

    again = OverlayManager(controller, settings, parent)
    qtbot.addWidget(again.overlay)
    style = again.overlay.overlay_style()
    assert (style.lines, style.opacity, style.text_color, style.click_through) == (4, 0.5, "#ffff00", True)
    assert again.overlay.geometry().width() == 700


def test_presentation_mode(qtbot, settings, controller):
    from PySide6.QtWidgets import QWidget

    parent = QWidget()
    qtbot.addWidget(parent)
    manager = OverlayManager(controller, settings, parent)
    qtbot.addWidget(manager.overlay)
    manager.presentation_action.setChecked(True)
    assert manager.overlay.presentation and manager.overlay.isVisible()
    assert manager.overlay.isFullScreen() or manager.overlay.windowState() & Qt.WindowState.WindowFullScreen
    qtbot.waitUntil(lambda: manager.overlay.height() > 300, timeout=2000)  # the screen's size arrives later
    assert manager.overlay.caption_font().pointSizeF() > manager.overlay.overlay_style().font.pointSizeF()
    from PySide6.QtTest import QTest

    QTest.keyClick(manager.overlay, Qt.Key.Key_Escape)
    assert not manager.overlay.presentation and not manager.presentation_action.isChecked()


def test_overlay_follows_the_session(qtbot, settings, controller):
    from PySide6.QtWidgets import QWidget

    parent = QWidget()
    qtbot.addWidget(parent)
    manager = OverlayManager(controller, settings, parent)
    qtbot.addWidget(manager.overlay)
    controller.line_committed.emit(Line("first line", 0, 1))
    controller.partial_changed.emit(CaptionEvent(partial=Line("second", 1, 2)))
    assert manager.overlay.text() == "first line second"
    controller.lines_reset.emit()
    assert manager.overlay.text() == ""


def _ink_bands(image, color) -> list[tuple[int, int]]:
    """(first, last) pixel rows of each horizontal band that holds pixels of about ``color``."""
    from PySide6.QtGui import QColor

    want = QColor(color)
    rows = []
    for y in range(image.height()):
        hit = False
        for x in range(0, image.width(), 2):
            c = image.pixelColor(x, y)
            if abs(c.red() - want.red()) + abs(c.green() - want.green()) + abs(c.blue() - want.blue()) < 90:
                hit = True
                break
        rows.append(hit)
    bands, start = [], None
    for y, hit in enumerate(rows + [False]):
        if hit and start is None:
            start = y
        elif not hit and start is not None:
            bands.append((start, y - 1))
            start = None
    return bands


def test_presentation_text_fits_a_window_that_is_not_full_screen(qtbot):
    """A window manager that ignores full screen leaves the window small: the text shrinks to fit, every
    line whole (the top one was cut before)."""
    from PySide6.QtGui import QFont

    overlay = CaptionOverlay()
    qtbot.addWidget(overlay)
    font = QFont("DejaVu Sans")
    font.setPointSize(26)
    overlay.set_overlay_style(OverlayStyle(lines=3, font=font, text_color="#ffffff", background_color="#000000"))
    for i in range(5):
        overlay.commit(Line(f"Sentence {i} has a few words to wrap", i, i + 1))  # many wrapped lines
    overlay.show()
    overlay.set_presentation(True)
    overlay.showNormal()  # what a window manager without full screen leaves
    overlay.resize(420, 150)
    qtbot.wait(20)
    f = overlay.caption_font()
    assert f.pointSizeF() < 26 * 1.8  # shrunk from the presentation size
    from PySide6.QtGui import QFontMetricsF

    assert QFontMetricsF(f).lineSpacing() * 3 <= overlay.height()
    image = overlay.grab().toImage()
    bands = _ink_bands(image, "#ffffff")
    assert len(bands) == 3, bands
    heights = [b - a + 1 for a, b in bands]
    assert min(heights) >= 0.7 * max(heights), heights  # no line cut in half
    assert bands[0][0] > 2  # and the first one does not start at the clipped top edge

    # a moment later the window covers the screen by itself, and the text is full presentation size again
    qtbot.waitUntil(lambda: overlay.geometry() == overlay.screen().geometry(), timeout=3000)
    assert abs(overlay.caption_font().pointSizeF() - 26 * 1.8) < 0.01


def test_more_lines_or_a_larger_font_keep_the_overlay_on_its_screen(qtbot, settings, controller):
    """At its default place (low on the screen) the overlay grows upward when it gets more lines or a larger
    font, keeping its bottom edge; it grew downward, off the bottom of the screen. High on the screen it keeps
    its top, and it is never taller than the screen."""
    from PySide6.QtGui import QFont
    from PySide6.QtWidgets import QWidget

    parent = QWidget()
    qtbot.addWidget(parent)
    manager = OverlayManager(controller, settings, parent)
    overlay = manager.overlay
    qtbot.addWidget(overlay)
    manager.set_visible(True)
    area = overlay.screen().availableGeometry()
    bottom = overlay.geometry().bottom()
    assert area.contains(overlay.geometry())
    two = overlay.height()
    manager.set_style(lines=5)
    assert overlay.height() > two * 2
    assert area.contains(overlay.geometry()) and overlay.geometry().bottom() == bottom, (overlay.geometry(), area)
    font = QFont(overlay.overlay_style().font)
    font.setPointSize(200)
    manager.set_style(font=font)
    assert area.contains(overlay.geometry()) and overlay.height() == area.height()

    font.setPointSize(20)
    manager.set_style(font=font, lines=2)
    overlay.move(area.left() + 10, area.top() + 20)
    top = overlay.geometry().top()
    manager.set_style(lines=4)
    assert overlay.geometry().top() == top and area.contains(overlay.geometry())


def test_a_screen_reader_finds_the_latest_captions_in_the_overlay(qtbot):
    """The overlay's accessibility interface was "livecap captions" with no text: an empty window (keyboard QA)."""
    from PySide6.QtGui import QAccessible

    overlay = CaptionOverlay()
    qtbot.addWidget(overlay)
    for i in range(5):
        overlay.commit(Line(f"line {i}", i, i + 1))
    iface = QAccessible.queryAccessibleInterface(overlay)
    assert iface.text(QAccessible.Text.Name) == "Captions"
    assert iface.text(QAccessible.Text.Description) == "line 2 line 3 line 4"
    overlay.clear()
    assert iface.text(QAccessible.Text.Description) == ""


def _ink_columns(image, top: int, bottom: int) -> tuple[int, int]:
    """The first and last column with caption text (bright pixels) between rows ``top`` and ``bottom``."""
    cols = [x for x in range(image.width()) if any(image.pixelColor(x, y).value() > 160 for y in range(top, bottom, 2))]
    return cols[0], cols[-1]


def test_a_right_to_left_line_is_its_own_paragraph_aligned_right(qtbot):
    """An Arabic line after an English one ran on at the end of the English line, left-aligned, its second half
    wrapping to the left edge (keyboard QA). Each run of one direction is its own paragraph now, laid out in
    that direction; a line of digits stays with the line before it."""
    overlay = CaptionOverlay()
    qtbot.addWidget(overlay)
    overlay.set_overlay_style(OverlayStyle(lines=3))
    overlay.resize(900, overlay.height())
    overlay.commit(Line("detail until the end", 0, 1))
    overlay.commit(Line("مرحبا بكم", 1, 2))
    overlay.commit(Line("2026", 2, 3))
    assert overlay.visible_lines() == ["detail until the end", "مرحبا بكم 2026"]
    overlay.set_partial(CaptionEvent(partial=Line("and then", 3, 4), partial_stable=4))
    assert overlay.visible_lines() == ["detail until the end", "مرحبا بكم 2026", "and then"]
    image = overlay.grab().toImage()
    third = image.height() // 3
    english_left, english_right = _ink_columns(image, 0, third)
    arabic_left, arabic_right = _ink_columns(image, third, 2 * third)
    assert english_left < 60 and english_right < 600  # left-aligned
    assert arabic_right > 840 and arabic_left > 300  # right-aligned


def focused_manager(qtbot, settings, controller):
    """``(a line edit with the keyboard, an OverlayManager over it)``."""
    from PySide6.QtWidgets import QApplication, QLineEdit

    parent = QLineEdit()
    qtbot.addWidget(parent)
    parent.show()
    parent.activateWindow()
    parent.setFocus()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is parent, timeout=2000)
    manager = OverlayManager(controller, settings, parent)
    qtbot.addWidget(manager.overlay)
    return parent, manager


def test_the_keyboard_moves_and_resizes_the_overlay(qtbot, settings, controller):
    """Moving and resizing were mouse-only, and a click-through overlay could not be moved at all without
    turning click-through off (keyboard QA). "Move or resize with the keyboard": arrows move, Shift+arrows
    resize, Enter keeps (and saves), Esc undoes; the keyboard goes back where it was; it stays on the screen."""
    from PySide6.QtTest import QTest
    from PySide6.QtWidgets import QApplication

    parent, manager = focused_manager(qtbot, settings, controller)
    manager.click_through_action.setChecked(True)
    overlay = manager.overlay
    overlay.setGeometry(100, 300, 500, overlay.height())  # on offscreen's 800x600 screen
    start = overlay.geometry()
    manager.adjust_action.trigger()
    assert overlay.isVisible() and overlay.adjusting
    assert not overlay.windowFlags() & Qt.WindowType.WindowTransparentForInput  # it takes the keys meanwhile
    QTest.keyClick(overlay, Qt.Key.Key_Left)
    QTest.keyClick(overlay, Qt.Key.Key_Up)
    QTest.keyClick(overlay, Qt.Key.Key_Right, Qt.KeyboardModifier.ShiftModifier)
    g = overlay.geometry()
    assert (g.x(), g.y(), g.width(), g.height()) == (80, 280, 520, start.height())
    QTest.keyClick(overlay, Qt.Key.Key_Escape)  # undoes, the showing too: it was hidden (keyboard QA)
    assert overlay.geometry() == start and not overlay.adjusting
    assert not overlay.isVisible() and not manager.toggle_action.isChecked()
    assert overlay.windowFlags() & Qt.WindowType.WindowTransparentForInput  # click-through again
    qtbot.waitUntil(lambda: QApplication.focusWidget() is parent, timeout=2000)

    manager.adjust_action.trigger()
    for _ in range(200):  # far past the screen's edge: it stops there
        QTest.keyClick(overlay, Qt.Key.Key_Down)
    area = overlay.screen().availableGeometry()
    assert overlay.geometry().bottom() == area.bottom() and overlay.geometry().x() == start.x()
    QTest.keyClick(overlay, Qt.Key.Key_Return)  # keeps, shown
    assert not overlay.adjusting and overlay.geometry().bottom() == area.bottom() and overlay.isVisible()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is parent, timeout=2000)

    again = OverlayManager(controller, settings, parent)
    qtbot.addWidget(again.overlay)
    assert again.overlay.geometry().bottom() == area.bottom()

    manager.adjust_action.trigger()
    QTest.keyClick(overlay, Qt.Key.Key_Up)
    parent.activateWindow()  # the keyboard went elsewhere (a click on another window): the change is kept
    qtbot.waitUntil(lambda: not overlay.adjusting, timeout=2000)
    assert overlay.geometry().bottom() == area.bottom() - 20


def test_the_overlay_can_be_put_back_at_the_bottom_of_the_screen(qtbot, settings, controller):
    """A way back for an overlay moved somewhere awkward: its first place, shown, and remembered."""
    from PySide6.QtWidgets import QWidget

    parent = QWidget()
    qtbot.addWidget(parent)
    manager = OverlayManager(controller, settings, parent)
    qtbot.addWidget(manager.overlay)
    first = manager.overlay.geometry()
    manager.overlay.setGeometry(0, 0, 300, manager.overlay.height())
    manager.reset_action.trigger()
    assert manager.overlay.isVisible() and manager.overlay.geometry() == first
    again = OverlayManager(controller, settings, parent)
    qtbot.addWidget(again.overlay)
    assert again.overlay.geometry() == first


def test_hiding_or_presenting_during_keyboard_adjusting(qtbot, settings, controller):
    """Ctrl+Shift+O while adjusting hid the overlay for good (Show checked the menu item and nothing appeared;
    F11 presented nothing), and F11 then Esc left the keyboard in the overlay (keyboard QA)."""
    from PySide6.QtTest import QTest
    from PySide6.QtWidgets import QApplication

    parent, manager = focused_manager(qtbot, settings, controller)
    overlay = manager.overlay
    manager.adjust_action.trigger()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is overlay, timeout=2000)
    manager.toggle_action.setChecked(False)  # Ctrl+Shift+O
    qtbot.wait(50)
    assert not overlay.isVisible() and not overlay.adjusting
    manager.toggle_action.setChecked(True)
    qtbot.waitUntil(overlay.isVisible, timeout=2000)
    qtbot.waitUntil(lambda: QApplication.focusWidget() is parent, timeout=2000)

    manager.adjust_action.trigger()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is overlay, timeout=2000)
    manager.presentation_action.setChecked(True)  # F11
    assert overlay.presentation and not overlay.adjusting
    QTest.keyClick(overlay, Qt.Key.Key_Escape)
    assert not overlay.presentation
    qtbot.waitUntil(lambda: QApplication.focusWidget() is parent, timeout=2000)


def test_an_overlay_too_short_for_its_lines_shows_whole_lines_only(qtbot):
    """HiDPI QA: an overlay kept within the screen (a large font, five lines on a laptop) or made shorter by hand
    painted its top line cut through the letters; the lines that do not fit whole are left out, the newest shows."""
    from PySide6.QtGui import QFontMetricsF

    from app.overlay import PAD_Y

    overlay = CaptionOverlay()
    qtbot.addWidget(overlay)
    overlay.set_overlay_style(OverlayStyle(lines=5))
    for i in range(6):
        overlay.commit(Line(f"committed sentence number {i}", i, i + 1))
    overlay.set_partial(CaptionEvent(partial=Line("and the open tail", 6, 7), partial_stable=8))
    spacing = QFontMetricsF(overlay.caption_font()).lineSpacing()
    overlay.resize(700, int(2 * PAD_Y + 2.5 * spacing))
    shown = overlay.visible_lines()
    assert len(shown) == 2 and shown[-1].endswith("open tail")
    image = overlay.grab().toImage()
    cut = range(PAD_Y + 1, PAD_Y + int(0.4 * spacing))  # where the lower half of a third line was drawn
    assert not any(image.pixelColor(x, y).value() > 160 for y in cut for x in range(0, image.width(), 2))
    assert any(image.pixelColor(x, y).value() > 160 for y in range(image.height()) for x in range(0, 400, 2))


def test_at_its_own_height_the_overlay_shows_every_line_it_is_set_to(qtbot):
    """Review: the height came from the unrounded line spacing while the document lays lines out on whole pixels,
    so the whole-lines rule dropped the top line at many sizes with nobody resizing (24 pt with 3 lines showed 2;
    519 of 1472 size and line-count pairs)."""
    from PySide6.QtGui import QFont

    overlay = CaptionOverlay()
    qtbot.addWidget(overlay)
    overlay.resize(900, overlay.height())
    for k in range(12):
        overlay.commit(Line(f"line {k} " + "word " * 60, 0.0, 1.0))
    short = []
    for size in [x / 2 for x in range(16, 100)]:
        font = QFont(overlay.font())
        font.setPointSizeF(size)
        for lines in (2, 3, 4, 5):
            overlay.set_overlay_style(OverlayStyle(lines=lines, font=font))
            if len(overlay.visible_lines()) < lines:
                short.append((size, lines))
    assert short == []


def _brightest(overlay: CaptionOverlay) -> int:
    """The brightest pixel's value in the overlay as painted (white text on black: settled words reach 255, the
    grey tail and the note stay near 160)."""
    image = overlay.grab().toImage()
    return max(image.pixelColor(x, y).value() for y in range(image.height()) for x in range(0, image.width(), 2))


def test_paused_the_still_forming_tail_is_drawn_settled(qtbot):
    """QA: paused, the overlay still drew the grey "still forming" tail, as if words were coming. Nothing comes to
    change it while the session is not running: it is drawn as settled text, and the note says why."""
    overlay = CaptionOverlay()
    qtbot.addWidget(overlay)
    overlay.set_overlay_style(OverlayStyle(text_color="#ffffff", background_color="#000000", opacity=1.0))
    overlay.resize(700, overlay.height())
    overlay.set_partial(CaptionEvent(partial=Line("every word still forming", 0, 1), partial_stable=0))
    overlay.set_session_state("running")
    assert overlay.note() == "" and _brightest(overlay) < 200  # all tail: grey
    overlay.set_session_state("paused")
    assert overlay.note() == "Paused" and _brightest(overlay) > 240
    assert (
        overlay.visible_lines()[-1].startswith("every word still forming") and "Paused" in overlay.visible_lines()[-1]
    )
    assert overlay.text() == "every word still forming"  # the note is not caption text (copy, export)


def test_the_overlay_says_when_no_captions_are_coming(qtbot, settings, controller):
    """QA: someone watching only the overlay could not tell that captions were not coming: before the first
    caption it was an empty strip with an empty accessible description, paused it looked live, and after Stop the
    last lines stayed with no sign that the session had ended. The overlay follows the controller's state now and
    says so in a short note (also in its accessible description)."""
    from PySide6.QtWidgets import QWidget

    parent = QWidget()
    qtbot.addWidget(parent)
    manager = OverlayManager(controller, settings, parent)
    overlay = manager.overlay
    qtbot.addWidget(overlay)

    def state(name: str) -> None:
        controller.state = name
        controller.state_changed.emit(name)

    def shown() -> tuple[str, str]:
        return overlay.note(), overlay.accessibleDescription()

    assert controller.state == "no-model" and shown() == ("Not captioning", "Not captioning")
    assert "Not captioning" in overlay.visible_lines()[-1]
    state("running")
    assert shown() == ("Waiting for speech\u2026", "Waiting for speech\u2026")
    controller.partial_changed.emit(CaptionEvent(partial=Line("hello", 0, 1)))
    assert overlay.note() == ""  # words are showing
    controller.line_committed.emit(Line("hello there", 0, 1))
    controller.partial_changed.emit(None)
    assert shown() == ("", "hello there")
    controller.waiting = True  # the input was lost and no other can be opened
    controller.input_waiting.emit()
    assert shown() == ("No audio input", "hello there (No audio input)")
    controller.waiting = False
    controller.device_recovered.emit("Fake Mic")
    assert overlay.note() == ""
    state("paused")
    assert shown() == ("Paused", "hello there (Paused)")
    state("running")
    assert overlay.note() == ""
    state("idle")  # stopped: the last lines stay, marked
    assert shown() == ("Stopped", "hello there (Stopped)")
    assert overlay.visible_lines() == ["hello there\u2003\u2066Stopped\u2069"]


@contextmanager
def overlay_of_a_controller(qtbot, settings, journal_dir, deny: bool):
    """(controller with the fake model loaded, its overlay); ``deny``: every start fails (the mic refuses)."""
    from PySide6.QtWidgets import QWidget

    from app.controller import SessionController
    from tests.app import fake_engine
    from tests.app.fake_sounddevice import FakeSoundDevice, make_device

    sd = FakeSoundDevice([make_device("Built-in Mic")], deny=deny)
    c = SessionController(loader=fake_engine.load_model, sounddevice=sd, journal_dir=journal_dir)
    try:
        parent = QWidget()
        qtbot.addWidget(parent)
        overlay = OverlayManager(c, settings, parent).overlay
        qtbot.addWidget(overlay)
        with qtbot.waitSignal(c.model_changed, timeout=5000):
            c.load_model("fake-moonshine", "auto")
        yield c, overlay
    finally:
        c.shutdown(5000)


def test_the_overlay_shows_the_transcript_the_views_get_back(qtbot, settings, journal_dir):
    """QA: after a failed start or a Recover the overlay went blank (it cleared on ``lines_reset``) while the main
    view showed the lines again. It shows the controller's lines, as the views do."""
    from app.worker import SessionSpec

    with overlay_of_a_controller(qtbot, settings, journal_dir, deny=True) as (c, overlay):  # every start fails
        crashed = c.store.create({"source": "microphone"})  # a session that did not end cleanly
        for i in range(3):
            crashed.add(Line(f"recovered line {i}", 2.0 * i, 2.0 * i + 1))
        crashed._file.close()
        c.recover(c.pending_recovery())
        assert overlay.text() == "recovered line 0 recovered line 1 recovered line 2"
        with qtbot.waitSignal(c.session_failed, timeout=5000):
            c.start(SessionSpec())
            assert overlay.text() == ""  # a new session starts empty
        assert overlay.text() == "recovered line 0 recovered line 1 recovered line 2"
        assert overlay.note() == "Stopped"


def test_the_overlay_says_starting_until_the_session_runs(qtbot, settings, journal_dir):
    """QA: between Start and the worker's answer (the device opening: up to a second or two) the overlay said
    "Not captioning" over an emptied strip, as if Start had not been pressed. It says "Starting…" until the session
    runs, and goes back to the old state when the start fails."""
    from app.worker import SessionSpec

    for deny in (False, True):
        with overlay_of_a_controller(qtbot, settings, journal_dir, deny=deny) as (c, overlay):
            assert overlay.note() == "Not captioning"
            answer = c.session_failed if deny else c.state_changed
            with qtbot.waitSignal(answer, timeout=5000):
                c.start(SessionSpec())
                assert overlay.note() == "Starting\u2026" and overlay.accessibleDescription() == "Starting\u2026"
            want = "idle" if deny else "running"
            qtbot.waitUntil(lambda c=c, want=want: c.state == want, timeout=5000)
            assert overlay.note() == ("Not captioning" if deny else "Waiting for speech\u2026")
