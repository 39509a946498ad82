"""A full disk: a write that cannot finish keeps the old file whole, leaves nothing half-written behind, and
is one clear sentence. The disk is a 1 MiB tmpfs mounted for the test (root only; skipped with the reason
otherwise); a filler file takes all but a few bytes of it.
"""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

import pytest

from tests.helpers import run_engine_cli
from tests.reliability.conftest import FIXTURES

MODEL = FIXTURES / "models" / "moon_tiny_like"
SPEECH = FIXTURES / "audio" / "speech.wav"
OLD = "the old transcript, which must survive a full disk\n"


@pytest.fixture
def disk(tmp_path: Path):
    """A mounted 1 MiB tmpfs holding ``old.txt`` (OLD), then filled up to the last few bytes."""
    if os.geteuid() != 0:
        pytest.skip("the full-disk tests mount a small tmpfs, which needs root")
    mnt = tmp_path / "disk"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({r.stderr.strip() or r.returncode})")
    try:
        (mnt / "old.txt").write_text(OLD)
        fd = os.open(mnt / "filler", os.O_WRONLY | os.O_CREAT)
        try:
            for size in (65536, 4096, 1):
                while True:
                    try:
                        os.write(fd, b"\0" * size)
                    except OSError as e:
                        assert e.errno == errno.ENOSPC
                        break
        finally:
            os.close(fd)
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def contents(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def cli(*args, stdout=subprocess.PIPE) -> subprocess.CompletedProcess:
    return run_engine_cli(
        SPEECH, "--model", MODEL, "--no-vad", "--backend", "numpy", *args, stdout=stdout, stderr=subprocess.PIPE
    )


def test_cli_output_on_a_full_disk_keeps_the_old_file(disk):
    r = cli("-o", disk / "old.txt")  # the text of the speech: more than the few bytes left
    assert r.returncode == 1
    assert (
        r.stderr == f"livecap-transcribe: Cannot write the transcript to '{disk / 'old.txt'}': no space left on "
        "device.\n"
    )
    assert (disk / "old.txt").read_text() == OLD
    assert contents(disk) == ["filler", "old.txt"]


def test_cli_stdout_on_a_full_disk_is_one_sentence(disk):
    with open(disk / "new.txt", "w") as out:
        r = cli(stdout=out)
    assert r.returncode == 1
    assert r.stderr == "livecap-transcribe: Cannot write to standard output: no space left on device.\n"


def test_app_export_on_a_full_disk_keeps_the_old_file(disk):
    from app.export import export, format_by_key
    from engine.errors import ExportError
    from engine.events import Line

    lines = [Line(f"line {i} " + "words " * 20, i, i + 1) for i in range(50)]
    for key in ("srt", "txt-ts", "json"):
        with pytest.raises(ExportError, match="no space left on device"):
            export(lines, disk / "old.txt", format_by_key(key))
        assert (disk / "old.txt").read_text() == OLD
        assert contents(disk) == ["filler", "old.txt"]
