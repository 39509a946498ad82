"""Logging to a file and a ``sys.excepthook`` that logs and shows a message instead of aborting.

PySide6 routes exceptions raised in slots through ``sys.excepthook``; the default hook prints them and,
with some Qt builds, the process aborts. Ours writes the traceback to the log file and shows one
sentence to the user (the banner of the main window, or a message box), and the app goes on.
"""

from __future__ import annotations

import logging
import logging.handlers
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from engine.errors import user_message

log = logging.getLogger("livecap")

Notifier = Callable[[str], None]


class _MessageOnly(logging.Formatter):
    """One line per record on stderr; tracebacks go to the log file only."""

    def format(self, record: logging.LogRecord) -> str:
        return f"livecap: {record.getMessage()}"


def log_file() -> Path | None:
    """The log file ``setup_logging`` made (None when the app logs to no file)."""
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.FileHandler):
            return Path(handler.baseFilename)
    return None


def setup_logging(folder: Path | None, level: int = logging.INFO) -> Path | None:
    """Log to ``folder/livecap.log`` (rotated, 1 MB x 3, with tracebacks) and errors to stderr (one line,
    no traceback); returns the log file path."""
    root = logging.getLogger()
    root.setLevel(level)
    if not any(isinstance(h, logging.StreamHandler) and not isinstance(h, logging.FileHandler) for h in root.handlers):
        if sys.stderr is not None:  # windowed builds have no stderr
            stream = logging.StreamHandler()
            stream.setLevel(logging.ERROR)
            stream.setFormatter(_MessageOnly())
            root.addHandler(stream)
    if folder is None:
        return None
    path = folder / "livecap.log"
    try:
        handler = logging.handlers.RotatingFileHandler(path, maxBytes=1_000_000, backupCount=3, encoding="utf-8")
    except OSError:
        return None
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s [%(threadName)s] %(message)s"))
    root.addHandler(handler)
    return path


def route_qt_messages() -> None:
    """Send Qt's own messages (warnings such as "This plugin does not support propagateSizeHints()") to the log
    instead of stderr: debug/info/warning reach the log file only, critical and fatal ones stderr too."""
    from PySide6.QtCore import QtMsgType, qInstallMessageHandler

    levels = {
        QtMsgType.QtDebugMsg: logging.DEBUG,
        QtMsgType.QtInfoMsg: logging.INFO,
        QtMsgType.QtWarningMsg: logging.WARNING,
        QtMsgType.QtCriticalMsg: logging.ERROR,
        QtMsgType.QtFatalMsg: logging.CRITICAL,
    }
    qt_log = logging.getLogger("qt")

    def on_message(mode: QtMsgType, context: object, text: str) -> None:
        qt_log.log(levels.get(mode, logging.WARNING), "%s", text)

    qInstallMessageHandler(on_message)


def install_excepthook(notify: Notifier) -> None:
    """Route uncaught exceptions (GUI and other threads) to the log and to ``notify(one_sentence)``.

    ``notify`` is called on whatever thread raised; the main window's notifier queues to the GUI thread.
    KeyboardInterrupt keeps its default behaviour.
    """

    def hook(exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
        if issubclass(exc_type, KeyboardInterrupt):
            sys.__excepthook__(exc_type, exc, tb)
            return
        log.error("unexpected error", exc_info=(exc_type, exc, tb))
        try:
            notify(user_message(exc, "Something went wrong, and the details were written to the log"))
        except Exception:  # the hook itself must never raise
            log.exception("the error notifier failed")

    def thread_hook(args: threading.ExceptHookArgs) -> None:
        if args.exc_value is not None:
            hook(args.exc_type, args.exc_value, args.exc_traceback)

    sys.excepthook = hook
    threading.excepthook = thread_hook
