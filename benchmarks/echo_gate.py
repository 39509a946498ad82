"""Both with speakers: how much of the echo the gate leaves out, and how much of a voice talking over it it keeps.

Real speech from shared/audio: the remote voice (``two_cities.wav``, the system track) plays through speakers and
the microphone hears it as an echo (delayed 40 ms; "dry": that copy alone, "room": plus a reverberant tail, RT60
0.3 s, direct-to-reverberant 0 dB) at a level against the person at the microphone (``endgame_nagg_nell.wav``
from 2 s, ``beckett.wav`` from 30 s), plus noise at -65 dBFS. ``EchoGate.apply`` runs frame by frame as
``MixSource`` calls it, once as it is (``double_talk_db`` 2) and once without the double-talk check
(``double_talk_db`` inf, the gate before it). Per 64 ms frame (active: above -40 dBFS):

- **echo left out** (ERLE): echo energy over what remains, where only the echo is active (higher: better);
- **voice kept**: the share of the voice's energy in frames not zeroed, where both are active (double talk);
- **voice >= echo zeroed**: the share of double-talk frames in which the voice is at least as loud as the echo
  that were zeroed anyway (each one a piece of a word gone).

A volume step (speakers turned up 10 dB at 20 s, judged from 22 s) checks that the gate follows it.

    .venv/bin/python benchmarks/echo_gate.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.sources.mix import RATE, EchoGate  # noqa: E402
from engine.audio import read_audio  # noqa: E402

AUDIO = ROOT.parent / "shared" / "audio"
FRAME = 1024
ACTIVE = 10 ** (-40 / 20)


def room(kind: str, rng: np.random.Generator, lag_s: float = 0.04) -> np.ndarray:
    """The speaker-to-microphone response: a delayed copy, and for "room" a reverberant tail as loud as it."""
    n, d = int(0.4 * RATE), int(lag_s * RATE)
    h = np.zeros(n + d)
    h[d] = 1.0
    if kind == "room":
        tail = rng.standard_normal(n) * np.exp(-6.9 * np.arange(n) / RATE / 0.3)
        tail[: int(0.002 * RATE)] = 0
        h[d:] += tail / np.sqrt(np.sum(tail**2))
    return h


def gated(mic: np.ndarray, system: np.ndarray, gate: EchoGate) -> np.ndarray:
    """``mic`` after the gate, judged 64 ms at a time with the system samples around each frame."""
    f, out = gate.frame, mic.copy()
    for a in range(0, len(mic) - f + 1, f):
        history, tail = system[max(0, a - gate.max_lag) : a], system[a + f : a + f + gate.lead]
        out[a : a + f] = gate.apply(mic[a : a + f], system[a : a + f], history, tail)
    return out


def measure(out: np.ndarray, voice: np.ndarray, echo: np.ndarray) -> tuple[float, float, float]:
    n = len(out) // FRAME * FRAME
    o, v, e = (x[:n].reshape(-1, FRAME).astype(np.float64) for x in (out, voice, echo))
    ve, ee = (v**2).mean(1), (e**2).mean(1)
    va, ea = np.sqrt(ve) > ACTIVE, np.sqrt(ee) > ACTIVE
    zero = np.abs(o).max(1) == 0
    echo_only, both = ea & ~va, ea & va
    erle = 10 * np.log10(np.sum(e[echo_only] ** 2) / max(np.sum(o[echo_only] ** 2), 1e-20))
    kept = 1 - np.sum(v[both & zero] ** 2) / np.sum(v[both] ** 2)
    louder = both & (ve >= ee)
    return float(erle), float(kept), float(zero[louder].mean())


def main() -> int:
    remote = read_audio(AUDIO / "two_cities.wav")[: 40 * RATE]
    near = np.zeros_like(remote)
    for path, at in (("endgame_nagg_nell.wav", 2), ("beckett.wav", 30)):
        x = read_audio(AUDIO / path)[: len(near) - at * RATE]
        near[at * RATE : at * RATE + len(x)] = x
    voiced = np.abs(near) > 0
    print("| response | echo vs voice | volume step | gate | echo left out | voice kept | voice >= echo zeroed |")
    print("|---|---:|---:|---|---:|---:|---:|")
    for kind in ("dry", "room"):
        rng = np.random.default_rng(0)
        h = room(kind, rng)
        for level_db, step_db in ((-6, 0), (0, 0), (6, 0), (-6, 10)):
            echo = np.convolve(remote, h)[: len(remote)]
            echo *= np.sqrt(np.mean(near[voiced] ** 2) / np.mean(echo**2)) * 10 ** (level_db / 20)
            echo[20 * RATE :] *= 10 ** (step_db / 20)
            mic = (near + echo + rng.standard_normal(len(near)) * 10 ** (-65 / 20)).astype(np.float32)
            start = 22 * RATE if step_db else 0
            for name, db in (("as is", EchoGate().double_talk_db), ("no double-talk check", np.inf)):
                out = gated(mic, remote, EchoGate(double_talk_db=db))
                erle, kept, zeroed = measure(out[start:], near[start:], echo[start:])
                step = f"+{step_db} dB" if step_db else ""
                print(
                    f"| {kind} | {level_db:+d} dB | {step} | {name} | {erle:.1f} dB | {100 * kept:.0f} % "
                    f"| {100 * zeroed:.0f} % |",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
