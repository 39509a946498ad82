"""A second CPU for few-row float32 products (decoder steps): a forked helper process, the "twin".

Why a process: a decoder step is ~60 matrix-vector products of 1-8 MB each and reads memory; one thread
reads ~31-36 GB/s on the development machine, two ~50-73. Half of each product on ``cpu_pool``'s helper
*thread* costs more than it saves (0.95x one thread: the wake-up and the GIL passing back take ~25 us
per product), and the pools that do hand work over fast (OpenBLAS's, ONNX Runtime's) spin for every
session of the process, fall over beside a busy process and, for OpenBLAS, change the last bits of the
results (benchmarks/RESULTS.md, ``handoff.py``, ``thread_policy.py``). A forked process has its own GIL,
sees the weights at the same addresses (copy-on-write pages that neither side writes) and takes a job
from shared memory in about a microsecond while it spins.

Contract:
- Results do not depend on the twin: the backend cuts each product into the same row ranges whether or
  not the twin takes its share of them (half on two CPUs; one CPU's share of a large product on more,
  ``caller_share``), and every range is the same single-threaded OpenBLAS call on the same memory layout in
  either process (tested bit for bit).
- Only on x86-64 (the handoff relies on x86's ordered stores) with two or more CPUs and ``LIVECAP_CPU_TWIN``
  not ``0``; elsewhere ``Twin.submit`` returns None and the caller computes alone. Forked on Linux; started on
  Windows (no fork), macOS (Intel; no safe fork) or with ``LIVECAP_CPU_TWIN=spawn`` (``twin_spawn``: the weights,
  the arena and the control block in named shared memory, the registered objects pickled over; an object that
  cannot go over stays the caller's). A started twin serves once it is ready (the caller computes alone until then).
- The twin knows the weights registered before it forked; registering another (a new model) retires it
  and the next product forks a fresh one. A product over an unknown matrix is the caller's.
- It never makes a product wait long: a half the twin has not finished ``DEADLINE_S`` (or four times what the
  caller's own half took, for very large products) after the caller's is computed by the caller. A twin still
  running is left to finish that job (its CPU was taken away for a while: on a 2-vCPU VM each miss came with
  ~100 ms of the hypervisor's steal time on the twin's vCPU) while the caller goes on alone, and serves again
  once it has; the arena keeps the blocks released meanwhile out of use (``SharedArena.hold``), since the late
  job may still write a cache row, and a job that writes rows of the same arrays the late job may write waits
  for it first (``settle``: a new decode over the same caches), so that no older row lands over a newer one.
  A twin that has died, or is still late after ``LATE_S``, is killed; a new one is started ``RETRY_S`` later,
  a longer wait for each twin that failed soon after the last one did (``FORGIVE_S``), the last repeating
  (logged each time). A twin that cannot start is not tried again.
- A registered program (``numpy_stack.SplitStack``, a whole decoder step) runs in both processes at once:
  each computes its halves and they swap their shares through shared memory (``Channel``); the caller gives
  up on the twin's share as on a product's (``DEADLINE_S``), and the twin gives a program up when the caller
  stops posting (an exception in the caller's half, ``ABANDON_S``).
- It spins only while products come (``SPIN_S`` after the last one), then parks on a pipe; while other
  processes keep the CPU busy (``cpu_pool.contention``, which counts the twin's time as this process's),
  nothing is handed to it. It exits when this process exits or dies (end of file on the pipe).
- Cost: a process whose private memory is what the parent rewrites after the fork (~40 MB measured with
  Moonshine small), and one CPU spinning during decoding bursts.
"""

from __future__ import annotations

import gc
import logging
import mmap
import os
import pickle
import platform
import signal
import subprocess
import sys
import threading
import time
import warnings
import weakref

import numpy as np

from . import cpu_pool, numpy_attention, twin_spawn
from .shared_arena import SharedArena

log = logging.getLogger(__name__)

SPIN_S = 0.003  # the twin spins this long after its last job, then parks (times: perf_counter, which is fine-grained
# on Windows too, where Python < 3.13's monotonic clock ticks every ~16 ms)
DEADLINE_S = 0.05  # a half not done by then (or by 4x the caller's own half) is the caller's; the twin is left to
# finish it (LATE_S), or killed where it has died
RETRY_S = (2.0, 30.0, 300.0)  # a new one started after these waits, one per twin that failed soon after the last
# one did; the last wait repeats
LATE_S = 1.0  # a twin still running but late with its job this long is killed (before: at once, and on a noisy VM
# a second miss within FORGIVE_S left the steps on one CPU for 30 s: small 11.4 -> 19 ms per token)
FORGIVE_S = 10.0  # a twin that answered this long before it missed was no sign of a machine it cannot help: the
# wait after it is the first again (seen on a noisy 2-vCPU VM: one live session missed 3 times in ~2 min, another
# none in 4; a miss costs one DEADLINE_S, a twin away for 300 s that long at one CPU's speed); where the machine
# cannot give it a CPU of its own, each new twin should miss soon after its start, and the waits grow
NUDGE_S = 0.0005  # a parked twin not yet awake is woken again this often (a wake-up may cross the park)
MAX_ROWS = 32  # products of up to this many rows go to the twin
MAX_CHUNKS = 64
ARENA_BYTES = (4 << 30, 1 << 30, 256 << 20)  # shared memory for attention K/V: the first size the system
# maps (virtual: pages cost memory once written; Voxtral's two KV rings at their full windows take 2.2 GB),
# at most a quarter of the memory, the smallest where shared memory is charged when mapped (arena_sizes)
GO, DONE, STATE, SERVED = 0, 8, 16, 24  # int64 slots of the control block (a cache line apart)
WEIGHT, ROWS, K, STEP, NCHUNKS, KIND, EDGES = 32, 33, 34, 35, 36, 37, 40
PRODUCT, ATTENTION, BLOCK, PROGRAM = 0, 1, 2, 3  # KIND; an attention's fields sit where a product's edges do:
H0, TQ, SCALE, K_AT, V_AT, KV_LAYOUT = range(EDGES, EDGES + 6)  # K's, V's shapes and strides from KV_LAYOUT
MASK_COLS = KV_LAYOUT + 12  # an attention's mask: its columns (0: none), as 0/1 floats after the queries
FIELDS = 1024  # int64 slots from EDGES on: a product's edges, an attention's or a block's fields
MINE, THEIRS, ABORT = EDGES + FIELDS, EDGES + FIELDS + 8, EDGES + FIELDS + 16  # a program's (lockstep) slots
TAG0 = ABORT + 1  # the tag its exchanges count from
RUNNING, PARKED, STARTING = 0, 1, 2
START_S = 60.0  # a started twin not ready by then is given up
CTRL_BYTES = 8 * (ABORT + 8)
ABANDON_S = 1.0  # a program's share the caller has not posted by then: the twin gives the program up


