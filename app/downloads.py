"""Background jobs for the model dialog: downloads and folder checks off the GUI thread, reported by Qt signals.

A job runs one function on a Python daemon thread (so a download stuck on a dead connection can never keep
the app from quitting) and emits ``progress``/``succeeded``/``failed``/``finished`` from there; Qt queues
them to the receivers on the GUI thread. ``DownloadJob.cancel()`` stops a download at once (the download runs in
a child process, which is ended: ``engine.hub.transfer``); what was downloaded is kept and the next download
resumes.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal

from engine import hub, install
from engine.errors import LivecapError, user_message
from engine.loader import check_folder

log = logging.getLogger(__name__)

STALL_S = 3.0  # a download that reported nothing for this long shows "waiting for the server..."


def progress_text(p: hub.Progress) -> str:
    """``"1.2 GB of 8.9 GB · 35 MB/s · about 3 min left"`` (the speed and time once they are known)."""
    parts = [f"{hub.format_bytes(p.done)} of {hub.format_bytes(p.total)}"]
    if p.stalled:  # the last speed and time left no longer hold
        return " \u00b7 ".join([*parts, "waiting for the server\u2026"])
    if p.speed > 0:
        parts.append(f"{hub.format_bytes(p.speed)}/s")
    if p.eta is not None and p.speed > 0 and not p.finished:
        parts.append(f"about {hub.format_duration(p.eta)} left")
    return " \u00b7 ".join(parts)


class Job(QObject):
    """Runs ``fn(*args, **kwargs)`` on a daemon thread. Keep a reference until ``finished``."""

    progress = Signal(object)
    succeeded = Signal(object)  # fn's result
    failed = Signal(str, object)  # one sentence, the exception
    finished = Signal()

    def __init__(self, fn: Callable[..., Any], *args: Any, what: str = "The operation failed", **kwargs: Any) -> None:
        super().__init__()
        self._fn, self._args, self._kwargs, self._what = fn, args, kwargs, what
        self._thread: threading.Thread | None = None
        self._ended = False
        self.cancelled = False

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="livecap-job", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            result = self._fn(*self._args, **self._kwargs)
        except hub.DownloadCancelled as e:
            self.cancelled = True
            self.failed.emit(str(e), e)
        except LivecapError as e:
            self.failed.emit(str(e), e)
        except Exception as e:  # noqa: BLE001 - a worker must report, never die silently
            log.warning("%s", self._what, exc_info=True)
            self.failed.emit(user_message(e, self._what), e)
        else:
            self.succeeded.emit(result)
        finally:
            self._ended = True
            self.finished.emit()

    @property
    def running(self) -> bool:
        """Started and not yet reported back (False by the time ``finished`` reaches a receiver)."""
        return self._thread is not None and not self._ended

    def wait(self, seconds: float) -> bool:
        """Join the thread up to ``seconds``; True when it has ended."""
        if self._thread is not None:
            self._thread.join(seconds)
            return not self._thread.is_alive()
        return True


class DownloadJob(Job):
    """``engine.install.install_model`` with progress signals and a cancel. ``repo_id`` is what the row shows."""

    def __init__(
        self,
        repo_id: str,
        *,
        revision: str | None = None,
        allow_patterns: Sequence[str] | None = None,
        aliases: Sequence[str] = (),
        required: Sequence[str] = (),
        token: str | None = None,
        full_check: bool = False,
    ) -> None:
        super().__init__(self._download, what=f"Downloading {repo_id} failed")
        self.repo_id = repo_id
        self.token = hub.CancelToken()
        self._options = dict(
            revision=revision,
            allow_patterns=list(allow_patterns) if allow_patterns else None,
            aliases=list(aliases),
            required=list(required),
            token=token,
        )
        self._full_check = full_check
        self._last: hub.Progress | None = None
        self._last_at = 0.0
        self._watch = QTimer(self)  # GUI thread: the progress reports arrive queued here
        self._watch.setInterval(500)
        self._watch.timeout.connect(self._check_stall)
        self.progress.connect(self._seen)
        self.finished.connect(self._watch.stop)

    def start(self) -> None:
        self._last_at = time.monotonic()
        self._watch.start()
        super().start()

    def _seen(self, p: hub.Progress) -> None:
        if not p.stalled:
            self._last, self._last_at = p, time.monotonic()

    def _check_stall(self) -> None:
        """Report the download stalled (once per stall) when nothing arrived for ``STALL_S``: the speed and time left
        it showed were those of the last bytes, a dead connection looked like "about 2 s left" for minutes."""
        last = self._last
        if last is None or last.finished or last.stalled or time.monotonic() - self._last_at < STALL_S:
            return
        self._last = dataclasses.replace(last, speed=0.0, eta=None, stalled=True)
        self.progress.emit(self._last)

    def _download(self):
        path = install.install_model(self.repo_id, progress=self.progress.emit, cancel=self.token, **self._options)
        if self._full_check:
            try:
                check_folder(path, full=True)
            except LivecapError:
                # The loader cannot use it: leave nothing behind that would look installed.
                hub.delete_model(self.repo_id)
                raise
        return path

    def cancel(self) -> None:
        self.token.cancel()


class CheckJob(Job):
    """Validate a local folder with the loader (``engine.loader.check_folder(full=True)``) off the GUI thread."""

    def __init__(self, folder: str) -> None:
        super().__init__(check_folder, folder, full=True, what=f"The folder {folder} could not be checked")
        self.folder = folder
