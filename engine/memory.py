"""How much memory this machine has: in total (the model recommendation) and available now (whether a
backend can hold a checkpoint). The standard library offers no portable probe, so it is done here once:
Linux ``/proc/meminfo``, POSIX ``sysconf``, macOS ``sysctl``, Windows ``GlobalMemoryStatusEx``."""

from __future__ import annotations

import os
import subprocess
import sys


def total_memory() -> int | None:
    """Bytes of physical memory, or None when it cannot be told."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        pass
    if sys.platform == "darwin":
        try:
            return int(
                subprocess.run(["sysctl", "-n", "hw.memsize"], capture_output=True, text=True, timeout=2).stdout.strip()
            )
        except (OSError, ValueError, subprocess.SubprocessError):
            pass
    if sys.platform == "win32":  # pragma: no cover - Windows only
        import ctypes

        class _Status(ctypes.Structure):
            _fields_ = [
                ("dwLength", ctypes.c_ulong),
                ("dwMemoryLoad", ctypes.c_ulong),
                ("ullTotalPhys", ctypes.c_ulonglong),
                ("ullAvailPhys", ctypes.c_ulonglong),
                ("ullTotalPageFile", ctypes.c_ulonglong),
                ("ullAvailPageFile", ctypes.c_ulonglong),
                ("ullTotalVirtual", ctypes.c_ulonglong),
                ("ullAvailVirtual", ctypes.c_ulonglong),
                ("ullAvailExtendedVirtual", ctypes.c_ulonglong),
            ]

        s = _Status()
        s.dwLength = ctypes.sizeof(_Status)
        if ctypes.windll.kernel32.GlobalMemoryStatusEx(ctypes.byref(s)):
            return int(s.ullTotalPhys)
    return None


def available_memory() -> int | None:
    """Bytes of memory available to this process now (Linux ``MemAvailable``; elsewhere the physical
    total), or None when it cannot be told."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return total_memory()
