"""History pane: timestamps, search, copy, auto-scroll."""

from __future__ import annotations

from PySide6.QtGui import QGuiApplication

from app.history import HistoryPane
from engine.events import Line

LINES = [
    Line("Welcome to the talk.", 1.0, 2.0),
    Line("Questions at the end.", 65.0, 67.0),
    Line("Thank you all.", 3700.0, 3702.0),
]


def test_timestamps_search_and_copy(qtbot):
    pane = HistoryPane()
    qtbot.addWidget(pane)
    pane.set_lines(LINES)
    texts = [pane.list.item(i).text() for i in range(pane.list.count())]
    assert texts == [
        "00:00:01   Welcome to the talk.",
        "00:01:05   Questions at the end.",
        "01:01:40   Thank you all.",
    ]
    pane.search.setText("THE")
    hidden = [pane.list.item(i).isHidden() for i in range(3)]
    assert hidden == [False, False, True] and pane.matches.text() == "2 matches"
    pane.add_line(Line("Something else.", 3800, 3801))  # new lines are filtered too
    assert pane.list.item(3).isHidden()
    pane.search.clear()
    assert not any(pane.list.item(i).isHidden() for i in range(4)) and pane.matches.text() == ""

    pane.copy()  # nothing selected: everything, without timestamps
    assert QGuiApplication.clipboard().text() == "\n".join([*(line.text for line in LINES), "Something else."])
    pane.list.item(1).setSelected(True)
    pane.copy(timestamps=True)
    assert QGuiApplication.clipboard().text() == "[00:01:05] Questions at the end."
    assert [a.text() for a in pane.context_menu().actions() if a.text()] == [
        "Copy",
        "Copy with timestamps",
        "Select all",
    ]


def following_pane(qtbot, width: int, height: int, texts: list[str]) -> HistoryPane:
    """A shown pane of ``width x height`` with a line for each of ``texts``, scrolled to the end by following."""
    pane = HistoryPane()
    qtbot.addWidget(pane)
    pane.resize(width, height)
    pane.show()
    for i, text in enumerate(texts):
        pane.add_line(Line(text, i, i + 1))
    bar = pane.list.verticalScrollBar()
    qtbot.waitUntil(lambda: bar.value() == bar.maximum(), timeout=1000)
    return pane


def test_follows_new_lines_unless_scrolled_up(qtbot):
    pane = following_pane(qtbot, 300, 150, [f"line {i}" for i in range(50)])
    bar = pane.list.verticalScrollBar()
    qtbot.waitUntil(lambda: bar.maximum() > 0 and bar.value() == bar.maximum(), timeout=1000)
    bar.setValue(0)
    pane.add_line(Line("late line", 60, 61))
    qtbot.wait(10)
    assert bar.value() == 0


def _count_color(image, color) -> int:
    from PySide6.QtGui import QColor

    want = QColor(color).rgb()
    return sum(1 for y in range(image.height()) for x in range(0, image.width(), 2) if image.pixel(x, y) == want)


def test_search_highlights_the_matches(qtbot):
    from app.history import MATCH_BACKGROUND

    pane = HistoryPane()
    qtbot.addWidget(pane)
    pane.resize(420, 240)
    pane.set_lines(LINES)
    pane.show()
    assert _count_color(pane.list.viewport().grab().toImage(), MATCH_BACKGROUND) == 0
    pane.search.setText("talk")
    qtbot.wait(10)
    marked = _count_color(pane.list.viewport().grab().toImage(), MATCH_BACKGROUND)
    assert marked > 20  # the match is drawn on a highlight
    assert pane.delegate.matches("00:00:01   Welcome to the talk.", 11) == [(26, 30)]
    pane.search.setText("00")  # a timestamp is not a match: nothing shown, nothing marked
    assert pane.matches.text() == "0 matches"
    assert pane.delegate.matches("00:00:01   Welcome to the talk.", 11) == []


