"""Writing transcript files: atomically (temporary file in the same folder, fsync, then ``os.replace``).

The one writer of finished transcripts for the CLI (``-o``) and the app (export, ``--save-transcript``);
:func:`check_target` lets both refuse an unusable path before any work is done.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import tempfile
from collections.abc import Sequence

from engine.errors import ExportError, UsageError, os_reason
from engine.events import Line
from engine.transcript.formats import format_for_path, format_transcript, named_format


def write_transcript(lines: Sequence[Line], path: str | os.PathLike[str], fmt: str | None = None, **options) -> None:
    """Write ``lines`` to ``path`` in ``fmt`` (default: from the extension, UsageError if unknown).

    The text is formatted first (``options`` go to the formatter), then written to a temporary file in
    the same folder, fsynced and moved over ``path``: readers see the old file or the new one, never a
    partial one. An existing file keeps its permission bits. Any OS failure raises
    :class:`engine.errors.ExportError` naming the path; no temporary file is left behind.
    """
    text = format_transcript(lines, fmt or format_for_path(path), **options)
    write_text_atomic(path, text)


def check_target(
    path: str | os.PathLike[str], *, need_format: bool = True, source: str | os.PathLike[str] | None = None
) -> None:
    """Refuse, before the work starts, a path that a transcript could not be written to.

    UsageError with one sentence when it is the file ``source`` (the input audio; also through links),
    when (with ``need_format``) its extension names no format, its folder does not exist or is not a
    folder, the path is a folder, its name is longer than the folder's file system takes, the file exists
    read-only (no write permission bit: kept as a "do not overwrite"), or a file cannot be created in that
    folder (tried for real, with a temporary file that is removed again; then the folder is named).
    """
    target = os.fspath(path)
    if source is not None and _same_file(source, target):
        raise UsageError(f"The output {target} is the input audio file; choose another output file.")
    if target.endswith(("/", os.sep)) and not os.path.isdir(target):  # "out/": a folder's name, not a file's
        raise UsageError(f"Cannot save the transcript to '{target}': it names a folder that does not exist.")
    if need_format:
        format_for_path(target)
    folder = os.path.dirname(os.path.abspath(target))
    if not os.path.isdir(folder):
        what = "is not a folder" if os.path.exists(folder) else "does not exist"
        raise UsageError(f"Cannot save the transcript to '{target}': the folder {folder} {what}.")
    if os.path.isdir(target):
        raise UsageError(f"Cannot save the transcript to '{target}': it is a folder.")
    if os.path.exists(target) and not os.path.isfile(target):
        return  # a device or pipe (/dev/null, a FIFO): written to directly, nothing is created beside it
    name_max = _name_max(folder)
    if len(os.fsencode(os.path.basename(target))) > name_max:
        raise UsageError(
            f"Cannot save the transcript to '{target}': the file name is longer than the {name_max} bytes this "
            "folder's file system takes."
        )
    refuse_read_only(target)
    try:
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".livecap-probe-", suffix=".tmp")
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        raise UsageError(
            f"Cannot save the transcript to '{target}': the folder {folder} cannot be written ({os_reason(err)})."
        ) from None


def refuse_read_only(path: str | os.PathLike[str]) -> None:
    """UsageError with one sentence when ``path`` is a file without any write permission bit (kept as a "do not
    overwrite": the atomic replace would replace it all the same)."""
    target = os.fspath(path)
    with contextlib.suppress(OSError):
        if os.stat(target).st_mode & 0o222 == 0:
            raise UsageError(
                f"Cannot save the transcript to '{target}': the file is read-only; choose another file or make "
                "it writable."
            )


def _name_max(folder: str) -> int:
    """The longest file name (in bytes) ``folder``'s file system takes (255 where the system does not say)."""
    try:
        return int(os.pathconf(folder, "PC_NAME_MAX"))
    except (OSError, ValueError, AttributeError):  # Windows has no pathconf
        return 255


def _same_file(source: str | os.PathLike[str], target: str) -> bool:
    """Whether ``target`` is the file ``source`` reads (``"-"``: the file standard input is redirected from, as in
    ``- -o rec.wav < rec.wav``), also through links; False when either does not exist (yet)."""
    try:
        if os.fspath(source) == "-":
            read = os.fstat(sys.stdin.fileno())
            written = os.stat(target)
            return stat.S_ISREG(read.st_mode) and (read.st_dev, read.st_ino) == (written.st_dev, written.st_ino)
        return os.path.samefile(source, target)
    except (OSError, ValueError, AttributeError):  # missing, or no standard input at all
        return False


def output_format(fmt: str | None, output: str | os.PathLike[str] | None, default: str | None = None) -> str | None:
    """The format of the command lines' ``--format FMT -o OUTPUT`` (``OUTPUT`` None or ``"-"``: stdout): ``fmt``
    when given, else the one the file name's extension names (.txt, .srt, .vtt, .json), else ``default``.
    UsageError (one sentence) when ``fmt`` and the extension name different formats: no file is written
    mislabeled."""
    named = named_format(output) if output is not None and os.fspath(output) != "-" else None
    if fmt and named and fmt.lower() != named:
        raise UsageError(
            f"--format {fmt} does not match the output file name '{os.fspath(output)}'; "
            f"drop --format or give the file a .{fmt.lower()} name."
        )
    return fmt or named or default


def _new_file_mode() -> int:
    umask = 0o022
    with contextlib.suppress(OSError, ValueError):
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            for row in f:
                if row.startswith("Umask:"):
                    umask = int(row.split()[1], 8)
    return 0o666 & ~umask


def write_text_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Replace ``path`` with UTF-8 ``text`` atomically; ExportError (one sentence) on failure.

    A symbolic link is written through (its target file is replaced, the link stays); a path that is not a
    regular file (``/dev/null``, a named pipe, a terminal) is written to directly, never replaced.
    """
    shown = os.fspath(path)
    try:
        st = os.stat(shown)  # through links: /dev/stdout is one to a pipe whose resolved name does not exist
        mode = st.st_mode & 0o7777
    except OSError:
        st, mode = None, _new_file_mode()
    if st is not None and not stat.S_ISREG(st.st_mode):
        try:
            with open(shown, "w", encoding="utf-8", errors="replace", newline="\n") as f:
                f.write(text)
        except OSError as err:
            raise ExportError(f"Cannot write the transcript to '{shown}': {os_reason(err)}.") from None
        return
    target = os.path.realpath(shown) if os.path.islink(shown) else shown
    folder = os.path.dirname(os.path.abspath(target))
    try:
        # the temporary name stays short: one made of the whole name went past a long name's limit (255 bytes)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix="." + os.path.basename(target)[:32] + ".", suffix=".tmp")
    except OSError as err:
        raise ExportError(f"Cannot write the transcript to '{shown}': {os_reason(err)}.") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="replace", newline="\n") as f:  # a lone surrogate: "?"
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException as err:  # an interrupt too: no temporary file is left behind
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(err, OSError):
            raise ExportError(f"Cannot write the transcript to '{shown}': {os_reason(err)}.") from None
        raise
