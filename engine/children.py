"""How livecap starts a helper process of its own (the download worker, a started CPU twin).

A plain subprocess, not ``multiprocessing``: spawn would import the caller's main module again in the child,
which breaks any script that calls the engine without a ``__main__`` guard. In a checkout the child is this
Python with ``-m module``; a frozen app has no separate Python, so it is the app's own executable with a flag
that ``packaging/livecap_main.py`` routes to the module's ``main``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def command(module: str, flag: str) -> list[str]:
    """The command line that runs ``module``'s ``main``: ``python -m module``, or the frozen app with ``flag``."""
    if getattr(sys, "frozen", False):
        return [sys.executable, flag]
    return [sys.executable, "-m", module]


def environment() -> dict[str, str]:
    """This process's environment, with the ``engine`` package of this process first on the child's path and
    its output unbuffered."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONUNBUFFERED"] = "1"
    return env
