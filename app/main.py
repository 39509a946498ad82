"""``livecap``: the GUI entry point.

    livecap [--model SOURCE] [--backend auto|numpy|mlx] [--weights stored|8-bit|4-bit]
            [--input FILE [--speed X] [--save-transcript PATH] [--quit-at-end]]
            [--source mic|system|both [--device NAME] [--quit-after SECONDS --save-transcript PATH]]
    livecap --self-test       check this installation offscreen and exit 0/1 (app/selftest.py)
    livecap --sessions | --export-session ID ... | --retranscribe ID --model SOURCE
                              the kept sessions, headless (app/sessions_cli.py)

With ``--input`` the file is replayed in real time instead of the microphone. With ``--quit-at-end``
and ``--save-transcript`` (.txt/.srt/.vtt/.json by extension) the whole GUI path runs unattended and
the app exits when the file ends: 0 ok, 1 the transcript could not be written or the engine failed,
2 usage, 3 model problem, 4 audio problem. ``--source`` picks what to caption for this run (System audio,
the microphone, or both mixed; ``--device`` names the microphone, or the output for ``system``), and with
``--quit-after`` the capture runs unattended for that many seconds, then saves and exits the same way.
The file and the transcript's path are checked before the
replay starts; when the final write still fails, the session's backup stays unfinished, so the next
start offers its lines for recovery.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from app import APP_NAME, APP_ORG

log = logging.getLogger(__name__)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="livecap", description="On-device live captions.")
    p.add_argument("--model", metavar="SOURCE", help="model folder or hub id (default: the last one used)")
    p.add_argument("--backend", choices=("auto", "numpy", "mlx"), help="compute backend (default: the saved one)")
    p.add_argument(
        "--weights", choices=("stored", "8-bit", "4-bit"), help="model weights for this run (default: the saved choice)"
    )
    p.add_argument("--input", metavar="FILE", help="replay an audio file in real time instead of the microphone")
    p.add_argument("--speed", type=float, help="replay speed factor for --input (default 1)")
    p.add_argument("--save-transcript", metavar="PATH", help="write the transcript when --input ends")
    p.add_argument("--quit-at-end", action="store_true", help="exit when --input ends")
    p.add_argument("--delay-ms", type=int, help="Voxtral delay in ms for this run")
    p.add_argument("--source", choices=("mic", "system", "both"), help="what to caption (default: the saved choice)")
    p.add_argument("--device", metavar="NAME", help="microphone (mic, both) or output (system) by name, this run")
    p.add_argument("--quit-after", type=float, metavar="SECONDS", help="capture this long, save, and exit")
    p.add_argument(
        "--self-test", action="store_true", help="check this installation offscreen (bundled model and clip) and exit"
    )
    p.add_argument("--self-test-dir", metavar="DIR", help=argparse.SUPPRESS)  # tests: other self-test data
    s = p.add_argument_group("sessions (headless)")
    s.add_argument("--sessions", action="store_true", help="print the kept sessions as JSON lines and exit")
    s.add_argument("--export-session", metavar="ID", help="export a kept session and exit")
    s.add_argument("--format", choices=("srt", "vtt", "txt", "json"), help="--export-session: the format")
    s.add_argument("-o", "--output", metavar="OUT", help="--export-session: the file (default: stdout)")
    s.add_argument("--session-version", type=int, metavar="N", help="--export-session: this version (default: latest)")
    s.add_argument("--retranscribe", metavar="ID", help="re-transcribe a kept session with --model (new version)")
    p.add_argument("--sessions-dir", metavar="DIR", help=argparse.SUPPRESS)  # tests and portable use
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
    except Exception as exc:  # noqa: BLE001 - one sentence, never a traceback (the audio library's own errors)
        from engine.errors import user_message

        print(f"livecap: {user_message(exc, f'Cannot read audio from {audio!r}')}", file=sys.stderr)
        return 4
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the app; returns the exit code."""
    args = build_parser().parse_args(argv)
    if args.self_test or args.self_test_dir:
        from app.selftest import run as run_self_test  # sets QT_QPA_PLATFORM=offscreen before Qt starts

        return run_self_test(args.self_test_dir)
    from app import sessions_cli
    from engine.cli import check_delay_ms
    from engine.errors import UsageError

    try:
        check_delay_ms(args.delay_ms)  # a delay no model takes; a model without a delay: when it is loaded
    except UsageError as exc:
        print(f"livecap: {exc}", file=sys.stderr)
        return exc.exit_code
    if sessions_cli.wanted(args):
        try:
            loader = load_factory(args.engine_factory) if args.engine_factory else None
        except (ImportError, AttributeError, ValueError, OSError) as exc:
            print(f"livecap: the engine factory could not be loaded ({exc}).", file=sys.stderr)
            return 2
        return sessions_cli.run(args, loader)
    if args.format or args.output is not None or args.session_version is not None:
        print("livecap: --format, -o and --session-version go with --export-session ID.", file=sys.stderr)
        return 2
    if args.speed is not None and not args.input:
        print("livecap: --speed goes with --input FILE.", file=sys.stderr)
        return 2
    if args.input == "-":  # it was opened as a file named "-": "no such file"
        print("livecap: --input takes an audio file; for standard input use livecap-transcribe -.", file=sys.stderr)
        return 2
    if args.speed is not None and not 0 < args.speed < float("inf"):
        print("livecap: --speed must be a positive number.", file=sys.stderr)
        return 2
    if args.quit_after is not None and (args.input or not 0 < args.quit_after < float("inf")):
        print("livecap: --quit-after takes positive seconds and captures live (not with --input).", file=sys.stderr)
        return 2
    if (args.save_transcript and not (args.input or args.quit_after)) or (args.quit_at_end and not args.input):
        print(
            "livecap: --save-transcript needs --input FILE or --quit-after; --quit-at-end needs --input.",
            file=sys.stderr,
        )
        return 2
    code = check_replay_args(args.input, args.save_transcript)
    if code:
        return code
    pending = _defer_interrupts()  # until the window can close cleanly (a KeyboardInterrupt in its making aborted)

    from PySide6.QtCore import QCoreApplication
    from PySide6.QtWidgets import QApplication

    from app import paths
    from app.controller import SessionController
    from app.excepthook import install_excepthook, route_qt_messages, setup_logging
    from app.main_window import MainWindow
    from app.settings import Key, Settings, weight_bits
    from app.theme import apply_theme
    from app.worker import default_loader

    QCoreApplication.setOrganizationName(APP_ORG)
    QCoreApplication.setApplicationName(APP_NAME)
    app = QApplication.instance() or QApplication([sys.argv[0] if sys.argv else APP_NAME])
    try:
        log_folder = paths.log_dir()
    except OSError as exc:  # e.g. platformdirs refuses a folder that another user may write to
        log_folder = None
        print(f"livecap: warning: running without a log file ({exc.strerror or exc}).", file=sys.stderr)
    setup_logging(log_folder)
    route_qt_messages()
    try:
        settings_path = args.settings or paths.settings_file()
    except OSError as exc:
        print(f"livecap: cannot make the folders for settings and sessions ({exc.strerror or exc}).", file=sys.stderr)
        return 1
    no_sessions = None  # captions need no sessions folder: without one, say so and caption
    try:
        journal_dir = args.sessions_dir or paths.journal_dir()
    except OSError as exc:
        journal_dir, where = None, f" {exc.filename}" if exc.filename else ""
        no_sessions = (
            f"Sessions are off: their folder{where} could not be made ({exc.strerror or exc}); export the "
            "transcript to keep it."
        )
    settings = Settings(settings_path)
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
    controller = SessionController(loader=loader, journal_dir=journal_dir)
    window = MainWindow(controller, settings)
    if args.engine_factory:
        window.sessions_child_args = ["--engine-factory", args.engine_factory]
    if args.source or args.device:
        from app.sources.cli import apply_source_args

        problem = apply_source_args(window.sources, args.source, args.device)
        if problem:
            print(f"livecap: {problem}", file=sys.stderr)
            controller.shutdown()
            return 2
    install_excepthook(window.notify_error)
    window.show()
    if no_sessions:
        window.show_message("warning", no_sessions)
        print(f"livecap: warning: {no_sessions}", file=sys.stderr)
    unsaved = settings.problem()
    if unsaved:  # a read-only settings file: every choice (Keep audio, the model) would be lost without a word
        window.show_message("warning", unsaved)
        print(f"livecap: warning: {unsaved}", file=sys.stderr)

    source = args.model or settings.value(Key.MODEL_SOURCE)
    if args.delay_ms is not None:  # a valid delay (checked above): the combo has it
        window.delay_combo.setCurrentIndex(window.delay_combo.findData(args.delay_ms))
    run = None
    if args.input:
        from app.replay import ReplayRun

        run = ReplayRun(
            window, args.input, speed=args.speed or 1.0, save_to=args.save_transcript, quit_at_end=args.quit_at_end
        )
        if not source:
            run.fail("Choose a model with --model SOURCE.", 2)
    elif args.quit_after is not None:
        from app.live_run import CaptureRun

        run = CaptureRun(window, args.quit_after, save_to=args.save_transcript)
        if not source:
            run.fail("Choose a model with --model SOURCE.", 2)
    else:
        window.offer_recovery()
    if run is not None:
        run.delay_ms = args.delay_ms  # a model without a delay fails the run
    if source:
        bits = weight_bits(args.weights) if args.weights else None
        window.load_model(source, args.backend, bits, offer_download=run is None)  # unattended: no one to ask
    _close_on_interrupt(window, run, pending)
    code = app.exec()
    if run is not None and run.exit_code is not None:
        code = run.exit_code
    if run is not None and run.interrupted and code == 0:  # stopped before it could end: not a whole transcript
        code = run.interrupted
    from app.capture import streams_left_closing

    if controller.worker_thread.isRunning() or streams_left_closing():
        _exit_now(code)
    return code


