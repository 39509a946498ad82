"""A fake of PyObjC's ``CoreAudio`` module, at the calls livecap makes: property reads (returning
``(status, size, bytes)`` as PyObjC does for ``void *`` out-buffers), ``CATapDescription``, process taps and
aggregate devices. A created aggregate appears in the fake sounddevice after PortAudio re-scans."""

from __future__ import annotations

import itertools
import struct
import uuid

from tests.app.fake_sounddevice import FakeSoundDevice, make_device

kAudioObjectSystemObject = 1
kAudioObjectPropertyScopeGlobal = 0x676C6F62
kAudioObjectPropertyElementMain = 0
kAudioHardwarePropertyTranslatePIDToProcessObject = 0x69643270
kAudioHardwarePropertyDefaultOutputDevice = 0x644F7574
kAudioHardwarePropertyProcessObjectList = 0x70727323
kAudioProcessPropertyIsRunningOutput = 0x7069726F
for _name in (
    "NameKey",
    "UIDKey",
    "IsPrivateKey",
    "IsStackedKey",
    "TapAutoStartKey",
    "TapListKey",
    "MainSubDeviceKey",
    "SubDeviceListKey",
):
    globals()[f"kAudioAggregateDevice{_name}"] = _name
kAudioSubTapUIDKey = "TapUID"
kAudioSubTapDriftCompensationKey = "TapDrift"


class AudioObjectPropertyAddress:
    def __init__(self, selector: int, scope: int, element: int) -> None:
        self.mSelector, self.mScope, self.mElement = selector, scope, element


class _UUID:
    def __init__(self) -> None:
        self._s = str(uuid.uuid4()).upper()

    def UUIDString(self) -> str:  # noqa: N802
        return self._s


class CATapDescription:
    last: CATapDescription | None = None

    @classmethod
    def alloc(cls) -> CATapDescription:
        return cls()

    def initStereoGlobalTapButExcludeProcesses_(self, processes):  # noqa: N802
        self.exclude, self.device_uid, self.private, self.name = list(processes), None, False, ""
        self._uuid = _UUID()
        CATapDescription.last = self
        return self

    def initExcludingProcesses_andDeviceUID_withStream_(self, processes, uid, stream):  # noqa: N802
        self.initStereoGlobalTapButExcludeProcesses_(processes)
        self.device_uid, self.stream = uid, stream
        return self

    def setPrivate_(self, value: bool) -> None:  # noqa: N802
        self.private = value

    def setName_(self, value: str) -> None:  # noqa: N802
        self.name = value

    def UUID(self) -> _UUID:  # noqa: N802
        return self._uuid


class FakeCoreAudio:
    """Install with ``FakeCoreAudio(sd)``; the attributes mirror the module's names."""

    def __init__(self, sd: FakeSoundDevice, own_object: int = 77, playing: bool = False) -> None:
        self.sd = sd
        self.own_object = own_object
        self.playing = playing
        self.default_output = 40
        self.taps: dict[int, CATapDescription] = {}
        self.aggregates: dict[int, dict] = {}
        self.destroyed: list[tuple[str, int]] = []
        self._ids = itertools.count(100)
        for name, value in globals().items():
            if name.startswith("kAudio"):
                setattr(self, name, value)
        self.AudioObjectPropertyAddress = AudioObjectPropertyAddress
        self.CATapDescription = CATapDescription

    def AudioObjectGetPropertyData(self, obj, address, qsize, qualifier, size, out):  # noqa: N802
        sel = address.mSelector
        if obj == kAudioObjectSystemObject and sel == kAudioHardwarePropertyTranslatePIDToProcessObject:
            assert qsize == 4 and len(qualifier) == 4
            return 0, 4, struct.pack("<I", self.own_object)
        if obj == kAudioObjectSystemObject and sel == kAudioHardwarePropertyDefaultOutputDevice:
            return 0, 4, struct.pack("<I", self.default_output)
        if obj == kAudioObjectSystemObject and sel == kAudioHardwarePropertyProcessObjectList:
            return 0, 8, struct.pack("<II", self.own_object, 88)
        if sel == kAudioProcessPropertyIsRunningOutput:
            return 0, 4, struct.pack("<I", int(self.playing and obj == 88))
        return 0x77686F3F, 0, None  # 'who?'

    def AudioHardwareCreateProcessTap(self, desc, out):  # noqa: N802
        tap = next(self._ids)
        self.taps[tap] = desc
        return 0, tap

    def AudioHardwareCreateAggregateDevice(self, spec, out):  # noqa: N802
        agg = next(self._ids)
        self.aggregates[agg] = spec
        name = spec[kAudioAggregateDeviceNameKey]  # noqa: F821 - set in globals() above
        self.sd._pending = [d for d in self.sd.devices] + [make_device(name, 48000.0, inputs=2)]
        return 0, agg

    def AudioHardwareDestroyAggregateDevice(self, agg):  # noqa: N802
        spec = self.aggregates.pop(agg)
        self.destroyed.append(("aggregate", agg))
        name = spec[kAudioAggregateDeviceNameKey]  # noqa: F821
        self.sd._pending = [d for d in self.sd.devices if d["name"] != name]
        return 0

    def AudioHardwareDestroyProcessTap(self, tap):  # noqa: N802
        self.taps.pop(tap)
        self.destroyed.append(("tap", tap))
        return 0
