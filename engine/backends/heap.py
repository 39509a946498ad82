"""Where the NumPy backend's memory lives: weights in large blocks on 2 MB pages, temporaries kept in the heap.

Weights (``Arena``): a decoder step streams every weight matrix once, most of them 1-3 MB. Allocated one by
one (or memory-mapped from the checkpoint) they sit on 4 KB pages, and each product misses the TLB once per
page (a costly walk under a hypervisor); packed into 64 MB blocks, which NumPy asks the kernel to back with
transparent huge pages, the small Moonshine f32 step ran 6-7 % faster on the AMD EPYC development machine
(benchmarks/RESULTS.md). Matrices of a block's size or more get an allocation of their own (NumPy advises
huge pages for it too).

Temporaries (``keep_temporaries``, glibc's ``mallopt``):

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
from collections.abc import Callable

import numpy as np

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


class Arena:
    """Float32 weight matrices copied one after another into ``BLOCK``-byte blocks (64-byte aligned). ``memory(n)``
    gives the blocks (and the large matrices' own allocations): ``n`` bytes as a uint8 array, page-aligned
    (``cpu_twin.Twin.weight_memory``: named shared memory where the twin is a started process); ordinary memory
    by default."""

    BLOCK = 64 << 20

    def __init__(self, memory: Callable[[int], np.ndarray] | None = None):
        self._memory = memory
        self._block: np.ndarray | None = None
        self._used = 0

    def place(self, a, dtype=np.float32) -> np.ndarray:
        """A C-contiguous copy of ``a`` as ``dtype`` (float32: a weight matrix; a quantized matrix's packed words,
        scales and biases keep theirs) in the arena, cache-line aligned (its own allocation when it is large)."""
        a = np.asarray(a, dtype=dtype)
        if a.nbytes >= self.BLOCK // 4:
            if self._memory is None:
                return np.array(a, order="C")
            out = self._memory(max(a.itemsize, a.nbytes))[: a.nbytes].view(a.dtype).reshape(a.shape)
            out[...] = a
            return out
        if self._block is None or self._used + a.nbytes > self._block.size:
            self._block = np.empty(self.BLOCK, np.uint8) if self._memory is None else self._memory(self.BLOCK)
            self._used = -self._block.ctypes.data % 64  # cache-line aligned from the start
        out = self._block[self._used : self._used + a.nbytes].view(a.dtype).reshape(a.shape)
        out[...] = a
        self._used += -(-a.nbytes // 64) * 64
        return out
