"""Corrupt settings of every shape: the app starts, shows sane values (the defaults where a value is
unusable), runs a session, and keeps writing its settings. Nothing the user can put in (or a crash can
leave in) the INI file stops the app.

(Corrupt journals are covered by the session store's own tests.)
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tests.helpers import run_livecap

GOOD = """[model]
source=fake-model
backend=numpy
delay-ms=560
"""

SHAPES: dict[str, bytes] = {
    "empty": b"",
    "random-bytes": bytes(range(256)) * 64,
    "nul-bytes": b"\x00" * 4096,
    "not-utf8": "[ui]\ntheme=\xe9t\xe9\n[model]\nsource=caf\xe9\n".encode("latin-1"),
    "torn-write": GOOD.encode()[:23],
    "no-equals": b"[model]\nsource\ndelay-ms\n[captions\nfont-size 18\n",
    "duplicate-keys": b"[model]\ndelay-ms=80\ndelay-ms=lots\ndelay-ms=\n",
    "wrong-types": (
        b"[model]\nsource=@Variant(\\0\\0\\0\\x7f\\0\\0\\0)\nbackend=tpu\ndelay-ms=lots\n"
        b"[audio]\ndevice=@ByteArray(\\xff\\xfe)\n"
        b"[captions]\nfont=@Invalid()\nfont-size=-5\n"
        b"[ui]\ntheme=neon\n"
        b"[window]\ngeometry=@ByteArray(garbage)\nstate=@ByteArray(\\0\\0\\0)\nsplitter=12\n"
        b"[overlay]\nvisible=maybe\nlines=999999\nfont-size=1e309\nopacity=nan\ntext-color=#zzzzzz\n"
        b"background-color=\nclick-through=2\ngeometry=@Rect(1 2 -3 -4)\n"
        b"[export]\nfolder=/no/such/folder\nformat=docx\nlive-srt-path=/no/such/dir/live.srt\n"
        b"[shortcuts]\nstart-pause=Ctrl+Nonsense+Key\nquit=\n"
    ),
    "extreme-numbers": (
        b"[model]\ndelay-ms=99999999999999999999999\n[captions]\nfont-size=100000\n"
        b"[overlay]\nlines=-3\nfont-size=0\nopacity=-inf\n"
    ),
    "huge-value": b"[model]\nsource=" + b"x" * 2_000_000 + b"\n",
}


def _window(qtbot, path: Path):
    from app.controller import SessionController
    from app.main_window import MainWindow
    from app.settings import Settings
    from tests.app import fake_engine
    from tests.app.fake_sounddevice import FakeSoundDevice, make_device

    sd = FakeSoundDevice([make_device("Fake Mic", 16000.0)], signal=fake_engine.speechlike([(0.6, 0.5)]), speed=4)
    c = SessionController(loader=fake_engine.load_model, sounddevice=sd, journal_dir=path.parent / "journal")
    settings = Settings(path)
    w = MainWindow(c, settings, sounddevice=sd)
    qtbot.addWidget(w)
    return c, settings, w


@pytest.mark.parametrize("shape", list(SHAPES))
def test_app_starts_and_runs_with_corrupt_settings(qtbot, tmp_path, shape):
    from app.settings import Key

    path = tmp_path / "settings.ini"
    path.write_bytes(SHAPES[shape])
    c, settings, w = _window(qtbot, path)
    try:
        w.show()
        qtbot.waitExposed(w)
        for key in Key:  # every value has its default's type, and numbers are usable
            value = settings.value(key)
            assert type(value) is type(key.default), (key, value)
            if isinstance(value, float):
                assert math.isfinite(value), (key, value)
        with qtbot.waitSignal(c.model_changed, timeout=5000):
            w.load_model("fake-model", "auto")
        w.start_action.trigger()
        qtbot.waitUntil(lambda: len(c.lines) >= 1, timeout=8000)
        with qtbot.waitSignal(c.session_finished, timeout=5000):
            c.stop()
        w.close()  # saves window state and settings
        settings.sync()
    finally:
        c.shutdown(5000)
    assert path.exists()


def test_settings_path_is_a_folder(qtbot, tmp_path):
    path = tmp_path / "settings.ini"
    path.mkdir()
    c, settings, w = _window(qtbot, path)
    try:
        from app.settings import Key

        assert settings.value(Key.DELAY_MS) == Key.DELAY_MS.default
        w.close()
        settings.sync()
    finally:
        c.shutdown(5000)


def test_livecap_replays_with_a_corrupt_settings_file(tmp_path):
    """The whole program, unattended, with the worst settings file: it replays and saves the transcript."""
    from tests.app import fake_engine

    ini = tmp_path / "s.ini"
    ini.write_bytes(SHAPES["wrong-types"] + SHAPES["random-bytes"])
    wav = fake_engine.write_wav(tmp_path / "a.wav", fake_engine.speechlike([(0.8, 0.5), (0.6, 0.4)]))
    out = tmp_path / "out.txt"
    proc = run_livecap(
        tmp_path, "--input", str(wav), "--model", "fake", "--speed", "6", "--quit-at-end", "--save-transcript", str(out)
    )  # with --settings tmp_path/s.ini, the corrupt file
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert out.read_text().strip()
