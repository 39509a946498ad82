"""Regenerate the screenshots in this folder.

    xvfb-run -s "-screen 0 1280x800x24" .venv/bin/python docs/screenshots/make_screenshots.py

(``QT_QPA_PLATFORM=offscreen`` works too; run a window manager such as openbox on the Xvfb display to see
the presentation window as a desktop shows it.) The captions are fed to the app's own controller as caption
events, as the engine worker would, so the windows show exactly what a session shows. The first-run welcome
is shown on a 16 GB, 8-core PC; its download is a stand-in job that reports progress and failure the way
``app.downloads.DownloadJob`` does (no network).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from PySide6.QtCore import QObject, QPointF, QRect, Qt, QTimer, Signal  # noqa: E402
from PySide6.QtGui import QColor, QFont, QLinearGradient, QPainter, QPixmap  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

import app.welcome as welcome_mod  # noqa: E402
from app.controller import SessionController  # noqa: E402
from app.export_dialog import ExportDialog  # noqa: E402
from app.main_window import MainWindow  # noqa: E402
from app.session_store import SessionStore  # noqa: E402
from app.sessions_view import SessionsWindow  # noqa: E402
from app.settings import Key, Settings  # noqa: E402
from app.sources import AudioSystem, Endpoint  # noqa: E402
from app.theme import apply_theme  # noqa: E402
from app.worker import ModelInfo, Stats  # noqa: E402
from engine import hub  # noqa: E402
from engine.catalog import Machine  # noqa: E402
from engine.events import CaptionEvent, Line  # noqa: E402

LINES = [
    Line("Good morning, and welcome to the quarterly planning meeting.", 0.6, 3.9),
    Line("Before we start, a quick reminder that this session is captioned live.", 4.4, 8.1),
    Line("The first item on the agenda is the release schedule for the spring.", 8.9, 12.7),
    Line("We have three milestones, and I will go through them one by one.", 13.2, 16.8),
]
PARTIAL = "We moved the beta to the second week of March because the translation"
STABLE = len("We moved the beta to the second week of March because")


class _StubModel:
    family = "moonshine_streaming"
    backend_name = "numpy"


def _stub_loader(source: str, *, backend: str = "auto") -> _StubModel:
    return _StubModel()


def _settle(app: QApplication, ms: int = 300) -> None:
    timer = QTimer()
    timer.setSingleShot(True)
    timer.start(ms)
    while timer.isActive():
        app.processEvents()


def _feed(controller: SessionController) -> None:
    controller._on_model_loaded(ModelInfo("moonshine-streaming-small", "moonshine_streaming", "numpy"))
    controller._on_worker_state("running")
    controller._on_session_started(
        "System audio: Built-in Audio Analog Stereo (16 kHz) \u2014 follows the default output"
    )
    controller._on_captions([CaptionEvent(committed=(line,)) for line in LINES])
    controller._on_captions([CaptionEvent(partial=Line(PARTIAL, 17.2, 20.4), partial_stable=STABLE)])
    controller._on_stats(Stats(level_db=-17.0, latency_s=0.62, backlog_s=0.0, dropped_s=0.0, audio_s=20.4))


def _window(app: QApplication, tmp: Path, theme: str) -> tuple[MainWindow, SessionController]:
    settings = Settings(tmp / f"{theme}.ini")
    settings.set_value(Key.THEME, theme)
    apply_theme(app, theme)
    controller = SessionController(loader=_stub_loader, journal_dir=tmp / theme)
    window = MainWindow(controller, settings, sounddevice=_FakeSd(), audio=AudioSystem(_FakeSd(), _Outputs()))
    window.resize(1200, 680)
    window.show()
    _feed(controller)
    window.caption_view.flush()
    controller._elapsed = 20.4
    window.status.set_elapsed(20.4)
    window.status.clearMessage()
    _settle(app)
    return window, controller


class _FakeSd:
    """Just enough of sounddevice for the device picker."""

    class default:  # noqa: N801 - mirrors sounddevice.default
        device = (0, -1)

    @staticmethod
    def query_devices(device=None, kind=None):  # noqa: ANN001, ANN205
        return [
            {
                "name": "Built-in Microphone",
                "hostapi": 0,
                "max_input_channels": 2,
                "default_samplerate": 48000.0,
            },
            {"name": "USB Headset", "hostapi": 0, "max_input_channels": 1, "default_samplerate": 16000.0},
        ]

    @staticmethod
    def query_hostapis():  # noqa: ANN205
        return [{"name": "ALSA"}]


class _Outputs:
    """A system-audio backend that lists outputs and microphones by name, as PulseAudio does."""

    def unavailable_reason(self):  # noqa: ANN201
        return None

    def outputs(self) -> list[Endpoint]:
        return [
            Endpoint("alsa_output.pci-0000_00_1f.3.analog-stereo", "Built-in Audio Analog Stereo", True),
            Endpoint("bluez_output.AC_80_0A.1", "WH-1000XM4 (Bluetooth)"),
            Endpoint("alsa_output.usb-Focusrite.analog-stereo", "Scarlett Solo USB"),
        ]

    def microphones(self) -> list[Endpoint]:
        return [
            Endpoint("pulse:alsa_input.pci-0000_00_1f.3.analog-stereo", "Built-in Audio Analog Stereo", True),
            Endpoint("pulse:alsa_input.usb-Blue_Yeti.analog-stereo", "Yeti Stereo Microphone"),
        ]


def _source_shots(app: QApplication, tmp: Path, out: Path) -> None:
    """The Source picker: its choices open over the toolbar, and Both with a meter per input."""
    window, controller = _window(app, tmp, "light")
    controller._on_worker_state("idle")  # the pickers are enabled between sessions
    window.resize(1366, 680)  # a laptop-wide window: Both shows two pickers and two meters
    _settle(app, 100)
    window.level_meter.set_level(-14.0)
    top = window.toolbar.geometry().bottom() + 150
    for name, combo, kind in (
        ("source_picker.png", window.sources.source_combo, "system"),
        ("source_outputs.png", window.sources.output_combo, "system"),
    ):
        window.sources.set_kind(kind, save=False)
        _settle(app, 100)
        combo.showPopup()
        _settle(app)
        shot = window.grab(QRect(0, 0, window.width(), top))
        popup = combo.view().window()
        p = QPainter(shot)
        p.drawPixmap(window.mapFromGlobal(popup.mapToGlobal(popup.rect().topLeft())), popup.grab())
        p.end()
        combo.hidePopup()
        shot.save(str(out / name))
    window.sources.set_kind("both", save=False)
    window.sources.device_combo.setCurrentIndex(2)
    _settle(app, 100)
    window.sources.show_levels(-20.0, {"mic": -31.0, "system": -9.0})
    _settle(app)
    window.grab(QRect(0, 0, window.width(), top)).save(str(out / "source_both.png"))
    window.close()


class _StandInJob(QObject):
    """Looks like ``app.downloads.DownloadJob`` to the welcome; the script drives its signals."""

    progress = Signal(object)
    succeeded = Signal(object)
    failed = Signal(str, object)
    finished = Signal()
    last: _StandInJob | None = None

    def __init__(self, repo_id: str, **_: object) -> None:
        super().__init__()
        self.repo_id = repo_id
        self.running = True
        self.token = hub.CancelToken()
        _StandInJob.last = self

    def start(self) -> None:
        pass

    def cancel(self) -> None:
        self.token.cancel()

    def end(self) -> None:
        self.running = False
        self.finished.emit()


def _welcome_shots(app: QApplication, tmp: Path, out: Path) -> None:
    """welcome.png (first run), welcome_download.png (downloading), welcome_unreachable.png."""
    welcome_mod.DownloadJob = _StandInJob  # type: ignore[misc,assignment]
    settings = Settings(tmp / "welcome.ini")
    apply_theme(app, "light")
    controller = SessionController(loader=_stub_loader, journal_dir=tmp / "welcome")
    window = MainWindow(controller, settings, sounddevice=_FakeSd())
    window.welcome._machine = Machine(16 << 30, False, 8)
    window.welcome.refresh()
    window.resize(1200, 680)
    window.show()
    _settle(app)
    window.grab().save(str(out / "welcome.png"))

    entry = window.welcome.entry
    window.welcome.download_button.click()
    job = _StandInJob.last
    total = entry.download_bytes
    job.progress.emit(
        hub.Progress(
            entry.repo_id,
            int(total * 0.38),
            total,
            "model.safetensors",
            2,
            4,
            speed=23_500_000,
            eta=total * 0.62 / 23_500_000,
        )
    )
    _settle(app)
    window.grab().save(str(out / "welcome_download.png"))

    job.running = False
    job.failed.emit("raw", hub.HubUnreachableError("The hub cannot be reached ([Errno 101] Network is unreachable)"))
    job.end()
    _settle(app)
    window.grab().save(str(out / "welcome_unreachable.png"))
    window.close()
    controller.shutdown()


def _desktop_backdrop(width: int, height: int) -> QPixmap:
    """A stand-in for a video or slide behind the overlay, to show its translucency."""
    pix = QPixmap(width, height)
    p = QPainter(pix)
    grad = QLinearGradient(QPointF(0, 0), QPointF(width, height))
    grad.setColorAt(0, QColor("#3a6ea5"))
    grad.setColorAt(1, QColor("#c9a46b"))
    p.fillRect(pix.rect(), grad)
    p.setPen(QColor(255, 255, 255, 170))
    p.setFont(QFont("DejaVu Sans", 30, QFont.Weight.Bold))
    p.drawText(QRect(0, 40, width, 80), Qt.AlignmentFlag.AlignHCenter, "Spring release plan")
    p.setFont(QFont("DejaVu Sans", 16))
    for i, item in enumerate(["Beta: second week of March", "Translations: 13 languages", "GA: end of April"]):
        p.drawText(120, 170 + 40 * i, "\u2022  " + item)
    p.end()
    return pix


SESSIONS = [  # id, source, input, model, lines (text, start, end), title, audio seconds
    (
        "20250312-091502",
        "microphone",
        "Built-in Microphone (48 kHz)",
        "moonshine-streaming-small",
        LINES,
        "Quarterly planning",
        1834.2,
    ),
    (
        "20250311-140010",
        "file",
        "interview-ep12.wav (replay)",
        "Voxtral-Mini-4B-Realtime-2602",
        [
            Line("Thanks for having me. It's been a busy year for the lab.", 0.4, 3.8),
            Line("We started with a question about how bees find their way home.", 4.1, 8.0),
        ],
        "",
        2710.0,
    ),
    (
        "20250310-101544",
        "microphone",
        "USB Headset (16 kHz)",
        "moonshine-streaming-tiny",
        [Line("Okay, can everyone hear me? Great, let's get going.", 0.2, 3.1)],
        "",
        612.5,
    ),
    (
        "20250307-163020",
        "microphone",
        "Built-in Microphone (48 kHz)",
        "moonshine-streaming-small",
        [Line("Welcome to week three of the course on signal processing.", 0.6, 4.0)],
        "Lecture 3: filters",
        3020.8,
    ),
]


def _write_sessions(folder: Path) -> SessionStore:
    """Sessions as the app keeps them (journal files), one re-transcribed with a second model."""
    import json

    folder.mkdir(parents=True, exist_ok=True)
    store = SessionStore(folder)
    for sid, source, input_, model, lines, title, audio_s in SESSIONS:
        when = f"{sid[:4]}-{sid[4:6]}-{sid[6:8]}T{sid[9:11]}:{sid[11:13]}:{sid[13:15]}"
        records = [{"type": "start", "time": when, "source": source, "input": input_, "model": model}]
        records += [{"type": "line", "text": ln.text, "start": ln.start, "end": ln.end} for ln in lines]
        records.append({"type": "end", "audio_s": audio_s})
        (folder / f"{sid}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
        if title:
            store.rename(sid, title)
    better = [Line(ln.text.replace("It's", "It has"), ln.start, ln.end) for ln in SESSIONS[1][4]]
    store.add_version(SESSIONS[1][0], better, {"model": "Voxtral-Mini-4B-Realtime-2602 (2400 ms)"})
    return store


def _sessions_window(app: QApplication, tmp: Path) -> SessionsWindow:
    settings = Settings(tmp / "sessions.ini")
    settings.set_value(Key.SESSIONS_RETENTION, "days:90")
    settings.set_value(Key.SESSIONS_KEEP_AUDIO, True)
    apply_theme(app, "light")
    view = SessionsWindow(_write_sessions(tmp / "store"), settings)
    view.resize(1180, 560)
    view.splitter.setSizes([690, 490])
    view.show()
    view.select(SESSIONS[0][0])
    view.history.search.clear()
    _settle(app)
    return view


def main() -> int:
    app = QApplication.instance() or QApplication(sys.argv)
    app.setFont(QFont("DejaVu Sans", 10))
    tmp = Path(tempfile.mkdtemp())
    out = HERE

    _welcome_shots(app, tmp, out)

    _source_shots(app, tmp, out)
    window, controller = _window(app, tmp, "light")
    window.grab().save(str(out / "main_window.png"))

    overlay = window.overlays.overlay
    window.overlays.set_style(lines=2, opacity=0.72)
    overlay.resize(900, overlay.height())
    overlay.show()
    _settle(app)
    backdrop = _desktop_backdrop(1000, 420)
    p = QPainter(backdrop)
    p.drawPixmap(50, backdrop.height() - overlay.height() - 30, overlay.grab())
    p.end()
    backdrop.save(str(out / "overlay.png"))
    overlay.hide()

    controller._on_worker_state("paused")  # paused, searching the history
    window.history.search.setText("the")
    _settle(app)
    window.grab().save(str(out / "main_window_paused_search.png"))
    window.history.search.clear()
    controller._on_worker_state("running")

    dialog = ExportDialog(controller.lines, folder=str(Path.home() / "Documents"), fmt_key="srt", parent=window)
    dialog.show()
    _settle(app)
    dialog.grab().save(str(out / "export_dialog.png"))
    dialog.close()
    window.close()

    dark, dark_controller = _window(app, tmp, "dark")
    dark.show_message(
        "warning",
        "The microphone \u201cUSB Headset (16 kHz)\u201d stopped delivering audio. "
        "Now capturing from Built-in Microphone (48 kHz); the transcript continues.",
    )
    _settle(app)
    dark.grab().save(str(out / "main_window_dark.png"))
    dark.close()

    contrast, _ = _window(app, tmp, "high-contrast")
    contrast.show_message("error", "Cannot write the transcript to '/media/usb/talk.srt': read-only file system.")
    _settle(app)
    contrast.grab().save(str(out / "main_window_high_contrast.png"))
    contrast.close()

    sessions = _sessions_window(app, tmp)
    sessions.grab().save(str(out / "sessions.png"))
    sessions.close()
    print("wrote", ", ".join(sorted(p.name for p in out.glob("*.png"))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
