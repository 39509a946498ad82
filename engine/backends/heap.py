"""Keep the NumPy backend's large temporaries in the C heap between ops (glibc's ``mallopt``).

Why: an encoder op allocates a fresh result of a few MB (a 500 x 2480 activation is 5 MB). glibc serves
blocks that large with ``mmap`` and unmaps them on free, or trims the heap top back to the system once more
than a threshold is free, so the next op faults the pages in again: ~6000 page faults per 10 s of Moonshine
small audio in the encoder, ~10 % of its time on the AMD EPYC development machine, and GELU over a fresh
5 MB array at 2.5x the time it takes over reused memory (benchmarks/RESULTS.md). Raising both thresholds
makes freed blocks of up to ``MMAP_BYTES`` go back to the heap and stay there for the next op; the process
keeps up to ``TRIM_BYTES`` of freed memory instead of returning it at once.

Only glibc has ``mallopt``; elsewhere (macOS, Windows, musl) this does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's malloc.h
MMAP_BYTES = 32 << 20  # blocks below this come from the heap (glibc's own dynamic ceiling on 64-bit)
TRIM_BYTES = 128 << 20  # freed heap memory kept before trimming
_done = False


def keep_temporaries() -> bool:
    """Set the thresholds once per process; True where glibc took them."""
    global _done
    if _done or not sys.platform.startswith("linux"):
        return _done
    _done = True
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_BYTES)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_BYTES))
