#!/usr/bin/env python3
"""The sessions library at scale: how long the app's session work takes with a year of kept sessions.

Writes ``--sessions`` journals of ``--lines`` committed lines each (the app's format, random words; 800 lines
is about an hour of speech) into a temporary folder, then times, each the median of ``--runs``:

- **start-up**: ``journal.find_unfinished``, what the app does at every start to offer a crashed session;
- **retention by age**: a new store's ``apply_retention`` with a "keep the last N days" policy that keeps every
  session, what the app does at every start (and after each session) with such a setting;
- **Sessions window, first open**: a new store and window, without the folder's summary index (every journal
  read once, as the first time ever) and with it (kept from the earlier open: no journal read);
- **search, first keystroke**: a new store's search (every journal read once: the search looks at every line);
  then in a new window whose search box has focus (it has at open), after the window has read the sessions a
  turn of the event loop at a time: how long that took, its longest turn, and the first keystroke after it;
- **search keystroke**: the Sessions window's search box typed one letter at a time (its list and the open
  session are refreshed per keystroke), a word every session holds and one none does;
- **open a session**: another row selected (its lines laid out in the history pane);
- **history, set / add**: the history pane given ``--lines`` lines at once, then one more line (a live commit).

Offscreen Qt; nothing is written outside the temporary folder.

    QT_QPA_PLATFORM=offscreen .venv/bin/python benchmarks/sessions_scale.py --sessions 300 --lines 800
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
for _p in (HERE.parent, HERE):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

import _common  # noqa: E402

WORDS = "the quarterly planning meeting release schedule spring milestones beta translation agenda reminder".split()


def write_sessions(folder: Path, sessions: int, lines: int) -> None:
    """``sessions`` finished journals of ``lines`` lines, one a day (ids and times as the app writes them)."""
    rng = random.Random(0)
    for n in range(sessions):
        day = time.gmtime(1_735_700_000 + 86400 * n)
        sid = time.strftime("%Y%m%d-%H%M%S", day)
        records = [{"type": "start", "time": time.strftime("%Y-%m-%dT%H:%M:%S", day), "source": "microphone"}]
        records += [
            {
                "type": "line",
                "text": " ".join(rng.choice(WORDS) for _ in range(12)),
                "start": 4.0 * i,
                "end": 4.0 * i + 3,
            }
            for i in range(lines)
        ]
        records.append({"type": "end", "audio_s": 4.0 * lines})
        path = folder / f"{sid}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
        os.utime(path, (1_735_700_000 + 86400 * n,) * 2)


def timed(fn, runs: int) -> float:
    """Median milliseconds of ``fn()`` over ``runs`` calls."""
    samples = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        samples.append(1000 * (time.perf_counter() - t))
    return statistics.median(samples)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sessions", type=int, default=300)
    p.add_argument("--lines", type=int, default=800)
    p.add_argument("--runs", type=int, default=5)
    args = p.parse_args(argv)
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

    from PySide6.QtWidgets import QApplication

    from app.history import HistoryPane
    from app.journal import find_unfinished
    from app.session_store import Retention, SessionStore
    from app.sessions_view import SessionsWindow
    from app.settings import Settings
    from engine.events import Line

    app = QApplication.instance() or QApplication([])
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "sessions"
        folder.mkdir()
        write_sessions(folder, args.sessions, args.lines)
        rows = {"start-up (find_unfinished)": timed(lambda: find_unfinished(folder), args.runs)}
        by_age = Retention("days", 100_000)  # as "keep the last year" once a year of sessions is kept: none goes
        rows["retention by age"] = timed(lambda: SessionStore(folder).apply_retention(by_age), args.runs)

        windows = []

        def first_open(index: bool):
            if not index:
                (folder / "index.json").unlink(missing_ok=True)
            w = SessionsWindow(SessionStore(folder), Settings(Path(tmp) / "settings.ini"))
            w.show()
            app.processEvents()
            windows.append(w)

        rows["Sessions window, first open, no index yet"] = timed(lambda: first_open(False), args.runs)
        rows["Sessions window, first open"] = timed(lambda: first_open(True), args.runs)
        rows["search, first keystroke"] = timed(lambda: SessionStore(folder).search("mile"), args.runs)
        for window in windows[:-1]:
            window.close()
        warmed = []

        def warm_then_type():
            w = SessionsWindow(SessionStore(folder), Settings(Path(tmp) / "settings.ini"))
            w.show()
            w.activateWindow()
            w.search.setFocus()
            turns = []
            prepare = w.store.prepare_search

            def timed_prepare(session_id):  # one turn's reading
                t = time.perf_counter()
                prepare(session_id)
                turns.append(time.perf_counter() - t)

            w.store.prepare_search = timed_prepare
            t0 = time.perf_counter()
            for _ in range(100):  # until the focus event has come (it starts the reading)
                if w._warm_timer.isActive():
                    break
                app.processEvents()
            while w._warm_timer.isActive():
                app.processEvents()
            warm = time.perf_counter() - t0
            longest = max(turns, default=0.0)
            t = time.perf_counter()
            w.search.setText("mile")
            app.processEvents()
            warmed.append((1000 * warm, 1000 * longest, 1000 * (time.perf_counter() - t)))
            w.close()

        for _ in range(args.runs):
            warm_then_type()
        for i, name in enumerate(("reading while the box has focus", "its longest turn (one session read)")):
            rows[f"search, {name}"] = statistics.median(r[i] for r in warmed)
        rows["search, first keystroke after that"] = statistics.median(r[2] for r in warmed)
        w = windows[-1]

        def keystrokes():
            for text in ("m", "mi", "mil", "mile"):
                w.search.setText(text)
                app.processEvents()
            w.search.clear()
            app.processEvents()

        rows["search, per keystroke"] = timed(keystrokes, args.runs) / 5

        def keystrokes_rare():  # a word no session holds: each keystroke past the first letters finds nothing
            for text in ("z", "ze", "zeb", "zebr", "zebra"):
                w.search.setText(text)
                app.processEvents()

        rows["search, per keystroke, a word in no session"] = timed(keystrokes_rare, args.runs) / 5
        w.search.clear()
        app.processEvents()
        ids = w.ids()

        def open_other():
            w.select(ids[1] if w.current_id() == ids[0] else ids[0])
            app.processEvents()

        rows["open a session"] = timed(open_other, args.runs)
        pane = HistoryPane()
        pane.resize(500, 600)
        pane.show()
        lines = list(w.store.lines(ids[0]))
        rows[f"history, {len(lines)} lines set"] = timed(
            lambda: (pane.set_lines(lines), app.processEvents()), args.runs
        )
        more = iter(range(10**6))
        rows["history, one line added after them"] = timed(
            lambda: (pane.add_line(Line(f"one more {next(more)}", 1e5, 1e5 + 1)), app.processEvents()), args.runs
        )
        for window in windows:
            window.close()
    print(f"{args.sessions} sessions of {args.lines} lines, median of {args.runs} runs (ms):\n")
    print(_common.markdown_table(["step", "ms"], [[name, f"{ms:.0f}"] for name, ms in rows.items()]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