def start_method() -> str | None:
    """How this machine and environment make a twin: "fork", "spawn", or None for no twin (the module's contract)."""
    setting = os.environ.get("LIVECAP_CPU_TWIN", "1")
    if setting == "0" or platform.machine().lower() not in ("x86_64", "amd64") or cpu_pool.CPUS < 2:
        return None
    if sys.platform.startswith("linux"):
        return "spawn" if setting == "spawn" else "fork"
    return "spawn" if sys.platform in ("win32", "darwin") else None  # macOS: no fork after its frameworks ran


def enabled() -> bool:
    """Whether this machine and environment allow a twin (see the module's contract)."""
    return start_method() is not None


def arena_sizes() -> tuple[int, ...]:
    """The sizes of shared arena to try, largest first: from ``ARENA_BYTES``, those up to a quarter of the
    machine's memory; only the smallest where the system charges a mapping's whole size when it is made (Linux
    strict overcommit, ``vm.overcommit_memory = 2``), so that the arena never takes memory a model needs."""
    try:
        with open("/proc/sys/vm/overcommit_memory") as f:
            strict = f.read().strip() == "2"
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (OSError, ValueError):
        strict, memory = False, 0
    smallest = ARENA_BYTES[-1]
    if strict or sys.platform in ("win32", "darwin"):  # Windows charges a section's size at once (macOS: unmeasured)
        return (smallest,)
    return tuple(n for n in ARENA_BYTES if n == smallest or n <= memory // 4)


class Twin:
    """The twin process of one backend: registered weights, the shared control block and buffers."""

    def __init__(self):
        self._ids: dict[int, tuple[int, weakref.ref]] = {}
        self._lock = threading.Lock()  # one product at a time goes to the twin
        self._registry = threading.Lock()  # models may load on another thread than the one computing
        self._pid = self._known = self._seq = 0
        self._stale = False  # registered weights the twin does not know yet
        self._retries, self._retry_at = 0, 0.0  # twins that stopped answering soon after the last; no new one before
        self._born = 0.0  # when the current twin was started
        self._late: tuple[int, float] | None = None  # (job, when) the twin missed its deadline but may still finish
        self._rows: tuple | None = None  # the rows of arena arrays the current job may write (_put), kept while late
        self._late_rows: tuple | None = None
        self.method = start_method()
        self.failed = self.method is None
        self.arena = None  # attention K/V the twin can read (kv_zeros), made before any fork
        self._layouts: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # submit_block's, per block
        self._arena_segment = None  # a started twin's arena in named shared memory
        self._weight_segments: dict = {}  # and the weights' (by the id of the array over each, while it lives)
        self._proc = self._box = None  # a started twin's process, and its payload's memory until it is ready
        self._absent: set[int] = set()  # registered objects a started twin could not be given
        if not self.failed:
            for size in arena_sizes():
                try:
                    if self.started:
                        self._arena_segment = twin_spawn.Segment(size)
                        self.arena = SharedArena(size, self._arena_segment.buf)
                    else:
                        self.arena = SharedArena(size)
                    break
                except (OSError, ValueError, OverflowError):  # not that much shared memory here (none: products only)
                    continue
        _twins.add(self)
        weakref.finalize(self, _end, self.__dict__)

    @property
    def started(self) -> bool:
        """Whether this twin is a started process (not forked): what it runs must be in shared memory or picklable."""
        return self.method == "spawn"

    def weight_memory(self, nbytes: int) -> np.ndarray:
        """``nbytes`` of memory for weight matrices (``heap.Arena``'s blocks): ordinary memory, or named shared
        memory where the twin is started (it maps it too)."""
        if not self.started or self.failed:
            return np.empty(nbytes, np.uint8)
        try:
            seg = twin_spawn.Segment(nbytes)
        except OSError:
            return np.empty(nbytes, np.uint8)  # products over these matrices stay the caller's
        array = seg.array
        key = id(array)
        self._weight_segments[key] = seg
        weakref.finalize(array, self._weight_segments.pop, key, None)  # weights dropped: the memory goes back
        return array

    # -- registry ---------------------------------------------------------------------------------
    def register(self, w) -> None:
        """Make ``w`` one the twin may compute with (from its next fork on): a float32 ``[out, in]`` matrix, or
        a product in row chunks (``shape``, ``bounds`` and ``run_chunk(i, x) -> [rows, n_i]``, as
        ``ort_kernels.NBitsLinear``)."""
        if self.failed or len(w.shape) != 2 or (isinstance(w, np.ndarray) and w.dtype != np.float32):
            return
        with self._registry:
            self._ids[id(w)] = (len(self._ids), weakref.ref(w))
            self._stale = True

    def _index(self, w: np.ndarray) -> int | None:
        entry = self._ids.get(id(w))
        if entry is None or entry[1]() is not w or entry[0] >= self._known or entry[0] in self._absent:
            return None
        return entry[0]

    # -- the caller's side ------------------------------------------------------------------------
    def submit(self, w, x: np.ndarray, edges: list[int], step: int = 0):
        """Hand part of a product over ``x [rows, in]`` to the twin. For a matrix ``w``: the row ranges between
        the consecutive bounds ``edges``, each as ``w[a:c] @ x.T`` in blocks of ``step`` rows (``[c - a, rows]``
        results, one after another); for a chunked product: its chunks ``edges[0]`` to ``edges[-1] - 1``
        (``[rows, n_i]`` results, one after another). Returns a ticket for ``collect`` and ``x`` as the twin
        sees it (compute your own part over that), or None when the caller must compute everything (no twin,
        busy machine, unknown matrix, twin in use)."""
        rows, k = x.shape
        if rows > MAX_ROWS or len(edges) > MAX_CHUNKS + 1 or not self._claim():
            return None
        i = self._index(w)
        span = edges[-1] - edges[0] if isinstance(w, np.ndarray) else w.bounds[edges[-1]] - w.bounds[edges[0]]
        if i is None or rows * k > self._x.size or rows * span > self._y.size:
            self._lock.release()
            return None
        c = self._ctrl
        xs = self._x[: rows * k].reshape(rows, k)
        xs[...] = x
        c[KIND], c[WEIGHT], c[ROWS], c[K], c[STEP], c[NCHUNKS] = PRODUCT, i, rows, k, step, len(edges) - 1
        c[EDGES : EDGES + len(edges)] = edges
        return self._go(xs)

    def submit_attention(self, q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float, h0: int, mask=None):
        """Hand heads ``h0:`` of ``softmax(q k^T * scale, mask) v`` to the twin: ``q [H, Tq, d]``, ``k, v
        [H, Tk, d]`` arrays in ``arena`` (views allowed), ``mask [Tq, Tk]`` boolean (True = may attend) or None.
        Returns a ticket for ``collect`` (the result: heads ``h0:`` as ``[H - h0, Tq, dv]``, flat), or None
        when the caller must compute every head."""
        arena = self.arena
        if arena is None or q.shape[1] > MAX_ROWS:
            return None
        k_at, v_at = arena.locate(k), arena.locate(v)
        h, tq, d = q.shape
        if k_at is None or v_at is None or min(k.strides + v.strides) <= 0 or not self._claim():
            return None
        n_q, n_mask = (h - h0) * tq * d, 0 if mask is None else tq * k.shape[1]
        if n_q + n_mask > self._x.size or (h - h0) * tq * v.shape[2] > self._y.size:
            self._lock.release()
            return None
        c = self._ctrl
        xs = self._x[:n_q].reshape(h - h0, tq, d)
        xs[...] = q[h0:]
        if n_mask:
            self._x[n_q : n_q + n_mask] = np.asarray(mask, bool).reshape(-1)
        c[KIND], c[H0], c[TQ], c[K_AT], c[V_AT] = ATTENTION, h0, tq, k_at, v_at
        c[MASK_COLS] = n_mask // tq
        c[SCALE : SCALE + 1].view(np.float64)[0] = scale
        c[KV_LAYOUT : KV_LAYOUT + 12] = [*k.shape, *k.strides, *v.shape, *v.strides]
        return self._go(xs)

    def submit_block(self, block, inputs: list[np.ndarray], arrays: list[np.ndarray], ints: list[int]):
        """Hand ``block.run_half(1, inputs, arrays, ints)`` to the twin (a registered block, as
        ``numpy_blocks.SplitAttention``): ``inputs`` float32 arrays copied to it (it sees them flat),
        ``arrays`` 3-D float32 arrays in ``arena`` that it reads and, where ``ints`` is ``[n, start]``, may write
        in rows ``start .. start + n`` of their second axis (``[n]``: reads only), ``ints`` its parameters.
        Returns a ticket for ``collect`` (the result: ``[rows of inputs[0], block.shape[0]]``, flat), or None
        when the caller must compute that half too. Call ``settle`` first."""
        if not self._put(BLOCK, block, inputs, arrays, ints, block.shape[0] * inputs[0].shape[0]):
            return None
        return self._go(None)

    def submit_program(self, program, inputs: list[np.ndarray], arrays: list[np.ndarray], ints: list[int]):
        """Start ``program.run(1, inputs, arrays, ints, channel)`` on the twin (a registered program, as
        ``numpy_stack.SplitStack``; the arguments go over as for ``submit_block``), to run in lockstep with the
        caller's ``program.run(0, ..., channel)``. Returns the caller's ``Channel`` (``close`` it when the
        program is done), or None when the caller must run the program alone. Call ``settle`` first."""
        if inputs[0].shape[0] > MAX_ROWS or not self._put(PROGRAM, program, inputs, arrays, ints, 0):
            return None
        c = self._ctrl
        c[ABORT] = 0
        c[TAG0] = tag = max(int(c[MINE]), int(c[THEIRS]))  # the tags of earlier programs stay behind this one's
        seq, _, started = self._go(None)
        return Channel(c, self._ex, 0, seq, tag, started, self)

    def settle(self, arrays: list[np.ndarray], ints: list[int]) -> None:
        """Before this process writes rows of ``arrays`` (``ints`` as for ``submit_block``), computing a job itself or
        with the twin: where the twin is late with a job that may still write some of the same rows (the same
        arrays, overlapping rows: the next partial's decode of a segment rewrites its caches from position 0),
        wait until that job is done, and kill the twin where it is not within ``LATE_S`` of its miss. Else its
        late rows could land over the newer ones (a row of another step in a cache: wrong logits). A job further
        on (the same decode's next position) does not wait."""
        late = self._late_rows
        if late is None or self._late is None or len(ints) < 2 or self.arena is None:
            return
        offsets, a, b = late
        start, stop = ints[1], ints[1] + ints[0]
        if stop <= a or b <= start or not offsets.intersection(self.arena.locate(x) for x in arrays):
            return
        with self._lock:
            while not self._caught_up():  # done, or given up after LATE_S (as a claim would)
                if not self._alive():
                    self._fail("gone while late", again=True)
                else:
                    time.sleep(0.0005)

    def _put(self, kind: int, block, inputs, arrays, ints, out_size: int) -> bool:
        """Claim the twin and write a block's or a program's job (``submit_block``); False when the caller
        must compute it (the twin is then not claimed)."""
        layout = self._layout(block, arrays)
        if layout is None or not self._claim():
            return False
        i = self._index(block)
        sizes = [a.size for a in inputs]
        fields = 3 + len(sizes) + len(layout) + len(ints)
        if i is None or sum(sizes) > self._x.size or out_size > self._y.size or fields > FIELDS:
            self._lock.release()
            return False
        c, x, pos = self._ctrl, self._x, 0
        for a, n in zip(inputs, sizes):
            x[pos : pos + n] = a.reshape(-1)
            pos += n
        c[KIND], c[WEIGHT], c[EDGES] = kind, i, fields - 1
        c[EDGES + 1 : EDGES + fields] = [len(sizes), *sizes, *layout, len(ints), *ints]
        self._rows = None
        if len(ints) > 1 and arrays:  # the rows it may write (settle)
            self._rows = (frozenset(layout[1::7]), ints[1], ints[1] + ints[0])
        return True

    def _layout(self, block, arrays: list[np.ndarray]):
        """The fields that tell the twin where ``arrays`` lie in the arena (remembered per block for the arrays
        it had last: a decoder layer's caches and cross K/V stay the same step after step), or None when one
        of them is not in the arena."""
        last = self._layouts.get(block)
        if last is not None and len(last[0]) == len(arrays) and all(a() is b for a, b in zip(last[0], arrays)):
            return last[1]
        if self.arena is None or 7 * len(arrays) > FIELDS // 2:
            return None
        fields = [len(arrays)]
        for a in arrays:
            at = self.arena.locate(a)
            if at is None or a.ndim != 3 or min(a.strides) <= 0:
                return None
            fields += [at, *a.shape, *a.strides]
        self._layouts[block] = (tuple(weakref.ref(a) for a in arrays), fields)  # not keeping them alive
        return fields

    def _claim(self) -> bool:
        """Take the twin for one job (forking it first where needed); False when the caller must go alone."""
        if (
            self.failed
            or time.perf_counter() < self._retry_at
            or cpu_pool.contention.busy()
            or not self._lock.acquire(blocking=False)
        ):
            return False
        try:
            if self._stale:
                try:
                    self._start()
                except (OSError, ValueError) as e:  # no memory or processes left, or nothing to pickle: alone
                    self._fail(f"cannot start: {e}")
            if not self._pid or (self._box is not None and not self._started()) or not self._caught_up():
                self._lock.release()
                return False
        except BaseException:
            self._lock.release()
            raise
        return True

    def _go(self, xs: np.ndarray):
        c = self._ctrl
        self._seq += 1
        c[GO] = self._seq
        if c[STATE] == PARKED:
            self._wake()
        return self._seq, xs, time.perf_counter()

    def collect(self, ticket) -> np.ndarray | None:
        """The twin's results (flat, in the order ``submit`` describes; valid until the next ``submit``), or
        None when it did not finish in time (it is then gone, and the caller computes that part itself)."""
        seq, _, submitted = ticket
        try:
            return self._y if self._await(DONE, seq, submitted) else None
        finally:
            self._lock.release()

    def _await(self, slot: int, value: int, since: float) -> bool:
        """Wait until the twin has set ``slot`` to ``value`` (or beyond): True, or False when it did not within
        ``DEADLINE_S`` or four times the time since ``since`` (the caller's own part took that long; the twin,
        whose part is as large, is then killed)."""
        c = self._ctrl
        if c[slot] >= value:
            return True
        start = time.perf_counter()
        limit = max(DEADLINE_S, 4 * (start - since))
        nudge = start + NUDGE_S
        while c[slot] < value:
            now = time.perf_counter()
            if now - start > limit:
                self._missed(f"no answer within {limit * 1000:.0f} ms")
                return False
            if now > nudge:
                if c[STATE] == PARKED:
                    self._wake()
                nudge = now + NUDGE_S
        return True

    def wait_ready(self, timeout: float) -> bool:
        """Start the twin where needed and wait up to ``timeout`` s until it takes jobs (a started one needs
        ~0.3 s); False when there is none by then (benchmarks and tests; the engine never waits)."""
        end = time.perf_counter() + timeout
        while not self._claim():
            if self.failed or not (self._pid or self._stale) or time.perf_counter() > end:  # gone, or nothing to serve
                return False
            time.sleep(0.01)
        self._lock.release()
        return True

    def served(self) -> int:
        """How many jobs the current twin has finished (0 without one)."""
        return int(self._ctrl[SERVED]) if self._pid else 0

    @property
    def pid(self) -> int:
        return self._pid

    def _wake(self) -> None:
        try:
            os.write(self._wfd, b"w")
        except OSError:
            pass

    def _missed(self, why: str) -> None:
        """The twin did not answer in time (the caller computes its part): given up where it has died, else left
        to finish the job (a program told to stop at its next exchange) and taken again once it has (``_claim``)."""
        if not self._alive():
            self._fail(why, again=True)
            return
        self._ctrl[ABORT] = self._seq
        self._late = (self._seq, time.perf_counter())
        self._late_rows = self._rows if self._ctrl[KIND] in (BLOCK, PROGRAM) else None
        if self.arena is not None:
            self.arena.hold()
        log.info("CPU twin %d late (%s); the caller computes alone until it has finished", self._pid, why)

    def _caught_up(self) -> bool:
        """Whether the twin has finished the job it was late with (True when it was not late); one late for
        ``LATE_S`` is given up."""
        if self._late is None:
            return True
        seq, since = self._late
        if self._ctrl[DONE] >= seq:
            self._no_longer_late()
            return True
        if time.perf_counter() - since > LATE_S:
            self._fail(f"still no answer after {LATE_S:g} s", again=True)
        return False

    def _no_longer_late(self) -> None:
        """The late job is done or its process gone: the blocks the arena held for it go back."""
        if self._late is not None and self.arena is not None:
            self.arena.unhold()
        self._late = self._late_rows = None

    def _alive(self) -> bool:
        """Whether the twin's process is still running (a stopped one counts)."""
        if self._proc is not None:
            return self._proc.poll() is None
        try:
            return os.waitid(os.P_PID, self._pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None
        except ChildProcessError:
            return False

    def _fail(self, why: str, again: bool = False) -> None:
        """Kill the twin; with ``again`` (it stopped answering), a new one is started after the next of ``RETRY_S``,
        or after the first when this one answered for ``FORGIVE_S``; else (it cannot start) none."""
        pid = self._pid
        self.stop(kill=True)
        if again:
            if time.perf_counter() - self._born >= FORGIVE_S:
                self._retries = 0
            wait = RETRY_S[min(self._retries, len(RETRY_S) - 1)]
            self._retries += 1
            self._retry_at, self._stale = time.perf_counter() + wait, True
            log.warning("CPU twin %d stopped (%s); products run on this process alone for %.0f s", pid, why, wait)
            return
        log.warning("CPU twin %d stopped (%s); products run on this process alone from now on", pid, why)
        self.failed = True

    def _start(self) -> None:
        """Fork or start a twin over the weights alive now (retiring a stale one)."""
        if self._pid:
            self.stop()
        with self._registry:
            weights = [w for w in (r() for _, r in self._ids.values()) if w is not None]
            self._ids = {id(w): (j, weakref.ref(w)) for j, w in enumerate(weights)}
            self._known, self._stale = len(weights), False
        if not weights:
            return
        self._born = time.perf_counter()
        max_k = max(w.shape[1] for w in weights)
        max_n = max(w.shape[0] for w in weights)
        sizes = (CTRL_BYTES, 4 * MAX_ROWS * max_k, 4 * MAX_ROWS * max_n, 4 * 4 * MAX_ROWS * max_k)  # control block,
        # x, y and a program's shares (two sides, two slots each)
        if self.started:
            self._spawn(weights, sizes)
            return
        buf = mmap.mmap(-1, sum(sizes))  # anonymous and shared with the fork
        self._ctrl, self._x, self._y, self._ex = _buffers(buf, sizes)
        self._seq = 0
        rfd, wfd = os.pipe()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)  # 3.12+: fork with threads (see _serve)
                pid = os.fork()
        except OSError:
            os.close(rfd)
            os.close(wfd)
            raise
        if pid == 0:  # the twin
            for twin in list(_twins):  # what it runs computes here and never hands on (no fork from the twin)
                twin.failed = True
            try:
                _forked(rfd)
                ppid = os.getppid()
                _serve(self._ctrl, self._x, self._y, self._ex, weights, self.arena, lambda: _parked(rfd, ppid))
            finally:
                os._exit(0)
        os.close(rfd)
        self._pid, self._wfd = pid, wfd
        cpu_pool.contention.also_ours(pid)
        log.info("CPU twin %d started over %d matrices", pid, len(weights))

    def _spawn(self, weights: list, sizes: tuple) -> None:
        """Start a twin process (``twin_spawn``) over ``weights``: those that cannot go over stay the caller's."""
        ctrl = twin_spawn.Segment(sum(sizes))
        arena = [] if self._arena_segment is None else [self._arena_segment]
        segments = [*arena, *list(self._weight_segments.values()), ctrl]
        self._ctrl, self._x, self._y, self._ex = _buffers(ctrl.buf, sizes)
        self._ctrl[STATE] = STARTING
        self._seq = 0
        self._absent = set()
        for j, w in enumerate(weights):  # each alone first, to find those that cannot go
            try:
                twin_spawn.dumps(w, segments, (Twin,))
            except ValueError as e:
                log.info("CPU twin: computed here alone: %s", e)
                self._absent.add(j)
        sent = [None if j in self._absent else w for j, w in enumerate(weights)]
        pickled = twin_spawn.dumps(sent, segments, (Twin,))  # then together: a stack and its blocks share objects
        at = 0 if arena else None  # the arena is the first segment
        payload = pickle.dumps({"ctrl": (len(segments) - 1, sizes), "arena": at, "weights": pickled})
        self._proc, self._box = twin_spawn.start(payload, segments)
        self._ctrl_segment, self._since = ctrl, time.perf_counter()
        self._pid, self._wfd = self._proc.pid, self._proc.stdin.fileno()
        cpu_pool.contention.also_ours(self._pid)
        log.info("CPU twin %d starting over %d objects (%d stay here)", self._pid, len(weights), len(self._absent))

    def _started(self) -> bool:
        """Whether a starting twin is ready now (then its payload's memory goes); False while it starts, and it is
        given up when it died or is late."""
        if self._ctrl[STATE] != STARTING:
            self._box.close()
            self._box = None
            return True
        if self._proc.poll() is not None or time.perf_counter() - self._since > START_S:
            self._fail("it did not start")
        return False

    def stop(self, kill: bool = False) -> None:
        """End the twin (at once with ``kill``) and wait for it; the next ``submit`` forks a new one."""
        if not self._pid:
            return
        pid, self._pid = self._pid, 0
        proc, self._proc = self._proc, None
        try:
            self._end_process(pid, proc, kill)
        finally:
            cpu_pool.contention.also_ours(pid, False)
            self._no_longer_late()  # the late job can no longer write

    def _end_process(self, pid: int, proc, kill: bool) -> None:
        """Make the twin's process ``pid`` (``proc`` where it was started) leave, or kill it, and reap it."""
        if proc is not None:  # a started twin
            if kill:
                proc.kill()
            proc.stdin.close()  # end of file: the twin leaves when it parks (within SPIN_S)
            try:
                proc.wait(0.2)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if self._box is not None:
                self._box.close()
                self._box = None
            return
        try:
            if kill:
                os.kill(pid, signal.SIGKILL)
            os.close(self._wfd)  # end of file: the twin leaves when it parks (within SPIN_S)
            for _ in range(100):
                if os.waitpid(pid, os.WNOHANG)[0]:
                    break
                time.sleep(0.002)
            else:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
        except (ChildProcessError, ProcessLookupError, OSError):
            pass


class Abandoned(Exception):
    """Raised in the twin's half of a program whose caller stopped posting its shares (``Channel.swap``)."""


class Channel:
    """The shares two processes exchange while both run one program in lockstep (``Twin.submit_program``): the
    caller is side 0, the twin side 1. Each ``swap`` posts this side's share and returns the other's. Shares
    go through two slots per side in turn, so a side writes a slot again only after the other has posted the
    exchange after the one that read it."""

    def __init__(self, ctrl, ex, side: int, seq: int, tag: int, since: float, twin: Twin | None = None):
        self._ctrl, self._ex, self.side, self.seq, self._tag, self._since = ctrl, ex, side, seq, tag, since
        self.twin = twin  # the caller's Twin (side 0)
        self.open = True  # False once the twin did not answer in time (the caller computes its halves)

    def swap(self, share: np.ndarray) -> np.ndarray | None:
        """Post ``share`` (float32) and return the other side's share of the same exchange (same shape; valid
        until this side's next swap). The caller gets None when the twin did not post within the deadline of
        ``Twin.collect`` (it is then gone; every later swap returns None at once). The twin's call raises
        ``Abandoned`` when the caller gives the program up or posts nothing for ``ABANDON_S``."""
        if not self.open:
            return None
        self._tag += 1
        tag, n, c, ex = self._tag, share.size, self._ctrl, self._ex
        if n > ex.shape[2]:
            raise ValueError("This share is larger than the exchange slots.")
        ex[self.side, tag % 2, :n] = share.reshape(-1)
        c[THEIRS if self.side else MINE] = tag
        if self.side:
            _await_caller(c, tag, self.seq)
        elif not self.twin._await(THEIRS, tag, self._since):
            self.open = False
            return None
        self._since = time.perf_counter()
        return ex[1 - self.side, tag % 2, :n].reshape(share.shape)

    def close(self, aborted: bool = False) -> None:
        """The caller's end of the program: wait for the twin to finish its part (``aborted``: tell it to stop
        first), then free the twin for the next job."""
        t = self.twin
        try:
            if self.open:
                if aborted:
                    self._ctrl[ABORT] = self.seq
                self.open = t._await(DONE, self.seq, self._since)
        finally:
            t._lock.release()


def _await_caller(c, tag: int, seq: int) -> None:
    """The twin's wait for the caller's share ``tag`` of program ``seq`` (see ``Channel.swap``)."""
    if c[MINE] >= tag:
        return
    start = time.perf_counter()
    while c[MINE] < tag:
        if c[ABORT] == seq or time.perf_counter() - start > ABANDON_S:
            raise Abandoned


def caller_share(parts: int) -> int:
    """How many of a product's ``parts`` (the leading ones) the caller keeps when the twin takes the rest: half
    on two CPUs; on more, all but one CPU's share (``parts // CPUS``), which ``run_parts`` then spreads over
    ``cpu_pool``'s threads, so that a large product uses every core, not two."""
    cpus = cpu_pool.CPUS
    return parts // 2 if cpus <= 2 or parts < cpus else parts - parts // cpus


def run_parts(twin: Twin | None, ticket, jobs: list, half: int, place, threads: bool) -> None:
    """Run ``jobs``, the independent parts of one product. With a ``ticket`` (``submit`` handed the parts from
    ``half`` on to ``twin``): the first ``half`` here (over ``cpu_pool``'s threads but one, the twin's, when
    ``threads`` and the machine has more than two CPUs), then ``place(results)`` with the twin's (``collect``),
    or, when it did not answer in time, its parts here too. Without: every part here, over ``cpu_pool``'s
    threads when ``threads``."""
    if ticket is not None:
        if threads and cpu_pool.CPUS > 2:
            cpu_pool.run(jobs[:half], width=cpu_pool.CPUS - 1)
        else:
            for run in jobs[:half]:
                run()
        theirs = twin.collect(ticket)
        if theirs is not None:
            place(theirs)
            return
        jobs, threads = jobs[half:], False  # the twin did not answer in time: ours after all
    if threads:
        cpu_pool.run(jobs)
    else:
        for run in jobs:
            run()


def sum_of_halves(block, x: np.ndarray, threads: bool = False) -> np.ndarray:
    """``block.run_chunk(0, x) + block.run_chunk(1, x)`` for a block whose two halves each return a share of its
    ``[rows, block.shape[0]]`` output (``numpy_blocks.SplitMlp``, ``ort_kernels.GatedMlp``): the second half on
    ``block.twin`` where it takes it, else here too (over ``cpu_pool``'s threads with ``threads``); the shares are
    added in this order either way."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    twin = block.twin
    ticket = twin.submit(block, x, [1, 2]) if twin is not None else None
    if ticket is not None:
        x = ticket[1]
    shares: list = [None, None]

    def job(i):
        def run():
            shares[i] = block.run_chunk(i, x)

        return run

    def place(theirs):
        shares[1] = theirs[: x.shape[0] * block.shape[0]].reshape(x.shape[0], block.shape[0])

    run_parts(twin, ticket, [job(0), job(1)], 1, place, threads)
    return shares[0] + shares[1]


_twins: weakref.WeakSet[Twin] = weakref.WeakSet()


def _end(state: dict) -> None:
    """A collected ``Twin``'s process goes with it."""
    pid, proc = state.get("_pid"), state.get("_proc")
    if proc is not None:
        proc.kill()
        proc.wait()
    elif pid:
        try:
            os.close(state["_wfd"])
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except OSError:
            pass


def _forget_in_child() -> None:
    """A process forked from this one (other than a twin) must not talk to this process's twin."""
    for twin in list(_twins):
        twin._pid, twin._stale = 0, True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)