def test_the_pane_finds_what_the_sessions_search_finds(qtbot):
    """The Sessions window's search compares casefolded text ("strasse" finds "Straße"); the opened session's
    pane, given the same words, compared lowercased: "0 matches" and every line hidden (found in QA)."""
    pane = HistoryPane()
    qtbot.addWidget(pane)
    pane.set_lines([Line("Die Straße ist lang", 0.0, 1.0), Line("und breit", 1.0, 2.0)])
    pane.search.setText("strasse")
    assert pane.matches.text() == "1 match" and [pane.list.item(i).isHidden() for i in range(2)] == [False, True]
    text = pane.list.item(0).text()
    skip = text.index("Die")
    assert pane.delegate.matches(text, skip) == [(skip + 4, skip + 10)]  # "Straße", whole
    pane.search.setText("STRASSE IST")
    assert pane.matches.text() == "1 match"


def test_many_lines_are_laid_out_once_each_not_once_per_line_before_them(qtbot, monkeypatch):
    """Opening an hour's session (800 lines) took 3 s, three hours ~30 s: each line scrolled to the end, which
    sizes every row before it. Counted, not timed: setting N lines sizes rows a few times N, not N * N / 2."""
    from PySide6.QtWidgets import QApplication

    from app.history import MatchDelegate

    sized = []
    original = MatchDelegate.sizeHint
    monkeypatch.setattr(MatchDelegate, "sizeHint", lambda self, o, i: sized.append(1) or original(self, o, i))
    pane = HistoryPane()
    qtbot.addWidget(pane)
    pane.resize(400, 300)
    pane.show()
    qtbot.waitExposed(pane)
    lines = [Line(f"line number {i} of the session", 4.0 * i, 4.0 * i + 3.0) for i in range(300)]
    pane.set_lines(lines)
    QApplication.processEvents()
    assert len(sized) <= 4 * len(lines) and pane.lines() == lines
    bar = pane.list.verticalScrollBar()
    assert bar.maximum() > 0 and bar.value() == bar.maximum()  # it shows the end, as a live session does
    pane.search.setText("number 29")  # with a search on, the new lines are filtered and counted
    pane.set_lines(lines[:200])
    assert pane.matches.text() == "1 match" and len(pane.lines()) == 200


def test_rows_are_sized_again_when_the_font_changes(qtbot):
    """Row heights are remembered per text and width; a larger font (the theme, the user's font) must not leave
    rows at their old height, clipping the text."""
    pane = HistoryPane()
    qtbot.addWidget(pane)
    pane.resize(300, 400)
    pane.show()
    qtbot.waitExposed(pane)
    pane.set_lines(LINES)
    first = pane.list.item(0)
    qtbot.waitUntil(lambda: pane.list.visualItemRect(first).height() > 0)
    before = pane.list.visualItemRect(first).height()
    font = pane.list.font()
    font.setPointSizeF(font.pointSizeF() * 3)
    pane.list.setFont(font)
    qtbot.waitUntil(lambda: pane.list.visualItemRect(first).height() > 2 * before)


def test_copy_with_no_lines_keeps_the_clipboard(qtbot):
    QGuiApplication.clipboard().setText("what the user copied before")
    pane = HistoryPane()
    qtbot.addWidget(pane)
    copied = []
    pane.copied.connect(copied.append)
    assert not pane.copy_button.isEnabled()
    pane.copy()  # Ctrl+C in the empty list
    assert QGuiApplication.clipboard().text() == "what the user copied before" and copied == [0]
    pane.add_line(LINES[0])
    assert pane.copy_button.isEnabled()
    pane.clear()
    assert not pane.copy_button.isEnabled()
    pane.set_lines(LINES)
    assert pane.copy_button.isEnabled()


def test_right_to_left_lines_keep_their_timestamp_on_the_columns_side(qtbot):
    from PySide6.QtWidgets import QStyleOptionViewItem

    pane = HistoryPane()
    qtbot.addWidget(pane)
    pane.set_lines(
        [
            Line("Welcome to the talk.", 1.0, 2.0),
            Line("\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645", 3.0, 4.0),
        ]
    )
    option = QStyleOptionViewItem()
    option.direction = pane.list.layoutDirection()
    starts = []
    for i in range(2):
        doc = pane.delegate.document(pane.list.item(i).text(), 600.0, option)
        block = doc.firstBlock()
        doc.documentLayout().blockBoundingRect(block)  # laid out (a line of an unlaid block is not valid)
        starts.append(block.layout().lineAt(0).naturalTextRect().x())
    assert starts == [0.0, 0.0]  # the Arabic row starts at the left edge too, with its timestamp


