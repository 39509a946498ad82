"""What a session listens to: System audio (what the computer plays), Microphone, or Both mixed.

``AudioSystem`` is the one entry point for the windows and the engine worker: it lists microphones and
outputs by their human names and makes an unopened source for a (kind, microphone, output) choice. System
audio comes from a per-OS backend, chosen by platform and imported lazily: ``pulse`` (Linux, PulseAudio or
pipewire-pulse, through pulsectl), ``macos_tap`` (Core Audio process tap, PyObjC), ``wasapi`` (WASAPI
loopback, PyAudioWPatch). Microphones open through sounddevice (``app.capture.MicSource``), or through
PulseAudio on Linux (by name, or the server's default microphone, followed when it changes). ``mix`` mixes the two
for Both.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import Any

from app.audio_source import AudioSource
from app.capture import MicSource, list_input_devices, resolve_device
from app.sources.base import (
    BOTH,
    DEFAULT_OUTPUT_LABEL,
    KIND_LABELS,
    KINDS,
    MIC,
    SERVER_SILENT,
    START_WHEN_SERVER_ANSWERS,
    SYSTEM,
    Endpoint,
    ServerSilent,
)
from engine.errors import AudioError

__all__ = [
    "BOTH",
    "DEFAULT_OUTPUT_LABEL",
    "KINDS",
    "KIND_LABELS",
    "MIC",
    "SYSTEM",
    "AudioSource",
    "AudioSystem",
    "Endpoint",
    "ServerSilent",
    "load_sounddevice",
    "make_backend",
]

log = logging.getLogger(__name__)

Notify = Callable[[str], None]
SERVER_ALIASES = frozenset({"default", "sysdefault", "pulse", "pipewire"})  # ALSA's names for the sound server


def load_sounddevice() -> Any:
    """The ``sounddevice`` module, imported on the first call (any thread). Its import starts PortAudio, which asks
    the sound server (PulseAudio, PipeWire) about its devices and waits for as long as the server does not answer
    (a stopped one: forever), so it is not imported while the server runs but does not answer (asked for a second
    at most, at once within a few seconds of a call it did not answer): ``ServerSilent`` then, until it does.
    ``AudioError`` with one sentence when PortAudio is not installed."""
    if "sounddevice" not in sys.modules and AudioSystem(None).server_silent():  # this platform's backend asked
        raise ServerSilent(f"{SERVER_SILENT}.")
    try:
        import sounddevice
    except OSError as exc:  # the PortAudio library itself is missing
        raise AudioError("Audio capture is unavailable because PortAudio is not installed.") from exc
    return sounddevice


def make_backend(sd: Any, platform: str | None = None) -> Any:
    """The system-audio backend for ``platform`` (default: this one); None where there is none."""
    platform = platform or sys.platform
    if platform.startswith("linux"):
        from app.sources.pulse import PulseBackend

        return PulseBackend(sd)
    if platform == "darwin":
        from app.sources.macos_tap import MacBackend

        return MacBackend(sd)
    if platform == "win32":
        from app.sources.wasapi import WasapiBackend

        return WasapiBackend()
    return None


class AudioSystem:
    """Microphones, outputs and sources on this machine. ``sd`` is the sounddevice module (None when
    PortAudio is missing); ``backend`` the system-audio backend (default: ``make_backend``)."""

    def __init__(self, sd: Any, backend: Any = "auto") -> None:
        self.sd = sd
        self.backend = make_backend(sd) if backend == "auto" else backend

    # -- listing (any thread; each call asks the sound system afresh) ------------------------------
    def system_unavailable(self) -> str | None:
        """None when System audio can be captured here, else one sentence why not."""
        if self.backend is None:
            return "System audio capture is not supported on this system."
        try:
            return self.backend.unavailable_reason()
        except Exception as exc:  # a broken sound system must not break the pickers
            log.warning("system audio check failed", exc_info=True)
            return f"System audio is unavailable ({type(exc).__name__})."

    def server_silent(self, fresh: bool = False) -> bool:
        """Whether the sound server runs but does not answer (stopped or hung): inputs through it wait for it, and
        nothing can be opened through it. False where there is no such server or it cannot tell. Asks it (a second
        at most), or, unless ``fresh``, takes a recent call it did not answer for the answer."""
        try:
            return bool(getattr(self.backend, "silent", lambda fresh=False: False)(fresh=fresh))
        except Exception:  # a broken sound system: judged by the streams
            log.warning("sound server check failed", exc_info=True)
            return False

    def default_kind(self) -> str:
        """What a first run starts with: System audio where it is available, else the microphone."""
        return SYSTEM if self.system_unavailable() is None else MIC

    def outputs(self) -> list[Endpoint]:
        """The outputs System audio can follow, by human name ([] when none or unavailable)."""
        if self.backend is None:
            return []
        try:
            return list(self.backend.outputs())
        except Exception:
            log.debug("listing outputs failed", exc_info=True)
            return []

    def microphones(self) -> list[Endpoint]:
        """Microphones by human name: the sound server's (PulseAudio descriptions) first, then PortAudio's; where
        the server lists its own, not ALSA's names for the server itself ("default", "pulse": "System default"
        is that already)."""
        mics: list[Endpoint] = self._server_microphones()
        server = bool(mics)
        if self.sd is not None:
            for dev in list_input_devices(self.sd):
                if server and dev.hostapi == "ALSA" and dev.name in SERVER_ALIASES:
                    continue
                label = dev.name + (f" ({dev.hostapi})" if dev.hostapi else "")
                mics.append(Endpoint(dev.name, label, dev.is_default and not mics))
        return mics

    def listed(self, kind: str, device: str | None, output: str | None) -> bool:
        """Whether the sound server lists the chosen microphone and output of a ``kind`` session now (False when
        neither is chosen, or for a microphone only PortAudio knows: telling needs a re-scan, which stops every
        stream)."""
        wants_mic, wants_output = kind in (MIC, BOTH) and bool(device), kind in (SYSTEM, BOTH) and bool(output)
        if not (wants_mic or wants_output):
            return False
        if wants_mic and device not in {m.id for m in self._server_microphones()}:
            return False
        return not wants_output or output in {o.id for o in self.outputs()}

    def _server_microphones(self) -> list[Endpoint]:
        if self.backend is None:
            return []
        try:
            return list(self.backend.microphones())
        except Exception:  # a backend without microphones of its own, or a broken sound system
            return []

    # -- sources (engine worker thread) ------------------------------------------------------------
    def make_source(
        self,
        kind: str,
        device: str | None = None,
        output: str | None = None,
        notify: Notify | None = None,
        names: dict[str, str] | None = None,
    ) -> Any:
        """An unopened source for ``kind`` ("mic" | "system" | "both"), microphone ``device`` and output
        ``output`` (None or "": the defaults). A chosen device that is gone falls back to the default and
        ``notify`` says so, naming it as ``names`` (id: what it was called) does, else by its id. ``AudioError``
        with one sentence when the kind cannot work here."""
        notify = notify or (lambda text: None)
        names = names or {}
        if self.server_silent(fresh=True):  # opening a stream through it would wait for it
            raise AudioError(START_WHEN_SERVER_ANSWERS)
        if kind == MIC:
            return self._mic(device, notify, names)
        if kind == SYSTEM:
            return self._system(output, notify, names)
        if kind == BOTH:
            from app.sources.mix import MixSource

            return MixSource(self._mic(device, notify, names), self._system(output, notify, names))
        raise AudioError(f"Unknown audio source \u201c{kind}\u201d; choose mic, system or both.")

    def _mic(self, device: str | None, notify: Notify, names: dict[str, str]) -> Any:
        if self.sd is None:
            raise AudioError("Audio capture is unavailable because PortAudio is not installed.")
        if device and self.backend is not None:
            known = {m.id for m in self.backend.microphones()} if device.startswith("pulse:") else set()
            if device in known:
                source = self.backend.mic_source(device)
                if source is not None:
                    return source
        index = resolve_device(self.sd, device) if device else None
        if device and index is None:
            name = names.get(device) or self._mic_name(device)
            notify(f"The microphone \u201c{name}\u201d is not connected; using the default one.")
        if index is not None:
            return MicSource(self.sd, index)
        mics = self._server_microphones()
        if getattr(self.backend, "default_mic_is_a_monitor", lambda: False)():
            # no microphone is the default: "the default microphone" would be the speakers (the server falls back
            # to an output's monitor when the last microphone goes): the first microphone it lists, else none
            source = self.backend.mic_source(mics[0].id) if mics else None
            if source is None:
                raise AudioError("No microphone was found; connect one and press Refresh.")
            return source
        # the default device is named as the sound server calls its default microphone (PortAudio says "default")
        label = next((m.name for m in mics if m.is_default), None)
        follow = getattr(self.backend, "default_mic_source", None)
        if mics and follow is not None:  # the server's default microphone, followed when it changes (PulseAudio)
            return follow(label or "System default")
        return MicSource(self.sd, None, label=label)

    @staticmethod
    def _mic_name(device: str) -> str:
        return device.split(":", 1)[1] if device.startswith("pulse:") else device

    def _system(self, output: str | None, notify: Notify, names: dict[str, str]) -> Any:
        reason = self.system_unavailable()
        if reason is not None:
            raise AudioError(reason)
        if output and output not in {o.id for o in self.outputs()}:
            name = names.get(output) or output
            notify(f"The output \u201c{name}\u201d is not available; following the default output.")
            output = ""
        return self.backend.system_source(output or "")

    def find(self, kind: str, name: str) -> str | None:
        """The id of the microphone (``kind`` "mic") or output ("system") called ``name``: its id or human
        name, exactly or, failing that, as a case-insensitive part; None when nothing matches."""
        endpoints = self.outputs() if kind == SYSTEM else self.microphones()
        for match in (lambda e: name in (e.id, e.name), lambda e: name.lower() in e.name.lower()):
            for endpoint in endpoints:
                if match(endpoint):
                    return endpoint.id
        return None
