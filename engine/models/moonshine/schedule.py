"""When the live session shows a partial: every ``partial_ms`` of audio, or less often when the last partial's
cost would not fit in the compute time the rest of the work leaves free, so that the session keeps up with
real time (the cadence stretches on slow machines and large models instead of falling behind).

Time comes from an injected ``clock`` (seconds; ``time.perf_counter`` by default), so the policy can be
driven by a cost model as well as by the wall clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ...audio import SAMPLE_RATE

LOAD_TAU = 2.0  # seconds of audio over which the compute load is averaged


class PartialSchedule:
    """The partial cadence: ``load`` (compute seconds per audio second of everything but partials, a moving
    average), ``cost`` (seconds the last partial took), ``last_at`` (the session sample of the last partial,
    or of what stood in for one) and ``partials`` (how many ran)."""

    def __init__(self, partial_ms: float, clock: Callable[[], float] = time.perf_counter):
        self.partial_ms = float(partial_ms)
        self.clock = clock
        self.reset()

    def reset(self) -> None:
        self.cost = 0.0
        self.load = 0.0
        self.last_at = 0
        self.partials = 0

    @property
    def enabled(self) -> bool:
        return self.partial_ms > 0

    def interval(self) -> float:
        """Samples from one partial to the next: the cadence, or the last partial's cost spread over the
        compute time left free (at least a tenth of real time)."""
        return max(self.partial_ms / 1000, self.cost / max(1.0 - self.load, 0.1)) * SAMPLE_RATE

    def add_work(self, samples: int, seconds: float) -> None:
        """``seconds`` of compute, partials excluded, went into ``samples`` of new audio."""
        if samples:
            w = min(1.0, samples / (LOAD_TAU * SAMPLE_RATE))
            self.load += w * (seconds * SAMPLE_RATE / samples - self.load)

    def partial_done(self, at: int, seconds: float) -> None:
        """A partial for the audio up to session sample ``at`` took ``seconds``."""
        self.last_at, self.cost = at, seconds
        self.partials += 1
