"""Ctrl+C and SIGTERM for the command-line tools (``livecap-transcribe``, ``livecap``'s session commands).

After ``catch()``, both stop a run the same way: Ctrl+C raises KeyboardInterrupt and SIGTERM ``Terminated`` (a
KeyboardInterrupt) in the main thread, and each signal is remembered. Two things Python's own handler gets wrong
here, found by sending Ctrl+C at random moments of a run on a loaded machine:

- Raised while a native extension initialises (NumPy, soxr, ONNX Runtime, tokenizers: all imported while the
  model loads), the exception aborted the process (SIGABRT, a C++ ``terminate``) or became an ImportError inside
  the extension: ONNX Runtime was taken for missing and the whole file was transcribed (exit 0), or NumPy said its
  install was broken ("Unexpected error"). A signal that arrives inside an import is therefore noted and raised
  once the import is over (``setitimer`` asks again every 20 ms; where there is none, it is raised at once).
- A library can still swallow the exception; callers ask ``received()`` / ``check()`` at their own safe points.

Only the standard library is imported here: the handlers are in place before NumPy loads.
"""

from __future__ import annotations

import signal

RETRY_S = 0.02  # how soon a signal noted inside an import is raised once the import is over

_received: list[int] = []  # the stop signals that arrived since the last ``catch``


class Terminated(KeyboardInterrupt):
    """SIGTERM (``kill``, a service manager), raised where Ctrl+C would raise KeyboardInterrupt."""


def signal_of(stop: KeyboardInterrupt) -> int:
    """The signal behind ``stop``: SIGTERM for ``Terminated``, else SIGINT (Ctrl+C)."""
    return int(signal.SIGTERM if isinstance(stop, Terminated) else signal.SIGINT)


def catch() -> None:
    """From now on Ctrl+C and SIGTERM stop a run as the module docstring says, and are remembered for ``received``
    (what came before this call is forgotten). A signal handled otherwise already (an embedding program's handler)
    or missing on this platform is left alone. Call it from the main thread."""
    _received.clear()
    for name, default in (("SIGINT", signal.default_int_handler), ("SIGTERM", signal.SIG_DFL)):
        if hasattr(signal, name) and signal.getsignal(getattr(signal, name)) == default:
            signal.signal(getattr(signal, name), _on_stop)


def received() -> int:
    """The first stop signal since ``catch`` (SIGINT or SIGTERM), or 0. A caller told of one acts on it: no
    KeyboardInterrupt for it is raised later (one noted inside an import would be, once the import is over)."""
    if _received:
        _disarm()
    return _received[0] if _received else 0


def check() -> None:
    """Raise the KeyboardInterrupt (``Terminated``) of a stop signal that arrived since ``catch``, if one did: its
    own exception may have been swallowed by a library."""
    if received():
        raise Terminated if _received[0] == signal.SIGTERM else KeyboardInterrupt


def _on_stop(signum: int, frame) -> None:
    _received.append(signum)
    _raise_outside_imports(frame)


def _on_retry(signum: int, frame) -> None:
    _raise_outside_imports(frame)


def _raise_outside_imports(frame) -> None:
    if _importing(frame) and hasattr(signal, "setitimer"):
        if signal.getsignal(signal.SIGALRM) in (signal.SIG_DFL, _on_retry):  # no one else's alarm
            signal.signal(signal.SIGALRM, _on_retry)
            signal.setitimer(signal.ITIMER_REAL, RETRY_S)
            return
    check()


def _disarm() -> None:
    if hasattr(signal, "setitimer") and signal.getsignal(signal.SIGALRM) == _on_retry:
        signal.setitimer(signal.ITIMER_REAL, 0)  # an alarm left would end the process once Python's handler is gone


def _importing(frame) -> bool:
    """Whether ``frame`` runs inside an import (importlib's frames are on its stack) or a finalizer (``__del__``, a
    ``weakref.finalize``), where Python prints an exception as "ignored" and drops it."""
    while frame is not None:
        code = frame.f_code
        if code.co_filename.startswith("<frozen importlib") or code.co_name == "__del__":
            return True
        if code.co_name == "__call__" and code.co_filename.endswith("weakref.py"):
            return True
        frame = frame.f_back
    return False
