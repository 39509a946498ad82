"""A system-audio backend (``app.sources`` backend contract) that 'works' without a sound server: outputs and one
microphone by human name, and System audio captured from the fake sounddevice's microphone."""

from __future__ import annotations

from app.sources import Endpoint


class FakeBackend:
    """System audio that 'works': outputs by name, one named microphone, and a fake-mic-backed source.
    ``reason``: the sentence ``unavailable_reason`` gives (None: available)."""

    def __init__(self, sd, reason: str | None = None) -> None:
        self.sd, self.reason = sd, reason
        self.made: list[str] = []

    def unavailable_reason(self):
        return self.reason

    def outputs(self):
        return [
            Endpoint("alsa_output.pci.analog-stereo", "Built-in Audio Analog Stereo", True),
            Endpoint("bluez_sink.AA", "WH-1000XM4", False),
        ]

    def microphones(self):
        return [Endpoint("pulse:alsa_input.usb", "Blue Yeti", True)]

    def system_source(self, output=""):
        from app.capture import MicSource

        self.made.append(output)
        source = MicSource(self.sd, None)
        source.kind = "system"
        return source

    def mic_source(self, device):
        return None
