"""``livecap``: the GUI entry point.

    livecap [--model SOURCE] [--backend auto|numpy|mlx]
            [--input FILE [--speed X] [--save-transcript PATH] [--quit-at-end]]
    livecap --self-test       check this installation offscreen and exit 0/1 (app/selftest.py)

With ``--input`` the file is replayed in real time instead of the microphone. With ``--quit-at-end``
and ``--save-transcript`` (.txt/.srt/.vtt/.json by extension) the whole GUI path runs unattended and
the app exits when the file ends: 0 ok, 1 the transcript could not be written or the engine failed,
2 usage, 3 model problem, 4 audio problem. The file and the transcript's path are checked before the
replay starts; when the final write still fails, the session's backup stays unfinished, so the next
start offers its lines for recovery.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from app import APP_NAME, APP_ORG

log = logging.getLogger(__name__)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="livecap", description="On-device live captions.")
    p.add_argument("--model", metavar="SOURCE", help="model folder or hub id (default: the last one used)")
    p.add_argument(
        "--backend", choices=("auto", "numpy", "mlx"), help="compute backend (default: the saved one)"
    )
    p.add_argument(
        "--input", metavar="FILE", help="replay an audio file in real time instead of the microphone"
    )
    p.add_argument("--speed", type=float, default=1.0, help="replay speed factor for --input (default 1)")
    p.add_argument("--save-transcript", metavar="PATH", help="write the transcript when --input ends")
    p.add_argument("--quit-at-end", action="store_true", help="exit when --input ends")
    p.add_argument("--delay-ms", type=int, help="Voxtral delay in ms for this run")
    p.add_argument(
        "--self-test", action="store_true", help="check this installation offscreen (bundled model and clip) and exit"
    )
    p.add_argument("--self-test-dir", metavar="DIR", help=argparse.SUPPRESS)  # tests: other self-test data
    p.add_argument("--settings", metavar="INI", help=argparse.SUPPRESS)  # tests and portable use
    p.add_argument("--engine-factory", metavar="MODULE:CALLABLE", help=argparse.SUPPRESS)  # tests
    return p


def load_factory(spec: str) -> Any:
    """Import ``module:callable`` or ``path/to/file.py:callable`` (the engine's ``load_model`` stand-in)."""
    target, _, attr = spec.rpartition(":")
    if not target or not attr:
        raise ValueError(f"--engine-factory needs MODULE:CALLABLE, not {spec!r}")
    if target.endswith(".py"):
        module_spec = importlib.util.spec_from_file_location(Path(target).stem, target)
        if module_spec is None or module_spec.loader is None:
            raise ValueError(f"cannot import {target}")
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[module_spec.name] = module
        module_spec.loader.exec_module(module)
    else:
        module = importlib.import_module(target)
    return getattr(module, attr)


def check_replay_args(audio: str | None, save_to: str | None) -> int:
    """Before anything starts: the file to replay must open and the transcript's path must be writable
    (not the input itself, format by extension, folder exists, a file can be created there). Prints one
    sentence and returns the exit code (4 audio, 2 usage) when not; 0 when fine."""
    from engine.errors import LivecapError

    try:
        if save_to:
            from engine.transcript.export import check_target

            check_target(save_to, source=audio)
        if audio:
            from engine.audio import open_audio

            open_audio(audio).close()
    except LivecapError as exc:
        print(f"livecap: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the app; returns the exit code."""
    args = build_parser().parse_args(argv)
    if args.self_test or args.self_test_dir:
        from app.selftest import run as run_self_test  # sets QT_QPA_PLATFORM=offscreen before Qt starts

        return run_self_test(args.self_test_dir)
    if not 0 < args.speed < float("inf"):
        print("livecap: --speed must be a positive number.", file=sys.stderr)
        return 2
    if (args.save_transcript or args.quit_at_end) and not args.input:
        print("livecap: --save-transcript and --quit-at-end need --input FILE.", file=sys.stderr)
        return 2
    code = check_replay_args(args.input, args.save_transcript)
    if code:
        return code

    from PySide6.QtCore import QCoreApplication
    from PySide6.QtWidgets import QApplication

    from app import paths
    from app.controller import SessionController
    from app.excepthook import install_excepthook, setup_logging
    from app.main_window import MainWindow
    from app.settings import Key, Settings
    from app.theme import apply_theme
    from app.worker import default_loader

    QCoreApplication.setOrganizationName(APP_ORG)
    QCoreApplication.setApplicationName(APP_NAME)
    app = QApplication.instance() or QApplication([sys.argv[0] if sys.argv else APP_NAME])
    setup_logging(paths.log_dir())
    settings = Settings(args.settings or paths.settings_file())
    try:
        loader = load_factory(args.engine_factory) if args.engine_factory else default_loader
    except (ImportError, AttributeError, ValueError, OSError) as exc:
        print(f"livecap: the engine factory could not be loaded ({exc}).", file=sys.stderr)
        return 2
    apply_theme(app, settings.value(Key.THEME))
    icon = paths.resources_dir() / "icons" / "livecap.svg"
    if icon.exists():
        from PySide6.QtGui import QIcon

        app.setWindowIcon(QIcon(str(icon)))
    controller = SessionController(loader=loader, journal_dir=paths.journal_dir())
    window = MainWindow(controller, settings)
    install_excepthook(window.notify_error)
    window.show()

    source = args.model or settings.value(Key.MODEL_SOURCE)
    run = None
    if args.input:
        from app.replay import ReplayRun

        if args.delay_ms is not None:
            window.delay_combo.setCurrentIndex(max(window.delay_combo.findData(args.delay_ms), 0))
        run = ReplayRun(
            window, args.input, speed=args.speed, save_to=args.save_transcript, quit_at_end=args.quit_at_end
        )
        if not source:
            run.fail("Choose a model with --model SOURCE.", 2)
    else:
        window.offer_recovery()
    if source:
        window.load_model(source, args.backend)
    _close_on_interrupt(window)
    code = app.exec()
    if run is not None and run.exit_code is not None:
        code = run.exit_code
    return code


def _close_on_interrupt(window: Any) -> None:
    """Ctrl+C in the terminal closes the window cleanly (the journal gets its end record)."""
    import signal

    from PySide6.QtCore import QTimer

    signal.signal(signal.SIGINT, lambda *_: window.close())
    timer = QTimer(window)
    timer.timeout.connect(lambda: None)  # let the interpreter run its signal handlers now and then
    timer.start(250)


if __name__ == "__main__":
    sys.exit(main())
