"""Run a product's independent row chunks on the calling thread plus helper threads, unless the CPU is busy.

Why not the kernel library's own thread pool: on a machine another process keeps busy (a captioning app
beside a video call), a pool that splits a product statically waits for its slowest thread, and a
descheduled worker makes a 2 ms product take a scheduler slice; spinning workers also take CPU from the
other process. Measured on the 2-core development machine with other processes at ~70 % (benchmarks/
RESULTS.md): the Moonshine tiny decoder step took 12 ms with ONNX Runtime's 2-thread pool, 16 ms with
OpenBLAS's, and 6.8 ms on one thread. So each large matrix is cut into row chunks, each with its own
single-threaded kernel; ``run`` gives all chunks but the first to helper threads (``concurrent.futures``),
runs the first itself, then takes back every chunk no helper has started (``Future.cancel``), so a late
helper costs nothing. While other processes keep more than ``BUSY_SHARE`` of the machine busy (the system's and
this process's CPU times from psutil, on Linux, Windows and macOS alike, sampled at most every ``SAMPLE_S``),
everything runs on the calling thread.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import psutil


def usable_cpus() -> int:
    """How many CPUs this process may run on: its affinity mask where the system keeps one (``taskset``, a
    container's cpuset; Linux and Windows), else every CPU. At least 1."""
    try:
        return max(1, len(psutil.Process().cpu_affinity()))
    except (AttributeError, OSError, psutil.Error):  # macOS has no affinity masks
        return os.cpu_count() or 1


CPUS = usable_cpus()  # how wide products are cut, and whether a CPU twin helps
SYSTEM_CPUS = os.cpu_count() or 1  # what the system's CPU times are shared by (``Contention``)
BUSY_SHARE = 0.25  # other processes' share of all CPUs above which products stay on the calling thread
SAMPLE_S = 0.5


class Contention:
    """Whether other processes keep the CPUs busy: the machine's busy CPU time less this process's (and its
    twins'), over the last sample (the load average cannot tell, since it counts this process's own threads).
    Where the system's times cannot be read: never busy."""

    def __init__(self, busy_share: float = BUSY_SHARE, sample_s: float = SAMPLE_S):
        self.busy_share, self.sample_s = busy_share, sample_s
        self._ours: dict[int, psutil.Process] = {}
        self._last = self._sample()
        self._busy = False
        self.other_share = 0.0

    def _sample(self) -> tuple[float, float, float] | None:
        try:
            t = psutil.cpu_times()
        except (OSError, psutil.Error):
            return None
        # psutil's own definition (its cpu_percent): guest time is inside user/nice; iowait is idle (Linux only)
        busy = sum(t) - t.idle - sum(getattr(t, f, 0.0) for f in ("iowait", "guest", "guest_nice"))
        own = os.times()
        ours = own.user + own.system + own.children_user + own.children_system  # children: once waited for
        for proc in list(self._ours.values()):
            try:
                child = proc.cpu_times()
                ours += child.user + child.system
            except (OSError, psutil.Error):
                pass
        return time.monotonic(), busy, ours

    def also_ours(self, pid: int, ours: bool = True) -> None:
        """Count the CPU time of the live child ``pid`` (a ``cpu_twin``) as this process's, or stop to."""
        if not ours:
            self._ours.pop(pid, None)
            return
        try:
            self._ours[pid] = psutil.Process(pid)
        except (OSError, psutil.Error):
            pass

    def busy(self) -> bool:
        """True while other processes used more than ``busy_share`` of the machine over the last sample."""
        if self._last is None:
            return False
        now = time.monotonic()
        if now - self._last[0] >= self.sample_s:
            cur = self._sample()
            if cur is not None:
                wall = cur[0] - self._last[0]
                other = (cur[1] - self._last[1]) - (cur[2] - self._last[2])
                self.other_share = max(0.0, other / (wall * SYSTEM_CPUS))
                self._busy = self.other_share > self.busy_share
                self._last = cur
        return self._busy


_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()
contention = Contention()


def helpers() -> ThreadPoolExecutor | None:
    """The shared helper threads (one fewer than the CPUs; None on a single CPU)."""
    global _pool
    if CPUS < 2:
        return None
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(CPUS - 1, thread_name_prefix="livecap-cpu")
    return _pool


def run(jobs: Sequence[Callable[[], None]], width: int | None = None) -> None:
    """Run every job (independent; each releases the GIL while it computes), in parallel when that pays, on at
    most ``width`` threads at once (the calling thread included; None: every CPU)."""
    if width is not None and 0 < width < len(jobs):  # consecutive jobs in turn on one thread each
        groups = [jobs[len(jobs) * i // width : len(jobs) * (i + 1) // width] for i in range(width)]
        jobs = [lambda group=group: [job() for job in group] for group in groups]
    pool = helpers() if len(jobs) > 1 else None
    if pool is None or contention.busy():
        for job in jobs:
            job()
        return
    futures = [pool.submit(job) for job in jobs[1:]]
    jobs[0]()
    for job, fut in zip(reversed(jobs[1:]), reversed(futures)):
        if fut.cancel():  # not started yet: do it here
            job()
    for fut in futures:
        if not fut.cancelled():
            fut.result()
