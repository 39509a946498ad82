"""Plain helpers shared by test modules (a test module never imports another one; tests/test_layout.py checks
that): the repository root, livecap and its transcription CLI run as child processes, test signals, a Tekken
tokenizer file, whether a process is alive, a Moonshine model's decoder steps, a Voxtral stream."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
FAKE_ENGINE = "tests.app.fake_engine:load_model"  # ``--engine-factory`` for the fake engine
RATE = 16000


XDG_DIRS = {"XDG_CONFIG_HOME": "config", "XDG_DATA_HOME": "data", "XDG_STATE_HOME": "state", "XDG_CACHE_HOME": "cache"}


def private_xdg_dirs(home: Path, monkeypatch) -> Path:
    """Point every platformdirs folder (settings, journals, logs, caches) of this process under ``home``."""
    for var, sub in XDG_DIRS.items():
        (home / sub).mkdir(parents=True, exist_ok=True)
        monkeypatch.setenv(var, str(home / sub))
    return home


def livecap_env(tmp_path: Path, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a livecap child process: ``base`` (default: this process's) with Qt offscreen, the
    settings, data, state and cache folders under ``tmp_path``, and the repository importable."""
    env = dict(os.environ if base is None else base)
    env.update({var: str(tmp_path / sub) for var, sub in XDG_DIRS.items()})  # the cache: quantized copies
    env.update(QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(REPO))
    return env


def run_livecap(
    tmp_path: Path, *args: str, factory: str | None = FAKE_ENGINE, timeout: float = 60
) -> subprocess.CompletedProcess:
    """Run ``python -m app.main`` offscreen with private settings/data folders (and the fake engine)."""
    cmd = [sys.executable, "-m", "app.main", "--settings", str(tmp_path / "s.ini"), *args]
    if factory:
        cmd += ["--engine-factory", factory]
    return subprocess.run(cmd, cwd=REPO, env=livecap_env(tmp_path), capture_output=True, text=True, timeout=timeout)


def run_engine_cli(*args, timeout: float = 120, **run_kwargs) -> subprocess.CompletedProcess:
    """Run ``python -m engine.cli ARGS`` (each ``str()``-ed) from the repository root, in text mode;
    ``run_kwargs`` go to ``subprocess.run`` (``capture_output``, ``stdout``, ``preexec_fn``, ...)."""
    cmd = [sys.executable, "-m", "engine.cli", *map(str, args)]
    return subprocess.run(cmd, cwd=REPO, text=True, timeout=timeout, **run_kwargs)


def sigint_default() -> None:
    """``preexec_fn`` for a child that is sent Ctrl+C: it starts with SIGINT's default action. A shell's background
    job inherits SIGINT ignored, and Python then never raises KeyboardInterrupt (CI started that way here saw
    every Ctrl+C test exit 0)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (Linux: a zombie, ended but not yet waited for, counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def decoder_steps(m, enc, valid, tokens=(5, 9, 11, 7)) -> list:
    """A Moonshine model's logits for the start token and then each of ``tokens``, decoded step by step with its
    cache over the memory of ``enc`` (``valid`` frames)."""
    xkv = m.cross_kv(m.memory(enc))
    cache = m.new_self_cache(len(tokens) + 4)
    out = [m.decode([m.cfg.decoder_start_token_id], 0, cache, xkv, valid)]
    for i, tok in enumerate(tokens):
        out.append(m.decode([tok], i + 1, cache, xkv, valid))
    return out


def voxtral_speech_stream(m):
    """A streaming session of Voxtral model ``m`` over the fixtures' ``speech.wav`` in 80 ms chunks (480 ms delay,
    its tokens kept), finished; and the reference's ids for it (``vox_tiny_hf``'s golden)."""
    from engine.audio import read_audio

    fixtures = REPO / "tests" / "fixtures"
    audio = read_audio(fixtures / "audio" / "speech.wav")
    s = m.start_session(delay_ms=480, keep_tokens=True)
    for i in range(0, len(audio), 1280):
        s.feed(audio[i : i + 1280])
    s.finish()
    return s, np.load(fixtures / "models" / "vox_tiny_hf" / "golden" / "speech_d6.npz")["generate_ids"].tolist()


def tone(freq: float, seconds: float, amp: float = 0.3, rate: int = RATE) -> np.ndarray:
    """A sine of ``freq`` Hz, float32."""
    t = np.arange(int(seconds * rate)) / rate
    return (amp * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def band_power(x: np.ndarray, freq: float, rate: int = RATE, width: float = 30.0) -> float:
    """The fraction of ``x``'s power within ``width`` Hz of ``freq``."""
    spec = np.abs(np.fft.rfft(x * np.hanning(len(x)))) ** 2
    freqs = np.fft.rfftfreq(len(x), 1 / rate)
    return float(spec[np.abs(freqs - freq) < width].sum() / max(spec.sum(), 1e-20))


def write_tekken(path, pieces: list[bytes], specials: dict[int, str]):
    """A Tekken ``tekken.json`` at ``path``: 1000 specials (``specials`` by rank, the rest placeholders), the 256
    single bytes, then ``pieces``."""
    sp = [{"rank": i, "token_str": specials.get(i, f"<SPECIAL_{i}>"), "is_control": True} for i in range(1000)]
    vocab = [{"rank": i, "token_bytes": base64.b64encode(bytes([i])).decode(), "token_str": None} for i in range(256)]
    vocab += [
        {"rank": 256 + i, "token_bytes": base64.b64encode(p).decode(), "token_str": None} for i, p in enumerate(pieces)
    ]
    path.write_text(
        json.dumps(
            {
                "config": {"default_vocab_size": 1000 + len(vocab), "default_num_special_tokens": 1000},
                "special_tokens": sp,
                "vocab": vocab,
            }
        )
    )
