"""kill -9 in the middle of ``livecap --input``: every line committed before the kill is offered at the
next start, and recovering it shows exactly those lines (a prefix of the whole file's transcript).

Written against public behaviour only (the program, then the main window's recovery offer), so it keeps
holding when the session backup's format changes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from tests.app import fake_engine
from tests.reliability.conftest import REPO
from tests.reliability.recovery import recovered_lines


def test_kill_9_during_a_replay_then_recover(qtbot, tmp_path):
    audio = fake_engine.speechlike([(0.8, 0.6)] * 20)  # 28 s: a line every 1.4 s
    wav = fake_engine.write_wav(tmp_path / "long.wav", audio)
    expected = [line.text for line in fake_engine.transcribe(audio)]
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(REPO))  # the private XDG folders
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "app.main",
            "--settings",
            str(tmp_path / "s.ini"),
            "--engine-factory",
            "tests.app.fake_engine:load_model",
            "--input",
            str(wav),
            "--model",
            "fake",
            "--speed",
            "2",
            "--quit-at-end",
            "--save-transcript",
            str(tmp_path / "never.txt"),
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        time.sleep(6.0)  # start-up plus several seconds of the 14 s replay
        assert proc.poll() is None, "the replay ended before the kill"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    assert not (tmp_path / "never.txt").exists()

    # the next start: the main window offers the lines, and recovering shows them
    from app import paths
    from app.controller import SessionController
    from app.main_window import MainWindow
    from app.settings import Settings

    journal = paths.journal_dir()  # where the program kept its session backup (same XDG folders)
    saved = [line.text for line in recovered_lines(journal)]
    assert 1 <= len(saved) < len(expected) and saved == expected[: len(saved)]
    c = SessionController(loader=fake_engine.load_model, journal_dir=journal)
    w = MainWindow(c, Settings(tmp_path / "s.ini"))
    qtbot.addWidget(w)
    try:
        assert w.offer_recovery() is not None
        assert "was not closed (livecap stopped during it" in w.banner.label.text()
        [recover] = [b for b in w.banner.buttons() if b.text() == "Recover"]
        recover.click()
        assert [line.text for line in c.lines] == saved
    finally:
        c.shutdown(5000)
    assert recovered_lines(journal) == []  # recovered once, not offered again