def _exit_now(code: int) -> None:
    """End the process now, with ``code``: the window closed while the engine worker's thread still runs, in a
    model load (``SessionController.shutdown`` does not wait for one) or stuck past shutdown's timeout, or while an
    audio stream is still closing (a sound server that stopped answering: PortAudio's end would wait for it). A load is
    library code (a hub download, quantizing) that cannot be interrupted and may take minutes, and a QThread
    destroyed while it runs aborts the process (SIGABRT), which a normal return does as Python tears down.
    Everything that matters is done by now: the session's journal has its end record and the settings are saved
    (the window's ``closeEvent``); what is left is to end a download child process (its bytes are kept and resumed
    next time; left alone it would go on downloading), flush the log and the streams."""
    log.info("exiting while the engine worker or an audio stream's close still runs")
    hub = sys.modules.get("engine.hub")
    if hub is not None:
        hub.stop_transfers()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def _defer_interrupts() -> list[int]:
    """Until ``_close_on_interrupt`` takes over, Ctrl+C and SIGTERM are noted (in the list returned) instead of
    raising KeyboardInterrupt or ending the process midway through making the window and the engine's thread:
    Ctrl+C 0.4 s after the start aborted the process ("QThread: Destroyed while thread ... is still running")."""
    import signal

    pending: list[int] = []
    for name in ("SIGINT", "SIGTERM"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), lambda signum, _frame: pending.append(signum))
    return pending


