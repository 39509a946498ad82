"""Linux: capture through PulseAudio (or PipeWire's pipewire-pulse), by human names, including what plays.

PortAudio's ALSA host API (the one sounddevice ships on Linux) never lists PulseAudio's monitor sources, and
it names microphones by ALSA plug-in names. So the server is asked directly, through ``pulsectl`` (a
well-kept libpulse binding), for its outputs (sinks) and microphones (sources) with their descriptions, and a
chosen one is captured by opening sounddevice's ``pulse`` device with ``PULSE_SOURCE`` set to that source for
the moment the stream opens (libpulse reads it when the ALSA plug-in connects; each stream keeps its own).

``PulseSystemSource`` captures an output's monitor. Every ``CHECK_EVERY_S`` it asks the server whether that
output still exists, and it asks again before handing out any block that arrived after the last answer: when an
output goes (a USB headset unplugged, a call app's sink unloaded), PulseAudio does not end the recording but moves
it to the default *microphone*, so "System audio" went on captioning the room without a word. A block is handed
out only once a check that began after it arrived saw the output (the server answers in ~0.3 ms; blocks come
every ~64 ms), so none of the microphone's audio comes out: the blocks since the last check are dropped and the
capture is lost for a chosen output (the worker falls back to the default output, and says so). Following the default
output, each check also asks which sink is the default and, when that changed (headphones plugged in), moves
the capture to the new sink's monitor without ending the session: the blocks keep flowing into the same queue.
``PulseMicSource`` does the same for a microphone chosen by name (PulseAudio moves its recording to the default
source when it is unplugged); when the server moves it only because another source became the default, it records
the chosen one again. ``PulseDefaultMicSource`` ("System default") lets the server move it to each new default
microphone and names the one it records, as a followed output is named. The ``pulsectl`` and ``sounddevice``
modules are injected, so tests can use fakes or a private server.

A server that stops answering (SIGSTOP, a hung PipeWire) keeps its socket open and never replies, and pulsectl
waits for a reply without a time-out: the worker hung in the output check, and Stop and Quit with it. So every
server call has a deadline (``CALL_TIMEOUT_S``), kept by a poll function of our own on the same thread (pulsectl's
``set_poll_func``, which libpulse's main loop calls for each wait); a call not answered by then raises
``ServerSilent``, and for ``SILENT_BACKOFF_S`` after it every call fails at once, so a worker checking every
``CHECK_EVERY_S`` is not held a second per check while the server stays stopped.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from app import capture
from app.capture import Block, MicSource, resolve_device
from app.sources.base import SERVER_SILENT, Endpoint, ServerSilent, SystemCapture
from engine.audio import SAMPLE_RATE
from engine.errors import AudioError

log = logging.getLogger(__name__)

PULSE_DEVICE = "pulse"  # sounddevice's name for the ALSA plug-in that talks to PulseAudio
MIC_PREFIX = "pulse:"  # microphone ids from PulseAudio, as stored in the settings
CHECK_EVERY_S = 0.2
CALL_TIMEOUT_S = 1.0  # a server call not answered by then: the server is stopped or hung (it answers in ~0.3 ms)
SILENT_BACKOFF_S = 2.0  # after one, calls fail at once for this long before the server is asked again
SILENT = f"{SERVER_SILENT}."
NOT_A_MONITOR = 0xFFFFFFFF  # PA_INVALID_INDEX in a source's monitor_of_sink

_env_lock = threading.Lock()


@contextlib.contextmanager
def pulse_source_env(source: str | None) -> Iterator[None]:
    """Set ``PULSE_SOURCE`` to ``source`` while the body runs (None: leave it as it is); one stream opens at a time."""
    with _env_lock:
        if source is None:
            yield
            return
        old = os.environ.get("PULSE_SOURCE")
        os.environ["PULSE_SOURCE"] = source
        try:
            yield
        finally:
            if old is None:
                os.environ.pop("PULSE_SOURCE", None)
            else:
                os.environ["PULSE_SOURCE"] = old


_silent = False  # the last call to the sound server was not answered in time
_ask_again_at = 0.0  # until then, while silent, every call fails at once


def server_silent() -> bool:
    """Whether the last call to the sound server was not answered in time (and none has been answered since)."""
    return _silent


def _note_silent(silent: bool) -> None:
    global _silent, _ask_again_at
    _silent = silent
    _ask_again_at = time.monotonic() + SILENT_BACKOFF_S if silent else 0.0


def _would_wait() -> bool:
    """For ``capture.server_would_wait``: whether the server is known not to answer, or does not answer now (asked,
    for ``CALL_TIMEOUT_S`` at most; at once when there is no server)."""
    return _silent or PulseBackend(None).silent()


capture.server_would_wait(_would_wait)  # closing a stream through it, and PortAudio's re-scan, would wait


@dataclass(frozen=True)
class CaptureSource:
    """A PulseAudio capture source: its ``index`` (what a recording names it by), ``name``, ``description`` (as the
    user knows it), and whether it is an output's ``monitor`` rather than a microphone."""

    index: int
    name: str
    description: str
    monitor: bool


