"""The started CPU twin's process: ``python -m engine.backends.twin_child`` (or the frozen app with
``twin_spawn.FLAG``), started by ``twin_spawn.start``.

Contract: the first line on its standard input says where the payload and the segments are (``twin_spawn``); it
maps them, rebuilds the objects the payload names and runs ``cpu_twin``'s loop over them; every later byte on its
standard input is a wake-up, and its end means the parent is gone (the process then exits). Exit status 1: no
usable first line.
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import sys

from . import cpu_twin, heap, twin_spawn
from .blas import BlasThreads


def _header(fd: int) -> dict:
    line = b""
    while not line.endswith(twin_spawn.HEADER_END):  # byte by byte: what follows the line is the parent's wake-ups
        byte = os.read(fd, 1)
        if not byte:
            raise EOFError
        line += byte
    return json.loads(line)


def main() -> int:
    """Map the segments, rebuild the objects, serve until this process's parent is gone."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl+C is the parent's; the twin ends with it
    BlasThreads().pin(1)  # the same single-threaded OpenBLAS calls as the caller's
    heap.keep_temporaries()
    try:
        head = _header(0)
    except (EOFError, OSError, ValueError):
        return 1
    twin_spawn._attached.extend(twin_spawn.Segment(handle=h) for h in head["segments"])
    box = twin_spawn.Segment(handle=head["box"])
    payload = pickle.loads(box.buf[: head["size"]])
    box.close()
    return cpu_twin.serve_started(payload, twin_spawn._attached, lambda: os.read(0, 64))


if __name__ == "__main__":
    sys.exit(main())
