"""Float32 buffers in memory that a forked helper process sees as this process writes it (``cpu_twin``).

Why: the twin is forked once, after the weights are loaded; what the engine allocates later (the cross-
attention K/V of each segment, 20 MB per decoder step for Moonshine small) is private to this process, so
the twin could not take half of the heads of an attention over it. Buffers from this arena live in one
anonymous ``MAP_SHARED`` mapping made before the fork: the twin reads them at the same addresses.

Contract:
- ``zeros(shape)`` returns a zero-filled float32 array in the arena, or None when the arena is full or
  missing (callers then use ordinary memory); the block returns to the arena when the array and every view
  of it are gone.
- ``locate(a)`` tells whether an array (or a view) lies in the arena, and where.
- Pages cost memory only once written. A released block of under ``GIVE_BACK_BYTES`` keeps its pages (zeroed,
  as the C heap keeps freed memory) for the next buffer; a larger one (a long KV ring, mostly unwritten in a
  short session) gives them back to the system where it can (``MADV_REMOVE``) and reads as zeros again.
- Between ``hold()`` and ``unhold()`` released blocks are neither zeroed nor given out again: a twin that is late
  with a job (``cpu_twin``) may still write into an array the caller has dropped meanwhile.
- A process forked from this one shares the arena too; the only such process is the twin (``hub`` starts
  its workers with fork + exec, which drops the mapping). Over a ``buf`` of named shared memory, a started twin
  maps the same pages (``twin_spawn``); it only reads and writes arrays at the places it is told (``view``).
"""

from __future__ import annotations

import mmap
import threading
import weakref

import numpy as np

PAGE = mmap.PAGESIZE
GIVE_BACK_BYTES = 16 << 20  # released blocks from this size return their pages to the system (Linux): a
# Voxtral decoder ring's layer (34 MB); Moonshine's cross K/V blocks (under 5 MB) come and go clip after clip


class SharedArena:
    """A first-fit allocator of page-aligned float32 arrays over one shared anonymous mapping of ``nbytes``."""

    def __init__(self, nbytes: int, buf: mmap.mmap | None = None):
        self.size = -(-nbytes // PAGE) * PAGE
        # anonymous and MAP_SHARED: a fork writes and reads the same pages; or ``buf``, named shared memory of that
        # size that a started twin maps too (``twin_spawn.Segment``)
        self._buf = mmap.mmap(-1, self.size) if buf is None else buf
        self.base = np.frombuffer(self._buf, np.uint8).ctypes.data
        self._free = [(0, self.size)]  # (offset, length), sorted, coalesced
        self._released: list[tuple[int, int]] = []  # blocks given back, merged into _free by the next zeros()
        self._held: list[tuple[int, int]] = []  # blocks released while held, not yet zeroed
        self._holding = False
        self._lock = threading.Lock()

    def zeros(self, shape: tuple[int, ...]) -> np.ndarray | None:
        """A zero-filled float32 array of ``shape`` in the arena, or None when no free block is large enough."""
        need = max(PAGE, -(-4 * int(np.prod(shape)) // PAGE) * PAGE)
        if self._held and not self._holding:  # released after an unhold() had looked (a collection on another thread)
            self.unhold()
        with self._lock:
            self._merge_released()
            for i, (off, n) in enumerate(self._free):
                if n >= need:
                    self._free[i : i + 1] = [(off + need, n - need)] if n > need else []
                    break
            else:
                return None
        a = np.ndarray(shape, np.float32, buffer=self._buf, offset=off)  # zeros: every free block is
        weakref.finalize(a, self._release, off, need).atexit = False  # at exit nobody needs the block zeroed
        return a

    def hold(self) -> None:
        """Keep the blocks released from now on as they are and out of use until ``unhold``."""
        self._holding = True

    def unhold(self) -> None:
        """Release the held blocks (zeroed, or their pages given back) for the next ``zeros``."""
        self._holding = False
        while self._held:
            self._release(*self._held.pop())

    def _release(self, off: int, n: int) -> None:
        if self._holding:
            self._held.append((off, n))
            return
        # zero again for the next owner; small blocks keep their pages (giving them back and faulting them in
        # again cost 12 ms per 20 MB, measured, against 1 ms for this: a decoder allocates the same size clip
        # after clip), large ones give them back: zeroing would make every page of a mostly unwritten ring
        # resident. No lock here: this runs when the garbage collector frees the array, which may be inside zeros().
        if not (n >= GIVE_BACK_BYTES and self._give_back(off, n)):
            np.frombuffer(self._buf, np.uint8, n, off)[:] = 0
        self._released.append((off, n))

    def _give_back(self, off: int, n: int) -> bool:
        """Return the pages of ``[off, off + n)`` to the system (they read as zeros after); False where the
        platform cannot."""
        try:
            self._buf.madvise(mmap.MADV_REMOVE, off, n)
        except (AttributeError, OSError, ValueError):
            return False
        return True

    def _merge_released(self) -> None:
        """Move the released blocks into the free list, coalescing neighbours (under the lock)."""
        if not self._released:
            return
        blocks = list(self._free)
        while self._released:
            blocks.append(self._released.pop())
        blocks.sort()
        merged = [blocks[0]]
        for o, m in blocks[1:]:
            po, pm = merged[-1]
            if po + pm == o:
                merged[-1] = (po, pm + m)
            else:
                merged.append((o, m))
        self._free = merged

    def locate(self, a: np.ndarray) -> int | None:
        """The byte offset of ``a``'s first element in the arena (float32 arrays and their views), else None."""
        if not isinstance(a, np.ndarray) or a.dtype != np.float32 or not a.size:
            return None
        off = a.__array_interface__["data"][0] - self.base
        return off if 0 <= off < self.size else None

    def view(self, off: int, shape: tuple[int, ...], strides: tuple[int, ...]) -> np.ndarray:
        """The float32 array at byte ``off`` with ``shape`` and ``strides`` (as ``locate`` and ``a.strides`` gave
        them; in a forked process the same memory)."""
        return np.ndarray(shape, np.float32, buffer=self._buf, offset=off, strides=strides)