def _is_monitor(source: Any) -> bool:
    monitor_of = getattr(source, "monitor_of_sink", NOT_A_MONITOR)
    return monitor_of is not None and int(monitor_of) != NOT_A_MONITOR


class PulseServer:
    """A short-lived connection to the PulseAudio server for listing and default look-ups.

    Every method raises ``AudioError`` with one sentence when the server cannot be reached, and ``ServerSilent``
    when it does not answer within ``CALL_TIMEOUT_S`` (or one did not within the last ``SILENT_BACKOFF_S``)."""

    def __init__(self, pulsectl: Any = None, client_name: str = "livecap") -> None:
        self._mod = pulsectl
        self._name = client_name
        self._pulse: Any = None
        self._deadline = 0.0
        self._timed_out = False

    def _conn(self) -> Any:
        if self._pulse is None:
            mod = self._mod
            if mod is None:
                try:
                    import pulsectl as mod
                except (ImportError, OSError) as exc:  # not installed, or libpulse missing
                    raise AudioError("System audio needs the pulsectl package and libpulse.") from exc
                self._mod = mod
            try:
                pulse = mod.Pulse(self._name, connect=False)
                pulse.set_poll_func(self._poll_func(pulse), lambda *exc: log.debug("poll failed", exc_info=exc))
                self._pulse = pulse
                pulse.connect()  # the poll function keeps the call's deadline
            except Exception as exc:  # PulseError: no server, or one that does not answer
                self.close()
                if self._timed_out:
                    raise ServerSilent(SILENT) from exc
                raise AudioError("No PulseAudio or PipeWire sound server is running.") from exc
        return self._pulse

    def _poll_func(self, pulse: Any) -> Any:
        """libpulse's poll for ``pulse``'s main loop, waiting no later than the current call's deadline; past it,
        the connection is marked lost, so pulsectl's wait for the reply ends (``PulseOperationFailed``)."""

        def poll(fds: list[Any], timeout: float) -> int:
            left = self._deadline - time.monotonic()
            if left <= 0:
                self._timed_out, pulse.connected = True, False
                return 0
            wait = left if timeout < 0 else min(timeout, left)
            poller = select.poll()
            wanted: dict[int, int] = {}
            for fd in fds:
                wanted[fd.fd] = wanted.get(fd.fd, 0) | fd.events
            for fd, events in wanted.items():
                poller.register(fd, events)
            ready = dict(poller.poll(max(0, int(wait * 1000 + 0.999))))
            for fd in fds:
                fd.revents = ready.get(fd.fd, 0) & (fd.events | select.POLLERR | select.POLLHUP | select.POLLNVAL)
            return sum(1 for fd in fds if fd.revents)

        return poll

    def _call(self, fn: str, *args: Any) -> Any:
        if _silent and time.monotonic() < _ask_again_at:
            raise ServerSilent(SILENT)
        self._deadline, self._timed_out = time.monotonic() + CALL_TIMEOUT_S, False
        try:
            value = getattr(self._conn(), fn)(*args)
        except Exception as exc:  # the server went away or did not answer: reconnect next time
            self.close()
            _note_silent(self._timed_out)  # else it answered, if only by closing the connection
            if self._timed_out:
                log.warning("the sound server did not answer %s within %.1f s", fn, CALL_TIMEOUT_S)
                raise ServerSilent(SILENT) from exc
            if isinstance(exc, AudioError):
                raise
            raise AudioError("The sound server stopped answering.") from exc
        _note_silent(False)
        return value

    def close(self) -> None:
        pulse, self._pulse = self._pulse, None
        if pulse is not None:
            with contextlib.suppress(Exception):
                pulse.close()

    def default_sink(self) -> str:
        """The name of the default output."""
        return str(self._call("server_info").default_sink_name or "")

    def outputs(self) -> list[Endpoint]:
        """The outputs (sinks), default first flagged, by description."""
        default = self.default_sink()
        return [
            Endpoint(str(s.name), str(s.description or s.name), str(s.name) == default) for s in self._call("sink_list")
        ]

    def sinks(self) -> tuple[set[str], str]:
        """``(the names of the outputs, the default output's name)``."""
        default = self.default_sink()
        return {str(s.name) for s in self._call("sink_list")}, default

    def default_source_is_a_monitor(self) -> bool:
        """Whether the default source is an output's monitor (what the server falls back to when no microphone is
        left, or a setting): "the default microphone" would then be the speakers."""
        default = str(self._call("server_info").default_source_name or "")
        for s in self._call("source_list"):
            if str(s.name) == default:
                return _is_monitor(s)
        return default.endswith(".monitor")

    def recordings(self) -> dict[int, int]:
        """This process's recording streams: each one's index and the index of the source it records now."""
        pid = str(os.getpid())
        return {
            int(o.index): int(o.source)
            for o in self._call("source_output_list")
            if str((getattr(o, "proplist", None) or {}).get("application.process.id", "")) == pid
        }

    def sources(self) -> set[str]:
        """The names of the capture sources (microphones and monitors)."""
        return {str(s.name) for s in self._call("source_list")}

    def capture_sources(self) -> list[CaptureSource]:
        """The capture sources (microphones and monitors), with their indexes and descriptions."""
        return [
            CaptureSource(int(s.index), str(s.name), str(s.description or s.name), _is_monitor(s))
            for s in self._call("source_list")
        ]

    def monitor_of(self, sink: str) -> tuple[str, str]:
        """``(monitor source name, description)`` of the sink called ``sink``; ``AudioError`` when gone."""
        for s in self._call("sink_list"):
            if str(s.name) == sink:
                return str(s.monitor_source_name or f"{sink}.monitor"), str(s.description or sink)
        raise AudioError(f"The output \u201c{sink}\u201d is not available.")

    def microphones(self) -> list[Endpoint]:
        """The capture sources that are not monitors of an output, by description."""
        default = str(self._call("server_info").default_source_name or "")
        out = []
        for s in self._call("source_list"):
            if _is_monitor(s):
                continue
            out.append(Endpoint(MIC_PREFIX + str(s.name), str(s.description or s.name), str(s.name) == default))
        return out


