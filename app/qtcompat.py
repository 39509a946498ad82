"""Work-arounds for defects of the Qt binding that would otherwise crash the app.

PySide6 6.12.0 (abi3 wheels) on CPython 3.11: methods that return ``None``, ``True`` or ``False``
(every void call such as ``QWidget.update()``, ``processEvents()``, ``Signal.emit()``) hand them back
without a new reference, so each call lowers the reference count of that singleton by one. After some
thousands of calls (seconds to minutes of a running GUI) CPython aborts with "Fatal Python error:
none_dealloc: deallocating None" (or ``bool_dealloc``). CPython 3.12+ makes these singletons immortal,
which hides the defect; PySide6 6.11 does not have it. On an affected build (detected by a probe, not by
version numbers) ``pin_singletons`` gives ``None``, ``True`` and ``False`` a reference count so large
that no session can exhaust it, which is what CPython 3.12 does.
"""

from __future__ import annotations

import ctypes
import sys

PIN = 1 << 60
PROBE_CALLS = 16


def binding_steals_singletons() -> bool:
    """Whether this PySide6 build returns ``None``/``True`` without a reference (a probe of void calls
    and ``Signal.emit``)."""
    from PySide6.QtCore import QObject, Signal

    class _Probe(QObject):
        ping = Signal()

    probe = _Probe()
    none_before, true_before = sys.getrefcount(None), sys.getrefcount(True)
    for _ in range(PROBE_CALLS):
        probe.setObjectName("probe")
        probe.ping.emit()
    lost_none = none_before - sys.getrefcount(None)
    lost_true = true_before - sys.getrefcount(True)
    return lost_none >= PROBE_CALLS // 2 or lost_true >= PROBE_CALLS // 2


def pin_singletons() -> bool:
    """On an affected build, pin the reference counts of ``None``, ``True`` and ``False``; returns whether
    it did."""
    if sys.version_info >= (3, 12) or sys.implementation.name != "cpython":
        return False
    if not binding_steals_singletons():
        return False
    for obj in (None, True, False):
        ctypes.c_ssize_t.from_address(id(obj)).value += PIN
    return True