def test_a_new_line_sizes_only_itself_and_a_narrower_pane_sizes_all_again(qtbot, monkeypatch):
    """Each new line made the list size every row again (rows of different heights) at a Python call and a text
    look-up each: 34 ms a line after 6000 lines (five hours; QA). Known rows are a list look-up now; only the new
    row is laid out, and a width change lays them all out again (wrapped to the new width)."""
    from PySide6.QtWidgets import QApplication

    from app.history import MatchDelegate

    pane = HistoryPane()
    qtbot.addWidget(pane)
    pane.resize(600, 300)
    pane.show()
    qtbot.waitExposed(pane)
    words = "a line long enough to wrap when the pane is narrow enough for it to wrap at all"
    pane.set_lines([Line(f"{i} {words}", i, i + 1) for i in range(300)])
    QApplication.processEvents()
    laid_out = []
    original = MatchDelegate._size
    monkeypatch.setattr(MatchDelegate, "_size", lambda self, *a: laid_out.append(1) or original(self, *a))
    pane.add_line(Line("300 the new line", 300, 301))
    QApplication.processEvents()
    assert 1 <= len(laid_out) <= 2
    last = pane.list.item(pane.list.count() - 2)  # a long line
    before = pane.list.visualItemRect(last).height()
    pane.resize(200, 300)
    qtbot.waitUntil(lambda: pane.list.visualItemRect(last).height() > before, timeout=3000)


def test_esc_in_the_search_field_clears_it(qtbot):
    """Esc in the search field did nothing; only its x button cleared a search that found nothing (QA)."""
    from PySide6.QtCore import Qt
    from PySide6.QtTest import QTest
    from PySide6.QtWidgets import QApplication

    pane = HistoryPane()
    qtbot.addWidget(pane)
    pane.set_lines(LINES)
    pane.show()
    pane.activateWindow()
    pane.search.setFocus()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is pane.search, timeout=2000)
    QTest.keyClicks(pane.search, "zebra")
    assert all(pane.list.item(i).isHidden() for i in range(3))
    QTest.keyClick(pane.search, Qt.Key.Key_Escape)
    assert pane.search.text() == "" and not any(pane.list.item(i).isHidden() for i in range(3))


def test_keeps_following_when_the_window_gets_smaller(qtbot):
    """HiDPI QA: after the window was made smaller (the bar's range grew, nobody scrolled) the pane counted as
    scrolled up and the newest lines went off screen, while the caption view kept following."""
    pane = following_pane(qtbot, 500, 600, [f"line {i} with a few more words to wrap when narrow" for i in range(8)])
    bar = pane.list.verticalScrollBar()
    pane.resize(160, 150)
    qtbot.waitUntil(lambda: bar.maximum() > 2, timeout=1000)
    pane.add_line(Line("NEWEST line", 20, 21))
    newest = pane.list.item(pane.list.count() - 1)
    qtbot.waitUntil(lambda: pane.list.viewport().rect().intersects(pane.list.visualItemRect(newest)), timeout=1000)
    assert pane.following


def test_a_new_session_follows_and_a_search_keeps_the_readers_state(qtbot):
    """Review: a reader at the very top of one session left the next one not following (clearing moves no scroll
    bar, so nothing said "at the end"), and a search that hid rows turned following on for a reader scrolled up."""
    pane = following_pane(qtbot, 300, 200, [f"line {i} with a few more words" for i in range(40)])
    bar = pane.list.verticalScrollBar()
    qtbot.waitUntil(lambda: bar.maximum() > 0 and bar.value() == bar.maximum(), timeout=1000)
    bar.setValue(10)  # scrolled up
    pane.search.setText("line 1")
    qtbot.wait(20)
    pane.search.setText("")
    qtbot.wait(20)
    assert not pane.following  # still the reader's choice
    bar.setValue(0)
    pane.set_lines([])  # the next session
    for i in range(40):
        pane.add_line(Line(f"new {i} with a few more words", i, i + 1))
    newest = pane.list.item(pane.list.count() - 1)
    qtbot.waitUntil(lambda: pane.list.viewport().rect().intersects(pane.list.visualItemRect(newest)), timeout=1000)
    assert pane.following