class PulseCapture(MicSource):
    """A ``MicSource`` on sounddevice's ``pulse`` device that records the PulseAudio source ``pulse_source``
    (a microphone, or an output's ``.monitor``). ``label`` names it in messages. With a ``server``, ``moved``
    tells whether the server has since moved the recording to another source."""

    def __init__(
        self,
        sd: Any,
        pulse_source: str,
        label: str,
        kind: str = "microphone",
        server: PulseServer | None = None,
        **kw: Any,
    ) -> None:
        super().__init__(sd, None, **kw)
        self.pulse_source = pulse_source
        self.label = label
        self.kind = kind
        self._pulse = server
        self._recording: tuple[int, int] | None = None  # (stream index, index of the source it began on)

    def open(self) -> None:
        """Open the stream on ``pulse_source`` (``AudioError`` when PulseAudio or the source is missing)."""
        self.device = resolve_device(self._sd, PULSE_DEVICE)
        if self.device is None:
            raise AudioError("PortAudio has no \u201cpulse\u201d device; install the ALSA PulseAudio plug-in.")
        try:
            self._open_stream(self.pulse_source)
        except AudioError as exc:
            raise AudioError(f"\u201c{self.label}\u201d could not be opened through PulseAudio.") from exc
        self.description = f"{self.label} ({self.rate / 1000:g} kHz)"

    def _open_stream(self, pulse_source: str | None) -> None:
        """``MicSource.open`` with ``PULSE_SOURCE`` set to ``pulse_source`` (None: as it is), noting which of the
        server's recording streams it made (one open at a time: the stream that appears is this one)."""
        with pulse_source_env(pulse_source):
            before = self._recordings()
            MicSource.open(self)
            after = self._recordings()
        new = [] if before is None or after is None else [(i, src) for i, src in after.items() if i not in before]
        self._recording = new[0] if len(new) == 1 else None

    def _recordings(self) -> dict[int, int] | None:
        if self._pulse is None:
            return None
        try:
            return self._pulse.recordings()
        except AudioError:
            return None

    def recorded_source(self) -> int | None:
        """The index of the source the server records this stream from now; None when that cannot be told.
        ``AudioError`` when the server does not answer."""
        if self._recording is None or self._pulse is None:
            return None
        return self._pulse.recordings().get(self._recording[0])

    def moved(self) -> bool:
        """Whether the server now records this stream from a source other than the one it opened on (PulseAudio
        moves a recording when its source goes, even where one of the same name comes back at once, and a mixer
        can move it by hand); False when that cannot be told. ``AudioError`` when the server does not answer."""
        now = self.recorded_source()
        return now is not None and self._recording is not None and now != self._recording[1]


