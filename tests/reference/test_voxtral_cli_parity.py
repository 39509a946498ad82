"""End-to-end parity of the engine CLI with transformers on fresh random Voxtral Realtime models.

For each seed in ``PARITY_SEEDS`` (not the committed seed, so the engine is not only right on the model it was
developed against) the model is built into a temporary folder in the HF and the Mistral native dialect (same
weights), then

    python -m engine.cli CLIP.wav --model DIR --backend {numpy,mlx} --dtype float32 --delay-ms MS --tokens
        --chunk-ms N

must print ``{"family": "voxtral_realtime", "delay_tokens": D, "tokens": [...]}`` whose tokens equal the offline
transformers ``generate()`` ids after the prompt for the same clip padded per the protocol (32 x 1280 zeros
left; zeros to a multiple of 1280 plus (D + 1 + 10) x 1280 right): T + 10 ids for T = ceil(samples / 1280),
or fewer ending with EOS (``make_voxtral.reference_generate``). The feed chunking (10 ms, 80 ms, 1 s, the
whole file) must not matter. The MLX cases run on MLX's CPU backend on Linux and are skipped where MLX does not
import.
"""

from __future__ import annotations

import importlib.util

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import make_fixtures as mf  # noqa: E402  (tests/fixtures is put on sys.path by conftest.py)
import make_voxtral as mv  # noqa: E402

#: Fresh seeds (not the committed one) and the committed clip each one is decoded on. Chosen once so that the
#: reference has top-1/top-2 margins >= 0.05 on every (clip, delay) below (no near-ties between backends).
PARITY_SEEDS: dict[int, str] = {48: "speech", 41: "tone_speechlike"}

#: (seed, dialect, delay ms, chunk ms): a subset of seeds x {hf, native} x {80, 480, 2400} x {10, 80, 1000, whole
#: file} in which every value of each factor appears. Seed 48 at 480 ms ends with EOS in the final padding
#: (47 ids instead of T + 10 = 51), the other cases run to T + 10 ids.
CASES: list[tuple[int, str, int, float]] = [
    (48, "hf", 480, 80),
    (48, "native", 480, 10),
    (48, "hf", 80, 1000),
    (48, "native", 2400, 100000),
    (41, "hf", 480, 100000),
    (41, "native", 80, 80),
    (41, "hf", 2400, 10),
    (41, "native", 480, 1000),
]
BACKENDS = ("numpy", "mlx")
pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def built_models(tmp_path_factory):
    """Lazily built model folders: (seed, dialect) -> folder, shared by the backends and cases."""
    root = tmp_path_factory.mktemp("voxtral_parity")
    cache: dict[tuple[int, str], object] = {}

    def get(seed: int, dialect: str):
        if (seed, dialect) not in cache:
            cache[(seed, dialect)] = mv.build_voxtral(seed, root / f"seed{seed}_{dialect}", dialect)
        return cache[(seed, dialect)]

    return get


@pytest.fixture(scope="module")
def reference_ids():
    """(seed, clip, D) -> offline generate() ids of the float32 reference (HF-dialect model of the seed)."""
    cache: dict[tuple[int, str, int], list[int]] = {}

    def get(seed: int, clip: str, d: int, model_dir) -> list[int]:
        if (seed, clip, d) not in cache:
            audio, _ = mf.read_wav(mf.FIXTURES_DIR / "audio" / f"{clip}.wav")
            cache[(seed, clip, d)] = mv.reference_generate(mv.load_reference(str(model_dir)), audio, d).tolist()
        return cache[(seed, clip, d)]

    return get


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("seed", "dialect", "delay_ms", "chunk_ms"), CASES)
def test_cli_tokens_match_transformers_generate(
    seed: int, dialect: str, delay_ms: int, chunk_ms: float, backend: str, built_models, reference_ids, cli_tokens
) -> None:
    if backend == "mlx" and importlib.util.find_spec("mlx") is None:
        pytest.skip("mlx is not installed")
    clip = PARITY_SEEDS[seed]
    clip_path = mf.FIXTURES_DIR / "audio" / f"{clip}.wav"
    d = delay_ms // 80
    want = reference_ids(seed, clip, d, built_models(seed, "hf"))

    out = cli_tokens(
        clip_path, built_models(seed, dialect), backend, "--delay-ms", str(delay_ms), "--chunk-ms", f"{chunk_ms:g}"
    )

    assert out.get("family") == "voxtral_realtime", out
    assert out.get("delay_tokens") == d, out
    got = out.get("tokens")
    assert got == want, (
        f"seed {seed} {dialect} on {clip}, delay {delay_ms} ms, chunks {chunk_ms} ms ({backend}):\n"
        f"engine    ({len(got)} ids) {got}\nreference ({len(want)} ids) {want}"
    )
