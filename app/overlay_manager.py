"""Connects the caption overlay to the session and to the settings, and builds its menu.

The menu (shared by the main window's View menu and the overlay's right-click) sets the number of
lines, font, colours, background opacity, click-through and presentation mode; every choice is saved
at once, as is the overlay's geometry after the user moves or resizes it.

The overlay shows what the main window's caption view shows: the controller's lines (again after they are
replaced: a new session, a recovered one, the last one back after a failed start), the partial, and the session's
state (running, waiting for an input, paused, or not captioning).
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QAction, QActionGroup, QColor, QFont, QGuiApplication
from PySide6.QtWidgets import QApplication, QColorDialog, QFontDialog, QMenu, QWidget

from app import placement
from app.controller import SessionController
from app.overlay import CaptionOverlay, OverlayStyle, SessionState
from app.settings import Key, Settings

OPACITIES = (0.0, 0.25, 0.5, 0.65, 0.8, 0.9, 1.0)


class OverlayManager(QObject):
    """Owns the overlay window. ``toggle_action`` shows/hides it; ``menu`` holds its appearance options."""

    visibility_changed = Signal(bool)

    def __init__(self, controller: SessionController, settings: Settings, parent: QWidget) -> None:
        super().__init__(parent)
        self._settings = settings
        self._parent = parent
        self._controller = controller
        self.overlay = CaptionOverlay()
        self.overlay.set_overlay_style(self._load_style())
        if not placement.restore(self.overlay, settings.value(Key.OVERLAY_GEOMETRY)):  # saved on another screen
            if placement.place_relative(self.overlay, settings.value(Key.OVERLAY_PLACE)):
                self.overlay.fit_height()  # its share of that screen's height cut lines: the font is not scaled
            else:
                self._place_default()
        self.overlay.geometry_changed.connect(self.save_geometry)
        self.overlay.closed.connect(lambda: self._set_visible_action(False))
        controller.line_committed.connect(self.overlay.commit)
        controller.partial_changed.connect(self.overlay.set_partial)
        controller.lines_reset.connect(self._show_lines)
        c = controller
        # lines_reset and session_failed: a Start (starting) or a failed one (not any more)
        for changed in (
            c.state_changed,
            c.input_waiting,
            c.server_waiting,
            c.device_recovered,
            c.lines_reset,
            c.session_failed,
        ):
            changed.connect(self._show_state)
        self._show_lines()
        self._show_state()

        self.toggle_action = QAction("Caption overlay", self)
        self.toggle_action.setCheckable(True)
        self.toggle_action.setToolTip("Show the captions in a small always-on-top window")
        self.toggle_action.toggled.connect(self.set_visible)
        self.presentation_action = QAction("Presentation mode (full screen)", self)
        self.presentation_action.setCheckable(True)
        self.presentation_action.toggled.connect(self.set_presentation)
        self.overlay.presentation_changed.connect(self.presentation_action.setChecked)
        self.overlay.presentation_changed.connect(self._after_presentation)
        self._before: tuple[bool, Any, Any] | None = None  # before presentation: overlay shown, window, focus
        self.click_through_action = QAction("Click-through overlay", self)
        self.click_through_action.setCheckable(True)
        self.click_through_action.setChecked(self.overlay.overlay_style().click_through)
        self.click_through_action.setToolTip("The overlay ignores the mouse; turn this off here to move it again")
        self.click_through_action.toggled.connect(self._set_click_through)
        self.adjust_action = QAction("Move or resize with the keyboard", self)
        self.adjust_action.setToolTip("Arrow keys move the overlay, Shift+arrows resize it; Enter keeps, Esc undoes")
        self.adjust_action.triggered.connect(self.start_adjusting)
        self.overlay.adjust_finished.connect(self._after_adjusting)
        self.reset_action = QAction("Put back at the bottom of the screen", self)
        self.reset_action.triggered.connect(self.reset_place)
        self.menu = self._build_menu()
        self.overlay.set_context_menu(self.menu)

    # -- what the overlay shows ------------------------------------------------------------------
    def _show_lines(self) -> None:
        """The controller's lines, as the caption view shows them (its transcript was replaced)."""
        self.overlay.set_lines(self._controller.lines)

    def _show_state(self, *_: object) -> None:
        """The session's state, for the overlay's note (``controller.waiting``: running with no audio input)."""
        c = self._controller
        state: SessionState = "idle"
        if c.starting and c.state not in ("running", "paused"):  # Start pressed: the overlay says so, not "Not ..."
            state = "starting"
        elif c.state == "running":
            state = "waiting" if c.waiting else "running"
        elif c.state == "paused":
            state = "paused"
        self.overlay.set_session_state(state)

    # -- visibility ------------------------------------------------------------------------------
    def set_visible(self, visible: bool) -> None:
        """Show or hide the overlay (remembered for the next start)."""
        if visible:
            self.overlay.show()
            self.overlay.raise_()
        else:
            if self.overlay.adjusting:
                self.overlay.finish_adjusting(keep=True)
            if self.overlay.presentation:
                self.overlay.set_presentation(False)
            self.save_geometry()
            self.overlay.hide()
        self._set_visible_action(visible)
        self._settings.set_value(Key.OVERLAY_VISIBLE, visible)
        self.visibility_changed.emit(visible)

    def _set_visible_action(self, visible: bool) -> None:
        if self.toggle_action.isChecked() != visible:
            self.toggle_action.blockSignals(True)
            self.toggle_action.setChecked(visible)
            self.toggle_action.blockSignals(False)

    def set_presentation(self, on: bool) -> None:
        """Full-screen presentation of the captions (shows the overlay when needed); leaving it (here, F11 or Esc)
        puts back the overlay as it was and gives the keyboard back to the window and widget that had it."""
        if self.overlay.adjusting:  # presentation takes over adjusting's keyboard, and gives it back later
            before, self._before = self._before, None
            self.overlay.finish_adjusting(keep=True)
            self._before = before
        if on and not self.overlay.presentation and self._before is None:
            self._before = (self.overlay.isVisible(), QApplication.activeWindow(), QApplication.focusWidget())
        if on and not self.overlay.isVisible():
            self.set_visible(True)
        self.overlay.set_presentation(on)

    def _after_presentation(self, on: bool) -> None:
        if on or self._before is None:
            return
        self._give_back_keyboard()

    def start_adjusting(self) -> None:
        """Move and resize the overlay with the keyboard (shown for it); when that ends, the keyboard goes back
        to the window and widget that had it."""
        if self.overlay.presentation or self.overlay.adjusting:
            return
        self._before = (self.overlay.isVisible(), QApplication.activeWindow(), QApplication.focusWidget())
        self.set_visible(True)
        self.overlay.start_adjusting()

    def _after_adjusting(self, kept: bool) -> None:
        """Kept: the overlay stays shown where it was put; undone (Esc): as it was, hidden again if it was."""
        self.save_geometry()
        if kept and self._before is not None:
            self._before = (True, *self._before[1:])
        self._give_back_keyboard()

    def reset_place(self) -> None:
        """The overlay back at its first place (bottom centre of the main window's screen) and size, shown."""
        if self.overlay.presentation:
            self.overlay.set_presentation(False)
        self.set_visible(True)
        self._place_default()
        self.save_geometry()

    def _give_back_keyboard(self) -> None:
        if self._before is None:
            return
        shown, window, focus = self._before
        self._before = None
        if not shown:
            self.set_visible(False)
        try:  # either may be gone by now (a dialog closed meanwhile)
            if window is not None and window is not self.overlay:
                window.activateWindow()
                window.raise_()
            if focus is not None:
                focus.setFocus(Qt.FocusReason.OtherFocusReason)
        except RuntimeError:
            pass

    def save_geometry(self) -> None:
        if not self.overlay.presentation:
            self._settings.set_value(Key.OVERLAY_GEOMETRY, bytes(self.overlay.saveGeometry().data()))
            self._settings.set_value(Key.OVERLAY_PLACE, placement.relative(self.overlay))

    def close(self) -> None:
        """Save the geometry and close the overlay window (the app is quitting)."""
        self.save_geometry()
        visible = self.overlay.isVisible()
        self.overlay.close()
        self._settings.set_value(Key.OVERLAY_VISIBLE, visible)

    # -- style -----------------------------------------------------------------------------------
    def _load_style(self) -> OverlayStyle:
        s = self._settings
        font = QFont()
        stored = s.value(Key.OVERLAY_FONT)
        if not (stored and font.fromString(stored)):
            font = QFont(QGuiApplication.font())
            font.setPointSize(s.value(Key.OVERLAY_FONT_SIZE))
            font.setWeight(QFont.Weight.DemiBold)
        return OverlayStyle(
            lines=s.value(Key.OVERLAY_LINES),
            font=font,
            text_color=s.value(Key.OVERLAY_TEXT_COLOR),
            background_color=s.value(Key.OVERLAY_BG_COLOR),
            opacity=s.value(Key.OVERLAY_OPACITY),
            click_through=s.value(Key.OVERLAY_CLICK_THROUGH),
        )

    def set_style(self, **changes: object) -> None:
        """Change and save parts of the overlay style (``lines=3``, ``opacity=0.5``, ...)."""
        from dataclasses import replace

        style = replace(self.overlay.overlay_style(), **changes).clamped()
        self.overlay.set_overlay_style(style)
        s = self._settings
        s.set_value(Key.OVERLAY_LINES, style.lines)
        s.set_value(Key.OVERLAY_TEXT_COLOR, style.text_color)
        s.set_value(Key.OVERLAY_BG_COLOR, style.background_color)
        s.set_value(Key.OVERLAY_OPACITY, float(style.opacity))
        s.set_value(Key.OVERLAY_CLICK_THROUGH, style.click_through)
        if style.font is not None:
            s.set_value(Key.OVERLAY_FONT, style.font.toString())
            s.set_value(Key.OVERLAY_FONT_SIZE, max(style.font.pointSize(), 1))

    def _set_click_through(self, on: bool) -> None:
        self.set_style(click_through=on)

    def _choose_font(self) -> None:
        ok, font = QFontDialog.getFont(self.overlay.overlay_style().font or QFont(), self._parent, "Overlay font")
        if ok:
            self.set_style(font=font)

    def _choose_color(self, attr: str, title: str) -> None:
        current = QColor(getattr(self.overlay.overlay_style(), attr))
        color = QColorDialog.getColor(current, self._parent, title)
        if color.isValid():
            self.set_style(**{attr: color.name()})

    def _build_menu(self) -> QMenu:
        menu = QMenu("Overlay", self._parent)
        menu.addAction(self.toggle_action)
        menu.addAction(self.presentation_action)
        menu.addAction(self.click_through_action)
        menu.addAction(self.adjust_action)
        menu.addAction(self.reset_action)
        menu.addSeparator()
        lines_menu = menu.addMenu("Lines")
        group = QActionGroup(lines_menu)
        for n in range(2, 6):
            action = lines_menu.addAction(f"{n} lines")
            action.setCheckable(True)
            action.setChecked(n == self.overlay.overlay_style().lines)
            action.triggered.connect(lambda _=False, n=n: self.set_style(lines=n))
            group.addAction(action)
        opacity_menu = menu.addMenu("Background opacity")
        group = QActionGroup(opacity_menu)
        for value in OPACITIES:
            action = opacity_menu.addAction(f"{round(value * 100)} %")
            action.setCheckable(True)
            action.setChecked(abs(value - self.overlay.overlay_style().opacity) < 0.01)
            action.triggered.connect(lambda _=False, v=value: self.set_style(opacity=v))
            group.addAction(action)
        menu.addAction("Font\u2026").triggered.connect(self._choose_font)
        menu.addAction("Text colour\u2026").triggered.connect(
            lambda: self._choose_color("text_color", "Overlay text colour")
        )
        menu.addAction("Background colour\u2026").triggered.connect(
            lambda: self._choose_color("background_color", "Overlay background colour")
        )
        if QGuiApplication.platformName() == "wayland":
            note = menu.addAction("Wayland: the compositor decides stacking and position")
            note.setEnabled(False)
        return menu

    def _place_default(self) -> None:
        area = placement.area(self._parent)
        if area is None:
            return
        width = min(1000, int(area.width() * 0.8))
        height = min(self.overlay.sizeHint().height(), area.height())  # a large font: no taller than the screen
        self.overlay.resize(width, height)
        self.overlay.move(area.center().x() - width // 2, max(area.top(), area.bottom() - height - 60))