class PulseMicSource(PulseCapture):
    """A microphone by its PulseAudio name that is lost when that source goes: PulseAudio moves such a recording
    to the default source instead of ending it (an unplugged USB microphone went on as the speakers' monitor, still
    shown as the chosen microphone). Every ``CHECK_EVERY_S`` it asks the server whether the source is there; when
    not, what was captured since it was last seen is dropped and ``lost`` turns true (the worker then falls back
    to the default microphone and says so).

    PulseAudio also moves the recordings of the default source when another one becomes the default (in the
    sound settings, or ``pactl set-default-source``): a chosen microphone that was the default went on as the new
    one. While the source it began on is still there (the same source, not one of that name plugged in again), the
    microphone is recorded again on a stream of its own, and what came from the other source is dropped; the
    recording is not moved back through the server, which would save that move as a rule for every later recording
    of the ALSA plug-in (module-stream-restore): "System default" would then no longer follow the default."""

    def __init__(self, sd: Any, server: PulseServer, pulse_source: str, label: str, **kw: Any) -> None:
        super().__init__(sd, pulse_source, label, server=server, **kw)
        self._server = server
        self._next_check = self._seen = 0.0
        self._gone = False
        self._notices: list[str] = []

    def open(self) -> None:
        super().open()
        self._start_checks()

    def _start_checks(self) -> None:
        self._gone = False
        self._seen = time.monotonic()
        self._next_check = self._seen + CHECK_EVERY_S

    def close(self) -> None:
        was_open = self.is_open
        super().close()
        if was_open and not self._gone:
            self._check(time.monotonic())  # what is still queued, before it is read
        self._server.close()

    def read(self, max_seconds: float | None = None) -> list[Block]:
        """The blocks that arrived before the source was last seen (as ``MicSource.read`` otherwise)."""
        now = time.monotonic()
        if self.is_open and not self._gone and (now >= self._next_check or self.queue.any_since(self._seen)):
            self._next_check = now + CHECK_EVERY_S
            self._check(now)
        return self.queue.take_all(max_seconds, before=self._seen)  # close checks once more: all, unless gone

    def notices(self) -> list[str]:
        """Sentences for the user since the last call."""
        out, self._notices = self._notices, []
        return out

    def _check(self, now: float) -> None:
        try:
            there = self._still_there()
        except AudioError:
            there = True  # the server did not answer: judged by the stream, as any microphone
        if there:
            self._seen = now
        else:
            dropped = self.queue.drop_since(self._seen)
            log.info("microphone %s is gone; %.2f s captured since it was last seen dropped", self.label, dropped)
            self._gone = True

    def _still_there(self) -> bool:
        """Whether the chosen source still records this stream; one the server moved away from a source that is
        still there is opened on it again (while open). ``AudioError`` when the server does not answer."""
        index = {s.name: s.index for s in self._server.capture_sources()}.get(self.pulse_source)
        if index is None or not self.moved():
            return index is not None
        if self._recording is None or index != self._recording[1] or not self.is_open:
            return False  # gone and back (another source of that name), or moved while closing: lost
        return self._record_again()

    def _record_again(self) -> bool:
        """Open the stream on the chosen source again (``_still_there``); what came since it was last seen is dropped
        (from the source the server moved it to). False when it does not open."""
        log.info("the server moved the recording of %s (a new default source); recording it again", self.label)
        MicSource.close(self)
        self.queue.drop_since(self._seen)
        try:
            PulseCapture.open(self)
        except AudioError:
            log.warning("%s could not be opened again", self.label, exc_info=True)
            return False
        return True

    @property
    def lost(self) -> bool:
        return self._gone or super().lost


