"""Shared helpers for the benchmarks: thread set-up, timing, machine description, markdown tables.

Import this module before NumPy / torch / MLX: ``set_threads`` must run before those libraries start
their thread pools (OpenBLAS and OpenMP read their environment variables once, at load time).
Nothing here imports NumPy at module level.
"""

from __future__ import annotations

import ctypes
import glob
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

THREAD_VARS = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)


def set_threads(n: int) -> None:
    """Ask every BLAS / OpenMP pool for ``n`` threads (call before importing numpy or torch)."""
    for var in THREAD_VARS:
        os.environ[var] = str(n)


@contextmanager
def timed_ops(B, names: tuple[str, ...], record: Callable[[str, tuple, float], None]) -> Iterator[None]:
    """Wrap the backend instance's methods ``names`` with timers while the block runs: ``record(name, args,
    seconds)`` gets every outermost call (an op called inside another, e.g. softmax inside attention, is
    charged to the outer one). Methods already patched on the instance are put back afterwards."""
    depth = [0]
    own = {n: B.__dict__[n] for n in names if n in B.__dict__}
    wrapped = [n for n in names if hasattr(B, n)]

    def wrap(name, fn):
        def timed(*args, **kwargs):
            if depth[0]:
                return fn(*args, **kwargs)
            depth[0] += 1
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                depth[0] -= 1
                record(name, args, time.perf_counter() - t0)

        return timed

    for n in wrapped:
        setattr(B, n, wrap(n, getattr(B, n)))
    try:
        yield
    finally:
        for n in wrapped:
            if n in own:
                setattr(B, n, own[n])
            else:
                delattr(B, n)


def median_time(fn: Callable[[], object], runs: int, warmup: int = 1) -> tuple[float, list[float]]:
    """Median wall-clock seconds of ``fn()`` over ``runs`` calls after ``warmup`` untimed calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), times


def median_of(fn: Callable[[], float], runs: int, warmup: int = 1) -> tuple[float, list[float]]:
    """Median of the values ``fn()`` returns (for functions that time themselves)."""
    for _ in range(warmup):
        fn()
    vals = [fn() for _ in range(runs)]
    return statistics.median(vals), vals


def load_average() -> str:
    """The 1/5/15-minute load average as ``"a, b, c"`` (empty where unavailable)."""
    try:
        return ", ".join(f"{v:.2f}" for v in os.getloadavg())
    except OSError:
        return ""


def _busy_seconds() -> float | None:
    """CPU seconds all processes have spent busy since boot (from /proc/stat), or None."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()[1:]
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


class OtherLoad:
    """Measures how busy *other* processes kept the CPUs over an interval (0 = idle, 1 = all cores).

    ``start()`` then ``stop()`` -> fraction of the machine's CPU time used by everything but this process.
    The load average cannot tell this, since it counts this benchmark's own threads.
    """

    def start(self) -> OtherLoad:
        t = os.times()
        self._busy, self._own, self._wall = _busy_seconds(), t.user + t.system, time.monotonic()
        return self

    def stop(self) -> float | None:
        busy = _busy_seconds()
        if busy is None or self._busy is None:
            return None
        t = os.times()
        own = t.user + t.system - self._own
        wall = time.monotonic() - self._wall
        other = busy - self._busy - own
        return max(0.0, other / (wall * (os.cpu_count() or 1)))


def wait_quiet(threshold: float = 0.08, window: float = 5.0, timeout: float = 600.0) -> float | None:
    """Wait until the machine is idle (busy share below ``threshold`` over ``window`` s) or ``timeout``.

    Returns the last measured busy share (None where /proc/stat is unavailable). Call it while this
    process is idle: it counts every process's CPU time.
    """
    end = time.monotonic() + timeout
    share = None
    while True:
        b0, t0 = _busy_seconds(), time.monotonic()
        if b0 is None:
            return None
        time.sleep(window)
        share = (_busy_seconds() - b0) / ((time.monotonic() - t0) * (os.cpu_count() or 1))
        if share < threshold or time.monotonic() > end:
            return share


def cpu_model() -> str:
    """CPU model name from /proc/cpuinfo (or platform's idea of it)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_flags() -> str:
    """The vector-extension flags of the CPU (avx2, fma, avx512f, ...), space separated."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = line.split(":", 1)[1].split()
                    keep = [
                        x
                        for x in flags
                        if x
                        in (
                            "avx",
                            "avx2",
                            "fma",
                            "avx512f",
                            "avx512_bf16",
                            "avx512_fp16",
                            "amx_tile",
                            "amx_bf16",
                            "amx_fp16",
                        )
                    ]
                    return " ".join(keep)
    except OSError:
        pass
    return ""


def numpy_blas() -> str:
    """NumPy's BLAS: name, version and (for OpenBLAS) the runtime core type and thread count."""
    import numpy as np

    desc = ""
    try:
        cfg = np.show_config(mode="dicts")
        blas = cfg["Build Dependencies"]["blas"]
        desc = f"{blas.get('name', '?')} {blas.get('version', '')}".strip()
    except Exception:  # noqa: BLE001 - show_config's layout varies between releases
        desc = "unknown BLAS"
    libdir = os.path.join(os.path.dirname(os.path.dirname(np.__file__)), "numpy.libs")
    for path in glob.glob(os.path.join(libdir, "libscipy_openblas*.so")):
        try:
            lib = ctypes.CDLL(path)
            for suffix in ("64_", ""):
                core = getattr(lib, f"scipy_openblas_get_corename{suffix}", None)
                nthr = getattr(lib, f"scipy_openblas_get_num_threads{suffix}", None)
                if core is not None and nthr is not None:
                    core.restype = ctypes.c_char_p
                    desc += f" (core {core().decode()}, {nthr()} threads)"
                    break
        except OSError:
            pass
        break
    return desc


def versions(mods: dict[str, str]) -> str:
    """``name version`` for each importable module in ``mods`` (name -> import path)."""
    import importlib

    out = [f"python {platform.python_version()}"]
    for name, mod in mods.items():
        try:
            m = importlib.import_module(mod)
            out.append(f"{name} {getattr(m, '__version__', '?')}")
        except Exception:  # noqa: BLE001 - a missing optional backend is not an error here
            out.append(f"{name} (not importable)")
    return ", ".join(out)


def machine_report(threads: int, mods: dict[str, str]) -> list[str]:
    """Markdown bullet lines describing this machine and run environment."""
    env = {v: os.environ.get(v, "(unset)") for v in ("OPENBLAS_CORETYPE", *THREAD_VARS[:3])}
    return [
        f"- CPU: {cpu_model()}, {os.cpu_count()} logical cores; flags: {cpu_flags()}",
        f"- OS: {platform.platform()}",
        f"- threads: {threads} (torch.set_num_threads and {', '.join(THREAD_VARS[:3])})",
        f"- NumPy BLAS: {numpy_blas()}",
        f"- versions: {versions(mods)}",
        "- env: " + ", ".join(f"{k}={v}" for k, v in env.items()),
        f"- command: `{' '.join([os.path.relpath(sys.executable)] + sys.argv)}`",
    ]


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    """A GitHub markdown table (first column left-aligned, the rest right-aligned)."""
    align = [":---"] + ["---:"] * (len(header) - 1)
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def fmt(x: float | None, digits: int = 1) -> str:
    """A number for a table cell ('-' for None)."""
    return "-" if x is None else f"{x:.{digits}f}"