def _buffers(buf, sizes: tuple) -> tuple:
    """The control block (int64 slots) and the x, y and exchange buffers (float32) over ``buf``, in that order."""
    ctrl_bytes, x_bytes, y_bytes, ex_bytes = sizes
    return (
        np.frombuffer(buf, np.int64, ctrl_bytes // 8),
        np.frombuffer(buf, np.float32, x_bytes // 4, ctrl_bytes),
        np.frombuffer(buf, np.float32, y_bytes // 4, ctrl_bytes + x_bytes),
        np.frombuffer(buf, np.float32, ex_bytes // 4, ctrl_bytes + x_bytes + y_bytes).reshape(2, 2, -1),
    )


def _forked(rfd: int) -> None:
    """A forked twin's start: only NumPy calls on memory it was handed and ``os`` calls run in it from here on,
    nothing that could wait for a lock another thread of the parent held at the fork."""
    gc.disable()  # the parent's objects are never collected here: no page of theirs gets written
    for sig in signal.valid_signals():  # no handler of the parent's (Python code) may run here
        if sig != signal.SIGINT and callable(signal.getsignal(sig)):
            signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl+C is the parent's; the twin ends with it
    os.closerange(3, rfd)
    os.closerange(rfd + 1, 1 << 16)


def _parked(rfd: int, ppid: int) -> bool:
    """A forked twin's wait for a wake-up on its pipe: False when the parent is gone."""
    return bool(os.read(rfd, 64)) and os.getppid() == ppid


def serve_started(payload: dict, segments: list, read) -> int:
    """A started twin's life (``twin_child.main``): the objects rebuilt over ``segments``, then ``_serve`` until
    ``read()`` (its wait for a wake-up) finds the parent gone. Returns the process's exit status."""
    ctrl, x, y, ex = _buffers(segments[payload["ctrl"][0]].buf, payload["ctrl"][1])
    at = payload["arena"]
    arena = None if at is None else SharedArena(segments[at].size, segments[at].buf)
    weights = pickle.loads(payload["weights"])
    for w in weights:  # sessions of 8/4-bit kernels made now, not in the first job (its deadline)
        getattr(w, "twin_ready", lambda: None)()
    ctrl[STATE] = RUNNING  # ready: the caller hands jobs over from now on

    def park() -> bool:
        try:
            return bool(read())
        except OSError:
            return False

    _serve(ctrl, x, y, ex, weights, arena, park)
    return 0


def product_into(w: np.ndarray, x: np.ndarray, out: np.ndarray) -> None:
    """``out [n, rows] = w @ x.T`` for ``w [n, in]``: rows of a matrix as stored, or of one in
    ``numpy_blocks.step_layout`` (read as ``x @ w.T`` for more than one row: ``w @ x^T`` ran ten times slower)."""
    if x.shape[0] > 1 and w.strides[0] == w.itemsize:
        out[...] = (x @ w.T).T
    else:
        np.matmul(w, x.T, out=out)


def _serve(ctrl, xbuf, ybuf, ex, weights, arena, park) -> None:
    """The twin's loop: spin on ``GO`` for a job, compute its ranges, post ``DONE``; when idle, ``park()`` until
    woken (False: the parent is gone, and the loop ends)."""
    last, views = 0, {}
    clock = time.perf_counter
    while True:
        idle_until = clock() + SPIN_S
        while ctrl[GO] == last:
            if clock() > idle_until:
                ctrl[STATE] = PARKED
                if ctrl[GO] == last and not park():
                    return  # the parent is gone
                ctrl[STATE] = RUNNING
                idle_until = clock() + SPIN_S
        last = int(ctrl[GO])
        if ctrl[KIND] == ATTENTION:
            _attend(ctrl, xbuf, ybuf, arena)
            ctrl[SERVED] += 1
            ctrl[DONE] = last
            continue
        if ctrl[KIND] in (BLOCK, PROGRAM):
            _block(ctrl, xbuf, ybuf, ex, arena, weights[int(ctrl[WEIGHT])], views, last)
            ctrl[SERVED] += 1
            ctrl[DONE] = last
            continue
        w = weights[int(ctrl[WEIGHT])]
        rows, k, step, n = int(ctrl[ROWS]), int(ctrl[K]), int(ctrl[STEP]), int(ctrl[NCHUNKS])
        edges = [int(e) for e in ctrl[EDGES : EDGES + n + 1]]
        x = xbuf[: rows * k].reshape(rows, k)
        if isinstance(w, np.ndarray):
            y = ybuf[: rows * (edges[-1] - edges[0])].reshape(-1, rows)
            for a, c in zip(edges[:-1], edges[1:]):
                for s in range(a, c, step):
                    e = min(c, s + step)
                    product_into(w[s:e], x, y[s - edges[0] : e - edges[0]])
        else:
            at = 0
            for i in range(edges[0], edges[-1]):
                part = w.run_chunk(i, x)
                ybuf[at : at + part.size] = part.reshape(-1)
                at += part.size
        ctrl[SERVED] += 1
        ctrl[DONE] = last


def _attend(ctrl, xbuf, ybuf, arena) -> None:
    """The twin's part of an attention (``Twin.submit_attention``): the same per-head code as the caller's."""
    h0, tq = int(ctrl[H0]), int(ctrl[TQ])
    scale = float(ctrl[SCALE : SCALE + 1].view(np.float64)[0])
    layout = [int(e) for e in ctrl[KV_LAYOUT : KV_LAYOUT + 12]]
    k = arena.view(int(ctrl[K_AT]), tuple(layout[0:3]), tuple(layout[3:6]))
    v = arena.view(int(ctrl[V_AT]), tuple(layout[6:9]), tuple(layout[9:12]))
    h1, d, dv = k.shape[0], k.shape[2], v.shape[2]
    n_q, cols = (h1 - h0) * tq * d, int(ctrl[MASK_COLS])
    q = xbuf[:n_q].reshape(h1 - h0, tq, d)
    mask = xbuf[n_q : n_q + tq * cols].reshape(tq, cols) != 0 if cols else None
    out = ybuf[: (h1 - h0) * tq * dv].reshape(h1 - h0, tq, dv)
    numpy_attention.dense(q, k[h0:h1], v[h0:h1], scale, mask, out)


def _block(ctrl, xbuf, ybuf, ex, arena, block, views: dict, seq: int) -> None:
    """The twin's half of a block (``Twin.submit_block``) or its side of a program (``submit_program``): the
    same code as the caller's. ``views``: the arena arrays seen so far, by their place (a decoder's caches
    come back step after step)."""
    f = ctrl[EDGES + 1 : EDGES + 1 + int(ctrl[EDGES])].tolist()
    n, at, inputs = f[0], 0, []
    for size in f[1 : 1 + n]:
        inputs.append(xbuf[at : at + size])
        at += size
    p, arrays = 2 + n, []
    for _ in range(f[1 + n]):
        where = tuple(f[p : p + 7])
        a = views.get(where)
        if a is None:
            if len(views) > 4096:
                views.clear()
            a = views[where] = arena.view(where[0], where[1:4], where[4:7])
        arrays.append(a)
        p += 7
    ints = f[p + 1 : p + 1 + f[p]]
    if ctrl[KIND] == PROGRAM:
        try:
            block.run(1, inputs, arrays, ints, Channel(ctrl, ex, 1, seq, int(ctrl[TAG0]), 0.0))
        except Abandoned:
            pass
        return
    y = block.run_half(1, inputs, arrays, ints)
    ybuf[: y.size] = y.reshape(-1)