class PulseDefaultMicSource(PulseMicSource):
    """The server's default microphone ("System default"), followed through changes. Its stream is opened on
    PortAudio's default device without a source of its own, so the server moves it to each new default microphone
    (chosen in the sound settings, a headset plugged in, the configured one back). Every check asks which source
    records it now: another microphone is named (``name``, ``description``) and said (``notices``; the worker then
    renames the input in the status bar and the journal); an output's monitor (the server's default once the last
    microphone went: the speakers) is lost, as a chosen microphone that goes. ``label`` names it until it is open."""

    def __init__(self, sd: Any, server: PulseServer, label: str, **kw: Any) -> None:
        super().__init__(sd, server, "", label, **kw)

    def open(self) -> None:
        """Open PortAudio's default device (``AudioError`` as ``MicSource.open``) and name it after its source."""
        self.device = None
        self._open_stream(None)
        self._start_checks()
        with contextlib.suppress(AudioError):  # named as the server calls its default until the first check
            self._still_there()

    def _still_there(self) -> bool:
        """Whether the stream records a microphone (named after it, said when it changed); True when that cannot
        be told. ``AudioError`` when the server does not answer."""
        index = self.recorded_source()
        if index is None:
            return True
        source = next((s for s in self._server.capture_sources() if s.index == index), None)
        if source is None or source.monitor:
            return False
        if source.name != self.pulse_source:
            said = bool(self.pulse_source)  # not on opening
            self.pulse_source, self.label = source.name, source.description
            self.name, self.description = source.description, f"{source.description} ({self.rate / 1000:g} kHz)"
            if said:
                self._notices.append(
                    f"The default microphone changed; now captioning \u201c{source.description}\u201d."
                )
        if self._recording is not None:
            self._recording = (self._recording[0], index)
        return True


class PulseSystemSource(SystemCapture):
    """What an output plays (its PulseAudio monitor). ``sink`` is an output name, or "" to follow the
    default output through changes. Reads, pauses and loss work like a ``MicSource``'s."""

    _capture: PulseCapture | None

    def __init__(self, sd: Any, server: PulseServer, sink: str = "", max_queue_seconds: float = 10.0) -> None:
        super().__init__(max_queue_seconds)
        self._sd = sd
        self._server = server
        self.sink = sink
        self.follow = not sink
        self._current = ""
        self._next_check = 0.0
        self._checked = 0.0  # when the output was last seen to exist
        self.rate = SAMPLE_RATE
        self.description = self.name = ""
        self.switches = 0

    # -- lifecycle --------------------------------------------------------------------------------
    def open(self) -> None:
        """Capture the chosen (or the current default) output's monitor."""
        sink = self.sink or self._server.default_sink()
        if not sink:
            raise AudioError("There is no output to capture; the sound server has no default output.")
        self._broken = False
        self._open_sink(sink)

    def _open_sink(self, sink: str) -> None:
        monitor, name = self._server.monitor_of(sink)
        capture = PulseCapture(self._sd, monitor, name, kind="system", server=self._server)
        self._start(capture)  # one queue across output changes: nothing queued is lost
        self._current = sink
        self.rate = capture.rate
        follows = " \u2014 follows the default output" if self.follow else ""
        self.description = f"System audio: {capture.description}{follows}"
        self.name = name  # the output, as the user knows it
        self._checked = time.monotonic()
        self._next_check = self._checked + CHECK_EVERY_S

    def close(self) -> None:
        capture, self._capture = self._capture, None
        if capture is not None:
            capture.close()
            if not self._broken:
                self._check(time.monotonic(), follow=False)  # what is still queued, before it is read
        self._server.close()

    # -- worker tick --------------------------------------------------------------------------------
    def read(self, max_seconds: float | None = None) -> list[Block]:
        """The blocks that arrived before the output was last seen; checks that it is still there whenever newer
        blocks wait (and every ``CHECK_EVERY_S``) and, while following the default output, moves to a new default."""
        now = time.monotonic()
        if self._capture is not None and (now >= self._next_check or self.queue.any_since(self._checked)):
            self._next_check = now + CHECK_EVERY_S
            self._check(now)
        return self.queue.take_all(max_seconds, before=self._checked)

    def _check(self, now: float, follow: bool = True) -> None:
        """Whether the output was there at ``now`` (a time before the question): the blocks since the last check
        are verified, or dropped when it is gone."""
        try:
            names, sink = self._server.sinks()
            moved = self._capture is not None and self._capture.moved()
        except AudioError:
            log.debug("output look-up failed; judged by the stream", exc_info=True)
            self._checked = now
            return
        if self._current not in names or moved:  # the recording was moved (to the default microphone)
            capture, self._capture = self._capture, None
            if capture is not None:
                capture.close()
            dropped = self.queue.drop_since(self._checked)
            log.info("output %s is gone; %.2f s captured since it was last seen dropped", self._current, dropped)
            if not (self.follow and follow and sink):
                self._broken = True  # lost: the worker falls back to the default output and says so
                return
            self._current = ""  # following: open the default output's monitor again, even one of the same name
        self._checked = now
        if self.follow and follow:
            self._follow_default(sink)

    def _follow_default(self, sink: str) -> None:
        if not sink or sink == self._current:
            return
        old, previous = self._capture, self._current
        if old is not None:  # close first: two monitors feeding one queue would interleave their blocks
            old.close()
        try:
            self._open_sink(sink)
        except AudioError:
            log.warning("could not move to the new default output %s", sink, exc_info=True)
            try:
                self._open_sink(previous)
            except AudioError:
                self._broken = True
            return
        assert self._capture is not None
        self.switches += 1
        label = self._capture.label
        self._notices.append(f"The default output changed; now captioning what \u201c{label}\u201d plays.")


