"""End-to-end parity of the engine CLI with transformers on fresh random Moonshine Streaming models.

For each config in ``make_fixtures.MOONSHINE_CONFIGS`` and each seed in ``PARITY_SEEDS`` (seeds that differ
from the committed fixtures', so the engine is not only right on the models it was developed against) a
model is built into a temporary folder, then

    python -m engine.cli CLIP.wav --model DIR --backend {numpy,mlx} --dtype float32 --no-vad --tokens

must print ``{"family": "moonshine_streaming", "segments": [{"start": s, "end": s, "tokens": [...]}]}``
with exactly one segment whose tokens equal transformers ``generate()`` on the whole clip (ids after the
start token, EOS included if it comes; attention mask passed; ``max_new_tokens = ceil(6.5 * seconds)``).
The MLX cases run on MLX's CPU backend on Linux and are skipped where MLX does not import.
"""

from __future__ import annotations

import importlib.util

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import make_fixtures as mf  # noqa: E402  (tests/fixtures is put on sys.path by conftest.py)

#: Fresh seeds (not the committed ones) and the committed clip each one is decoded on. Chosen once so
#: that every model has top-1/top-2 margins >= 0.05 on its clip (no near-ties between backends).
PARITY_SEEDS: dict[int, str] = {21: "speech", 29: "tone_speechlike"}
BACKENDS = ("numpy", "mlx")


@pytest.fixture(scope="module")
def built_models(tmp_path_factory):
    """Lazily built models: (config name, seed) -> model folder, shared by the backends."""
    root = tmp_path_factory.mktemp("moonshine_parity")
    cache: dict[tuple[str, int], object] = {}

    def get(name: str, seed: int):
        if (name, seed) not in cache:
            cache[(name, seed)] = mf.build_moonshine(name, seed, root / f"{name}_seed{seed}")
        return cache[(name, seed)]

    return get


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("seed", sorted(PARITY_SEEDS))
@pytest.mark.parametrize("name", sorted(mf.MOONSHINE_CONFIGS))
def test_cli_tokens_match_transformers_generate(name: str, seed: int, backend: str, built_models, cli_tokens) -> None:
    if backend == "mlx" and importlib.util.find_spec("mlx") is None:
        pytest.skip("mlx is not installed")
    clip = PARITY_SEEDS[seed]
    clip_path = mf.FIXTURES_DIR / "audio" / f"{clip}.wav"
    audio, _ = mf.read_wav(clip_path)
    model_dir = built_models(name, seed)
    want = mf.reference_greedy(model_dir, audio).tolist()

    out = cli_tokens(clip_path, model_dir, backend, "--no-vad")

    assert out.get("family") == "moonshine_streaming", out
    segments = out.get("segments")
    assert isinstance(segments, list) and len(segments) == 1, f"--no-vad must give one segment: {out}"
    seg = segments[0]
    duration = len(audio) / mf.SAMPLE_RATE
    assert 0.0 <= seg["start"] <= seg["end"] <= duration + 1e-3, seg
    assert seg["tokens"] == want, (
        f"{name} seed {seed} on {clip} ({backend}): engine {seg['tokens']} != reference {want}"
    )
