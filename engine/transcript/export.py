"""Writing transcript files: atomically (temporary file in the same folder, then ``os.replace``)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Sequence

from engine.errors import ExportError, os_reason
from engine.events import Line
from engine.transcript.formats import format_for_path, format_transcript


def write_transcript(
    lines: Sequence[Line], path: str | os.PathLike[str], fmt: str | None = None, **options
) -> None:
    """Write ``lines`` to ``path`` in ``fmt`` (default: from the extension, UsageError if unknown).

    The text is formatted first (``options`` go to the formatter), then written to a temporary file in
    the same folder, fsynced and moved over ``path``: readers see the old file or the new one, never a
    partial one. An existing file keeps its permission bits. Any OS failure raises
    :class:`engine.errors.ExportError` naming the path; no temporary file is left behind.
    """
    text = format_transcript(lines, fmt or format_for_path(path), **options)
    write_text_atomic(path, text)


def _new_file_mode() -> int:
    umask = 0o022
    with contextlib.suppress(OSError, ValueError):
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            for row in f:
                if row.startswith("Umask:"):
                    umask = int(row.split()[1], 8)
    return 0o666 & ~umask


def write_text_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Replace ``path`` with UTF-8 ``text`` atomically; ExportError (one sentence) on failure."""
    target = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(target))
    try:
        mode = os.stat(target).st_mode & 0o7777
    except OSError:
        mode = _new_file_mode()
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix="." + os.path.basename(target) + ".", suffix=".tmp")
    except OSError as err:
        raise ExportError(f"Cannot write the transcript to '{target}': {os_reason(err)}.") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except OSError as err:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise ExportError(f"Cannot write the transcript to '{target}': {os_reason(err)}.") from None
