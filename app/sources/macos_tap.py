"""macOS 14.4+: what the computer plays, through a Core Audio process tap read like a microphone.

A global tap (every process but livecap itself) is wrapped in a private aggregate device, and PortAudio
(sounddevice) opens that device like any input; reading the tap through a PyObjC IOProc is reported never
to fire, so this is the path Apple's own sample takes. PortAudio lists devices when it starts, so it is
re-initialised after the aggregate exists. The tap and aggregate are rebuilt when the default output
changes (a tap can go silent after a Bluetooth device reconnects) and destroyed on close.

Permission: the bundle's Info.plist carries ``NSAudioCaptureUsageDescription``; without the grant the tap
delivers exact zeros and there is no public way to ask first. So when the tap has delivered exact zeros
for ``PERMISSION_AFTER_S`` while Core Audio says some process is playing, the source says so in one clear
sentence. Before 14.4 there is no tap: the message names a virtual device (BlackHole) as the way.

``CoreAudioTap`` holds every PyObjC call (the ``CoreAudio`` module is injected, so tests use a fake of it);
``MacTapSource`` holds the logic.
"""

from __future__ import annotations

import contextlib
import logging
import os
import platform
import struct
import time
import uuid
from collections.abc import Callable
from typing import Any

import numpy as np

from app.capture import Block, MicSource, refresh_devices, resolve_device
from app.sources.base import Endpoint, SystemCapture
from engine.errors import AudioError

log = logging.getLogger(__name__)

MIN_VERSION = (14, 4)
FOLLOW_EVERY_S = 1.0
PERMISSION_AFTER_S = 3.0
AGGREGATE_PREFIX = "livecap system audio"
TOO_OLD = (
    "System audio needs macOS 14.4 or later; on this Mac, route the sound through a virtual device such as "
    "BlackHole and choose it as the microphone."
)
PERMISSION = (
    "System audio is pure silence while something plays: allow livecap under System Settings \u25b8 Privacy & "
    "Security \u25b8 Screen & System Audio Recording (System Audio Recording Only), then start again."
)


def mac_version() -> tuple[int, int]:
    """(major, minor) of this macOS, (0, 0) elsewhere."""
    parts = (platform.mac_ver()[0] or "0.0").split(".")
    try:
        return int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
    except ValueError:
        return 0, 0


