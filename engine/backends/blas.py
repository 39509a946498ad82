"""BLAS thread policy for the NumPy backend: one thread for small products, the whole pool for large ones.

Streaming runs thousands of small products (a few rows against a weight matrix). With a multi-threaded
OpenBLAS pool those cost ~100x more as soon as another process wants the CPU (pool threads spin waiting for
a core: measured 6.4 s vs 0.055 s for the same 8 000 products on this 2-core machine under load). Large
products (offline encoders, prefills, batched verify passes) and products over large matrices (memory-bound
matrix-vector work, e.g. Voxtral's layers or a 32k-vocabulary head: two threads read ~25 GB/s against ~13 for
one on an idle machine) still use every thread. Switching costs ~2 us.
"""

from __future__ import annotations

SMALL_WORK = 1 << 26  # multiply-adds below which one thread is as fast, and safe when the CPU is shared
BIG_WEIGHTS = 1 << 22  # elements: a matrix this large is read at memory bandwidth, which two threads double


class BlasThreads:
    """Sets the BLAS pool size through threadpoolctl, only when it changes."""

    def __init__(self):
        self._libs = []
        self.full = 1
        try:
            from threadpoolctl import ThreadpoolController

            self._libs = ThreadpoolController().select(user_api="blas").lib_controllers
            self.full = max((lib.num_threads for lib in self._libs), default=1)
        except Exception:  # noqa: BLE001 - no control is only slower, never wrong
            self._libs = []
        self.current = self.full
        self.pinned: int | None = None

    def pin(self, n: int | None) -> None:
        """Keep the pool at ``n`` threads whatever the work (None: back to the policy)."""
        self.pinned = n
        if n is not None:
            self.for_work(0)

    def for_work(self, macs: int, weights: int = 0) -> None:
        """Pick the pool size for a product of ``macs`` multiply-adds over a ``weights``-element matrix."""
        n = 1 if macs < SMALL_WORK and weights < BIG_WEIGHTS else self.full
        n = n if self.pinned is None else self.pinned
        if n != self.current and self._libs:
            for lib in self._libs:
                lib.set_num_threads(n)
            self.current = n
