"""Errors a user can meet. Each carries one sentence that the CLI and the app show as is.

The CLI maps them to exit codes: UsageError 2, ModelError 3, AudioError 4.
"""

from __future__ import annotations


class LivecapError(Exception):
    """Base class: ``str(err)`` is one clear sentence for the user."""

    exit_code = 1


class UsageError(LivecapError):
    """An option or argument the engine cannot honour (bad delay, unsupported dtype for a backend, ...)."""

    exit_code = 2


class ModelError(LivecapError):
    """The model files are missing, truncated, corrupt, of an unknown architecture or the wrong shape."""

    exit_code = 3


class AudioError(LivecapError):
    """The audio cannot be read or decoded."""

    exit_code = 4


class BackendError(UsageError):
    """The requested compute backend is not available on this machine."""


class ExportError(LivecapError):
    """A transcript or caption file cannot be written (unwritable folder, a directory in the way, ...)."""

    exit_code = 1


def os_reason(err: OSError) -> str:
    """The reason an OS call failed, to end a sentence: ``"permission denied"``, ``"no such file or directory"``."""
    return (err.strerror or str(err)).rstrip(".").lower()


def user_message(exc: BaseException, what: str) -> str:
    """One sentence for the user: the engine's own sentence, or ``what`` plus the exception's first line."""
    if isinstance(exc, LivecapError):
        return str(exc)
    detail = (str(exc).strip().splitlines() or [""])[0][:200]
    return f"{what} ({type(exc).__name__}{': ' + detail if detail else ''})."