class CoreAudioTap:
    """The Core Audio calls, over PyObjC's ``CoreAudio`` module ``ca``. Each raises ``AudioError`` with
    one sentence on a failing status."""

    def __init__(self, ca: Any = None) -> None:
        if ca is None:
            try:
                import CoreAudio as ca
            except ImportError as exc:
                raise AudioError("System audio on macOS needs the pyobjc-framework-CoreAudio package.") from exc
        self.ca = ca

    def _address(self, selector: int) -> Any:
        ca = self.ca
        return ca.AudioObjectPropertyAddress(
            selector, ca.kAudioObjectPropertyScopeGlobal, ca.kAudioObjectPropertyElementMain
        )

    def _get(self, obj: int, selector: int, size: int, qualifier: bytes | None = None) -> bytes:
        status, _size, data = self.ca.AudioObjectGetPropertyData(
            obj, self._address(selector), len(qualifier or b""), qualifier, size, None
        )
        if status != 0:
            raise AudioError(f"Core Audio refused a query (status {status}).")
        return bytes(data or b"")

    def _u32(self, obj: int, selector: int, qualifier: bytes | None = None) -> int:
        data = self._get(obj, selector, 4, qualifier)
        return struct.unpack("<I", data[:4])[0] if len(data) >= 4 else 0

    def own_process_object(self) -> int:
        """livecap's audio process object, 0 while livecap has not touched audio yet."""
        try:
            return self._u32(
                self.ca.kAudioObjectSystemObject,
                self.ca.kAudioHardwarePropertyTranslatePIDToProcessObject,
                struct.pack("<i", os.getpid()),
            )
        except AudioError:
            return 0

    def default_output(self) -> int:
        """The default output device's object id."""
        return self._u32(self.ca.kAudioObjectSystemObject, self.ca.kAudioHardwarePropertyDefaultOutputDevice)

    def anything_playing(self) -> bool:
        """Whether some process (livecap aside) is sending audio to an output right now."""
        ca = self.ca
        try:
            raw = self._get(ca.kAudioObjectSystemObject, ca.kAudioHardwarePropertyProcessObjectList, 4 * 512)
            own = self.own_process_object()
            for (obj,) in struct.iter_unpack("<I", raw[: len(raw) // 4 * 4]):
                if obj != own and self._u32(obj, ca.kAudioProcessPropertyIsRunningOutput):
                    return True
        except AudioError:
            return False
        return False

    def create(self, exclude: list[int], output_uid: str = "") -> tuple[int, int, str]:
        """A private global tap (all processes but ``exclude``, or only ``output_uid``'s stream 0 when given)
        in a private aggregate device: ``(tap id, aggregate id, aggregate name)``."""
        ca = self.ca
        if output_uid:
            desc = ca.CATapDescription.alloc().initExcludingProcesses_andDeviceUID_withStream_(exclude, output_uid, 0)
        else:
            desc = ca.CATapDescription.alloc().initStereoGlobalTapButExcludeProcesses_(exclude)
        desc.setPrivate_(True)
        desc.setName_(AGGREGATE_PREFIX)
        status, tap_id = ca.AudioHardwareCreateProcessTap(desc, None)
        if status != 0 or not tap_id:
            raise AudioError(f"macOS did not create the system-audio tap (status {status}).")
        name = f"{AGGREGATE_PREFIX} {uuid.uuid4().hex[:8]}"
        spec = {
            ca.kAudioAggregateDeviceNameKey: name,
            ca.kAudioAggregateDeviceUIDKey: f"org.livecap.tap.{uuid.uuid4()}",
            ca.kAudioAggregateDeviceIsPrivateKey: True,
            ca.kAudioAggregateDeviceIsStackedKey: False,
            ca.kAudioAggregateDeviceTapAutoStartKey: True,
            ca.kAudioAggregateDeviceTapListKey: [
                {ca.kAudioSubTapUIDKey: str(desc.UUID().UUIDString()), ca.kAudioSubTapDriftCompensationKey: True}
            ],
        }
        status, agg_id = ca.AudioHardwareCreateAggregateDevice(spec, None)
        if status != 0 or not agg_id:
            ca.AudioHardwareDestroyProcessTap(tap_id)
            raise AudioError(f"macOS did not create the system-audio device (status {status}).")
        return int(tap_id), int(agg_id), name

    def destroy(self, tap_id: int, agg_id: int) -> None:
        with contextlib.suppress(Exception):
            self.ca.AudioHardwareDestroyAggregateDevice(agg_id)
        with contextlib.suppress(Exception):
            self.ca.AudioHardwareDestroyProcessTap(tap_id)


class MacTapSource(SystemCapture):
    """System audio on macOS 14.4+ (see the module docstring). ``output_uid`` "" follows the default output.
    Silence is normal (``silence_hint`` None); the permission check below knows better."""

    def __init__(
        self,
        sd: Any,
        hal: CoreAudioTap,
        output_uid: str = "",
        version: tuple[int, int] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self._sd = sd
        self._hal = hal
        self.output_uid = output_uid
        self.follow = not output_uid
        self._version = version if version is not None else mac_version()
        self._clock = clock
        self._ids: tuple[int, int] | None = None
        self._default = 0
        self._next_check = 0.0
        self._zero_s = 0.0
        self._permission_told = False
        self.rebuilds = 0
        self.rate = 48000
        self.description = ""

    def open(self) -> None:
        """Build the tap and its aggregate device, re-scan PortAudio and open the device."""
        if self._version < MIN_VERSION:
            raise AudioError(TOO_OLD)
        self._broken = False
        self._build()

    def _build(self) -> None:
        own = self._hal.own_process_object()
        self._default = self._hal.default_output()
        tap_id, agg_id, name = self._hal.create([own] if own else [], self.output_uid)
        self._ids = (tap_id, agg_id)
        try:
            refresh_devices(self._sd)  # PortAudio lists devices at start-up only
            index = resolve_device(self._sd, name)
            if index is None:
                raise AudioError("The system-audio device did not show up in PortAudio.")
            mic = MicSource(self._sd, index, channels=2)
            self._start(mic)
        except Exception:
            self._teardown()
            raise
        self.rate = mic.rate
        self._zero_s = 0.0
        self._next_check = self._clock() + FOLLOW_EVERY_S
        follows = " \u2014 follows the default output" if self.follow else ""
        self.description = f"System audio ({mic.rate / 1000:g} kHz){follows}"

    def _teardown(self) -> None:
        mic, self._capture = self._capture, None
        if mic is not None:
            mic.close()
        ids, self._ids = self._ids, None
        if ids is not None:
            self._hal.destroy(*ids)

    def close(self) -> None:
        self._teardown()

    def read(self, max_seconds: float | None = None) -> list[Block]:
        """Captured blocks; rebuilds the tap when the default output changed; watches for the permission."""
        if self._capture is not None and self._clock() >= self._next_check:
            self._next_check = self._clock() + FOLLOW_EVERY_S
            self._check_output()
        blocks = super().read(max_seconds)
        self._watch_permission(blocks)
        return blocks

    def _check_output(self) -> None:
        try:
            current = self._hal.default_output()
        except AudioError:
            return
        if current == self._default:
            return
        self._teardown()
        try:
            self._build()
        except AudioError:
            log.warning("rebuilding the tap failed", exc_info=True)
            self._broken = True
            return  # ``lost`` reports it
        self.rebuilds += 1
        self._notices.append("The output changed; livecap follows it.")

    def _watch_permission(self, blocks: list[Block]) -> None:
        if self._permission_told or not blocks:
            return
        for block in blocks:
            if np.any(block.samples):
                self._zero_s = 0.0
            else:
                self._zero_s += block.seconds
        if self._zero_s >= PERMISSION_AFTER_S and self._hal.anything_playing():
            self._permission_told = True
            self._notices.append(PERMISSION)


class MacBackend:
    """System audio on macOS; microphones stay with sounddevice."""

    name = "Core Audio tap"

    def __init__(self, sd: Any, coreaudio: Any = None, version: tuple[int, int] | None = None) -> None:
        self._sd = sd
        self._ca = coreaudio
        self._version = version if version is not None else mac_version()

    def unavailable_reason(self) -> str | None:
        if self._version < MIN_VERSION:
            return TOO_OLD
        try:
            CoreAudioTap(self._ca)
        except AudioError as exc:
            return str(exc)
        return None

    def outputs(self) -> list[Endpoint]:
        return []  # the tap follows the default output; per-device taps need the devices' UIDs

    def microphones(self) -> list[Endpoint]:
        return []

    def system_source(self, output: str = "") -> MacTapSource:
        return MacTapSource(self._sd, CoreAudioTap(self._ca), output, self._version)

    def mic_source(self, device: str) -> None:
        return None
