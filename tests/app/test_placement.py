"""Windows open on the screen: a geometry saved on a screen of another size (Qt refuses to restore it) gives
the first-start placement, sized to fit; dialogs and the overlay never start larger than the screen."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QWidget

from app.placement import TITLE_BAR
from app.settings import Key

SAVE = """
import sys
from PySide6.QtWidgets import QApplication, QWidget
app = QApplication([])
w = QWidget()
w.setGeometry(1200, 900, 1400, 600)
w.show()
app.processEvents()
sys.stdout.write(bytes(w.saveGeometry().data()).hex())
"""


def on_screen(tmp_path: Path, width: int, height: int, code: str) -> str:
    """What ``code`` writes to stdout, run in another process whose (offscreen) screen is ``width x height``."""
    config = tmp_path / f"screen-{width}x{height}.json"
    screen = {"name": "s", "x": 0, "y": 0, "width": width, "height": height, "logicalDpi": 96, "logicalBaseDpi": 96}
    config.write_text(json.dumps({"screens": [{**screen, "dpr": 1}]}))
    env = {**os.environ, "QT_QPA_PLATFORM": f"offscreen:configfile={config}"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60, check=True)
    return out.stdout.strip()


@pytest.fixture(scope="module")
def geometry_of_a_large_screen(tmp_path_factory) -> bytes:
    """``saveGeometry`` bytes of a window on a 2560 x 1440 screen."""
    return bytes.fromhex(on_screen(tmp_path_factory.mktemp("screen"), 2560, 1440, SAVE))


def area():
    return QGuiApplication.primaryScreen().availableGeometry()


def test_this_screen_refuses_the_large_screens_geometry(qtbot, geometry_of_a_large_screen):
    # the premise of the tests below: without a fallback a window would stay at Qt's 640 x 480 at the corner
    w = QWidget()
    qtbot.addWidget(w)
    assert area().width() < 2560 * 0.75
    assert not w.restoreGeometry(geometry_of_a_large_screen)


def test_main_window_from_another_screen_gets_its_first_start_size(
    qtbot, controller, settings, fake_sd, geometry_of_a_large_screen
):
    from app.main_window import FIRST_SIZE, MainWindow

    settings.set_value(Key.WINDOW_GEOMETRY, geometry_of_a_large_screen)
    w = MainWindow(controller, settings, sounddevice=fake_sd)
    qtbot.addWidget(w)
    a, (width, height) = area(), FIRST_SIZE
    assert (w.width(), w.height()) == (min(width, int(a.width() * 0.9)), min(height, int(a.height() * 0.9)))


def test_sessions_window_from_another_screen_fits(qtbot, tmp_path: Path, settings, geometry_of_a_large_screen):
    from app.session_store import SessionStore
    from app.sessions_view import SessionsWindow

    settings.set_value(Key.SESSIONS_GEOMETRY, geometry_of_a_large_screen)
    w = SessionsWindow(SessionStore(tmp_path / "sessions"), settings)
    qtbot.addWidget(w)
    a = area()
    assert (w.width(), w.height()) == (min(1100, int(a.width() * 0.9)), min(620, int(a.height() * 0.9)))


def overlay_manager(qtbot, controller, settings):
    from app.overlay_manager import OverlayManager

    parent = QWidget()
    qtbot.addWidget(parent)
    manager = OverlayManager(controller, settings, parent)
    qtbot.addWidget(manager.overlay)
    return manager


def test_overlay_from_another_screen_sits_low_and_centred(qtbot, controller, settings, geometry_of_a_large_screen):
    settings.set_value(Key.OVERLAY_GEOMETRY, geometry_of_a_large_screen)
    g, a = overlay_manager(qtbot, controller, settings).overlay.geometry(), area()
    # not Qt's corner (over the main window's menus): the first-start place, low and centred
    assert a.contains(g) and g.top() > a.center().y()
    assert abs(g.center().x() - a.center().x()) <= 1


def test_overlay_with_the_largest_font_starts_on_the_screen(qtbot, controller, settings):
    settings.set_value(Key.OVERLAY_FONT_SIZE, 200)
    settings.set_value(Key.OVERLAY_LINES, 5)
    g, a = overlay_manager(qtbot, controller, settings).overlay.geometry(), area()
    assert g.top() >= a.top() and g.height() <= a.height()


def test_model_dialog_is_never_larger_than_the_screen(tmp_path: Path):
    # 800 x 500: a 1600 x 1000 screen at 200 %; the dialog's minimum was 800 x 640, its buttons off the screen
    code = (
        "from PySide6.QtWidgets import QApplication\n"
        "app = QApplication([])\n"
        "from app.model_dialog import ModelDialog\n"
        "d = ModelDialog(None, None)\n"
        "a = app.primaryScreen().availableGeometry()\n"
        "print(a.width(), a.height(), d.minimumWidth(), d.minimumHeight(), d.width(), d.height())\n"
    )
    aw, ah, min_w, min_h, w, h = map(int, on_screen(tmp_path, 800, 500, code).split())
    assert (aw, ah) == (800, 500)
    assert min_w <= aw and min_h <= ah and w <= aw and h <= ah
    # 1093 x 614: 1366 x 768 at 125 % (HiDPI QA): as tall as the screen, its title bar pushed the buttons off it
    aw, ah, min_w, min_h, w, h = map(int, on_screen(tmp_path, 1093, 614, code).split())
    assert min_h + TITLE_BAR <= ah and h + TITLE_BAR <= ah


def test_a_long_message_fits_a_short_screen(tmp_path: Path):
    """Help > Keyboard shortcuts was a message box 630 px high on a 512 px screen (1024 x 768 at 150 %), its
    button below the edge: the list now scrolls in a dialog no larger than the screen."""
    code = (
        "from PySide6.QtWidgets import QApplication\n"
        "app = QApplication([])\n"
        "from app.info_dialog import InfoDialog\n"
        "row = '<tr><td><b>Ctrl+Shift+O</b></td><td>Show or hide the caption overlay</td><td>View</td></tr>'\n"
        "rows = row * 30\n"
        "d = InfoDialog(None, 'Keyboard shortcuts', f'<table cellspacing=6>{rows}</table>')\n"
        "d.show()\n"
        "app.processEvents()\n"
        "a = app.primaryScreen().availableGeometry()\n"
        "print(a.height(), d.frameGeometry().height(), d.label.text().count('<tr>'))\n"
    )
    screen, height, rows = map(int, on_screen(tmp_path, 683, 512, code).split())
    assert screen == 512 and height <= screen and rows == 30  # 30 rows need some 800 px: they scroll


def test_a_place_from_another_screen_keeps_its_share_of_the_screen(
    qtbot, tmp_path: Path, controller, settings, fake_sd, geometry_of_a_large_screen
):
    """HiDPI QA: moved to the bottom-right at one scale factor and started at another, the overlay and the main
    window came back at their first-start places (Qt refuses the geometry). They keep their share of the screen."""
    from app.main_window import MainWindow
    from tests.app.conftest import REPO

    code = (
        SAVE.replace("import sys\n", f"import sys\nsys.path.insert(0, {str(REPO)!r})\n")
        .replace("sys.stdout.write(bytes(w.saveGeometry().data()).hex())", "from app import placement")
        .replace("w.setGeometry(1200, 900, 1400, 600)", "w.setGeometry(1100, 800, 1300, 500)")
    ) + "print(placement.relative(w))\n"
    place = on_screen(tmp_path, 2560, 1440, code)  # 1100, 800, 1300 x 500 of 2560 x 1440: low, right of centre
    a = area()

    def near(got: int, share: float, of: int, offset: int = 0) -> bool:
        return abs(got - (offset + share * of)) <= 2

    settings.set_value(Key.OVERLAY_GEOMETRY, geometry_of_a_large_screen)
    settings.set_value(Key.OVERLAY_PLACE, place)
    g = overlay_manager(qtbot, controller, settings).overlay.geometry()
    assert near(g.x(), 1100 / 2560, a.width(), a.x()) and near(g.width(), 1300 / 2560, a.width()), (place, g, a)
    assert a.contains(g) and g.bottom() > a.center().y()  # low on the screen, as it was
    settings.set_value(Key.WINDOW_GEOMETRY, geometry_of_a_large_screen)
    settings.set_value(Key.WINDOW_PLACE, place)
    w = MainWindow(controller, settings, sounddevice=fake_sd)
    qtbot.addWidget(w)
    assert near(w.x(), 1100 / 2560, a.width(), a.x()) and a.contains(w.geometry()), (place, w.geometry(), a)
    for damaged in ("", "1 2", "x y z w", "0.5 0.5 9 9", "0 0 0 0"):  # nothing, or not shares: the first place
        settings.set_value(Key.OVERLAY_PLACE, damaged)
        g = overlay_manager(qtbot, controller, settings).overlay.geometry()
        assert a.contains(g) and abs(g.center().x() - a.center().x()) <= 1, damaged


def test_an_overlay_from_another_screen_is_as_tall_as_its_lines_need(
    qtbot, controller, settings, geometry_of_a_large_screen
):
    """QA: 4 lines at 40 pt, 270 px high on a 2560 x 1440 screen, came back 144 px high on a 1366 x 768 one (its
    share of the screen's height) and showed 2 of its 4 lines: the font is not scaled. Its place and width keep
    their shares; its height is what its lines and font need."""
    from PySide6.QtGui import QFont

    from engine.events import Line

    font = QFont("DejaVu Sans")
    font.setPointSize(40)
    settings.set_value(Key.OVERLAY_FONT, font.toString())
    settings.set_value(Key.OVERLAY_LINES, 4)
    settings.set_value(Key.OVERLAY_GEOMETRY, geometry_of_a_large_screen)  # refused here
    settings.set_value(Key.OVERLAY_PLACE, f"{1500 / 2560:.4f} {1100 / 1440:.4f} {1000 / 2560:.4f} {270 / 1440:.4f}")
    overlay = overlay_manager(qtbot, controller, settings).overlay
    g, a = overlay.geometry(), area()
    assert a.height() * 270 / 1440 < 0.6 * overlay.sizeHint().height() <= a.height()  # the premise: the share cut
    assert g.height() == overlay.sizeHint().height() and a.contains(g), (g, a)
    assert abs(g.width() - a.width() * 1000 / 2560) <= 2 and g.bottom() > a.center().y()
    for i in range(6):
        overlay.commit(Line(f"line {i} with a few words in it", i, i + 1))
    assert len(overlay.visible_lines()) == 4