class PulseBackend:
    """System audio and named microphones on Linux through PulseAudio / pipewire-pulse."""

    name = "PulseAudio"

    def __init__(self, sd: Any, pulsectl: Any = None) -> None:
        self._sd = sd
        self._pulsectl = pulsectl

    def server(self) -> PulseServer:
        return PulseServer(self._pulsectl)

    def silent(self, fresh: bool = False) -> bool:
        """Whether the sound server runs but does not answer (stopped, hung); asks it, for ``CALL_TIMEOUT_S`` at
        most (unless ``fresh``, True at once within ``SILENT_BACKOFF_S`` of a call that was not answered: a worker
        asking on every tick is not held a second each time)."""
        global _ask_again_at
        if fresh:
            _ask_again_at = 0.0
        server = self.server()
        try:
            server.default_sink()
        except ServerSilent:
            return True
        except AudioError:
            return False
        finally:
            server.close()
        return False

    def unavailable_reason(self) -> str | None:
        """None when system audio can be captured here, else one sentence why not."""
        server = self.server()
        try:
            server.default_sink()
        except AudioError as exc:
            return str(exc)
        finally:
            server.close()
        return None

    def outputs(self) -> list[Endpoint]:
        server = self.server()
        try:
            return server.outputs()
        finally:
            server.close()

    def microphones(self) -> list[Endpoint]:
        server = self.server()
        try:
            return server.microphones()
        except AudioError:
            return []
        finally:
            server.close()

    def default_mic_is_a_monitor(self) -> bool:
        """Whether the server's default source is an output's monitor (False when the server cannot tell)."""
        server = self.server()
        try:
            return server.default_source_is_a_monitor()
        except AudioError:
            return False
        finally:
            server.close()

    def system_source(self, output: str = "") -> PulseSystemSource:
        return PulseSystemSource(self._sd, self.server(), output)

    def mic_source(self, device: str) -> PulseCapture | None:
        """A capture of the PulseAudio microphone ``device`` (an id from ``microphones()``), else None."""
        if not device.startswith(MIC_PREFIX):
            return None
        name = device[len(MIC_PREFIX) :]
        label = name
        with contextlib.suppress(AudioError):
            label = next((m.name for m in self.microphones() if m.id == device), name)
        return PulseMicSource(self._sd, self.server(), name, label)

    def default_mic_source(self, label: str) -> PulseDefaultMicSource:
        """A capture of the server's default microphone, followed through changes; ``label`` names it until open."""
        return PulseDefaultMicSource(self._sd, self.server(), label)