def _close_on_interrupt(window: Any, run: Any = None, pending: Sequence[int] = ()) -> None:
    """Ctrl+C in the terminal, or SIGTERM (a logout, ``kill``, a service manager), closes the window cleanly (the
    journal gets its end record, kept audio is compressed); an unattended run (``--input``, ``--quit-after``) it
    stops before its end then exits with 128 + the signal (the shell's codes: 130 for Ctrl+C, 143 for SIGTERM),
    whatever it saved."""
    import signal

    from PySide6.QtCore import QTimer

    def interrupt(signum: int, _frame: Any = None) -> None:
        if run is not None and run.exit_code is None:
            run.interrupted = 128 + int(signum)
        # from the event loop: a handler runs between any two bytecodes of the main thread, and closing there
        # ended the session inside the code it interrupted (a line being committed lost its journal: QA)
        QTimer.singleShot(0, window.close)

    signal.signal(signal.SIGINT, interrupt)
    if hasattr(signal, "SIGTERM"):
        signal.signal(signal.SIGTERM, interrupt)
    if pending:  # a signal came while the window was being made: handled once the event loop runs
        QTimer.singleShot(0, lambda: interrupt(pending[0]))
    timer = QTimer(window)
    timer.timeout.connect(lambda: None)  # let the interpreter run its signal handlers now and then
    timer.start(250)


if __name__ == "__main__":
    sys.exit(main())
