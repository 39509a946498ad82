"""Plain sentences for what a model download can meet, for people rather than programmers.

``download_problem(exc, name)`` turns what a ``DownloadJob`` reports (``failed(message, exc)``) into one or
two sentences: what happened, what to check, and, where the hub is out of reach, that a model folder on this
computer works offline. It never shows an errno, an exception's type or its raw text: those go to the log.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from engine import hub
from engine.errors import LivecapError

OFFLINE_HINT = "A model folder on this computer works without a connection: use \u201cAdd a model folder\u2026\u201d."
_TECHNICAL = re.compile(r"errno|\[Err|Error:|Exception|Traceback|0x[0-9a-f]{4}", re.IGNORECASE)


def hub_host() -> str:
    """The host name downloads come from (``huggingface.co``, or the mirror ``HF_ENDPOINT`` names)."""
    return urlsplit(hub.endpoint()).netloc or hub.endpoint()


def unreachable_text() -> str:
    """The sentence for a hub that cannot be reached: what to check, and the offline way."""
    host = hub_host()
    return (
        f"The download site {host} cannot be reached, so the model cannot be downloaded right now. Check "
        f"that this computer is online and that no firewall or proxy blocks {host}, then try again. "
        f"{OFFLINE_HINT}"
    )


def offline_text() -> str:
    return (
        "Offline mode is on: HF_HUB_OFFLINE is set, so nothing can be downloaded. Start livecap without it "
        f"to download a model. {OFFLINE_HINT}"
    )


def download_problem(exc: object, name: str) -> str:
    """One plain message for a failed download of the model called ``name`` (``exc`` as the job reported it)."""
    if isinstance(exc, hub.DownloadCancelled):
        return "The download was stopped; what was downloaded is kept and the next download continues from there."
    if isinstance(exc, hub.OfflineError):
        return offline_text()
    if isinstance(exc, hub.HubUnreachableError):
        return unreachable_text()
    if isinstance(exc, (ConnectionError, TimeoutError)) or (
        isinstance(exc, OSError) and not isinstance(exc, LivecapError)
    ):
        return unreachable_text()
    specific = (hub.DiskSpaceError, hub.GatedModelError, hub.ModelNotFoundError, hub.CacheFolderError)
    if isinstance(exc, specific) or (isinstance(exc, LivecapError) and not isinstance(exc, hub.HubError)):
        text = str(exc).strip()
        if text and not _TECHNICAL.search(text):
            return text  # already one sentence written for the user (sizes, token, name, loader's check)
    from app.excepthook import log_file

    log = log_file()
    where = f"livecap's log, {log}" if log is not None else "livecap's log"
    return f"The download of {name} did not finish. Try again; if it keeps failing, the details are in {where}."
