"""The status bar: the session's input (none while idle), session state (Captioning / Paused), model and
backend, elapsed time, latency, and "can't keep up" (short, with the numbers in its tooltip; gone when the session
ends)."""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QPainter, QPaintEvent
from PySide6.QtWidgets import QLabel, QStatusBar, QWidget

from app.export import clock
from app.worker import ModelInfo, Stats

BACKLOG_WARN_S = 2.0
MIN_CHARS = 12  # an elided label may shrink to about this many characters


class ElidedLabel(QLabel):
    """A one-line label that shortens its text with "\u2026" to the width it is given. A plain QLabel asks for its
    whole text as its minimum width, so a long device or model name in the status bar set how narrow the main
    window could be (1700 px for a long output name: wider than a laptop screen, and no room beside a call).
    ``text()`` stays whole, and so does what screen readers get."""

    def minimumSizeHint(self) -> QSize:
        hint = super().minimumSizeHint()
        return QSize(min(hint.width(), self.fontMetrics().horizontalAdvance("x" * MIN_CHARS)), hint.height())

    def shown_text(self) -> str:
        """The text as painted: whole where it fits, else cut with "\u2026" to the label's width."""
        return self.fontMetrics().elidedText(self.text(), Qt.TextElideMode.ElideRight, self.contentsRect().width())

    def paintEvent(self, event: QPaintEvent) -> None:
        shown = self.shown_text()
        if shown == self.text():
            super().paintEvent(event)
            return
        painter = QPainter(self)
        align = int(self.alignment())
        self.style().drawItemText(
            painter, self.contentsRect(), align, self.palette(), self.isEnabled(), shown, self.foregroundRole()
        )


class SessionStatusBar(QStatusBar):
    """Permanent labels on the right; ``showMessage`` stays available for transient text."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("statusBar")
        self.input_label = ElidedLabel("", self)
        self.input_label.setObjectName("inputLabel")
        self.model_label = ElidedLabel("No model", self)
        self.model_label.setObjectName("modelLabel")
        self.elapsed_label = QLabel("00:00:00", self)
        self.elapsed_label.setObjectName("elapsedLabel")
        self.elapsed_label.setToolTip("Time captured in this session")
        self.latency_label = QLabel("Latency \u2013", self)
        self.latency_label.setObjectName("latencyLabel")
        self.latency_label.setToolTip("Time from the audio arriving to its caption appearing")
        self.keepup_label = QLabel("", self)
        self.keepup_label.setObjectName("keepUpLabel")
        self.keepup_label.hide()
        self.state_label = QLabel("", self)
        self.state_label.setObjectName("stateLabel")
        self.state_label.hide()
        self.invalid_label = QLabel("", self)
        self.invalid_label.setObjectName("invalidAudioLabel")
        self.invalid_label.hide()
        self.addWidget(self.input_label, 1)
        for label in (
            self.state_label,
            self.invalid_label,
            self.keepup_label,
            self.latency_label,
            self.elapsed_label,
            self.model_label,
        ):
            self.addPermanentWidget(label)
        self._latency: float | None = None
        self._float_model = False  # the loaded model computes with float weights: 8-bit ones are a way to keep up
        self.messageChanged.connect(lambda _text: self._fit_message())

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt's name
        super().resizeEvent(event)
        self._fit_message()

    def _fit_message(self) -> None:
        """Make room for a transient message in a narrow window: the model's name (the one label that can give
        room) is elided as far as the message needs; the permanent labels left "Mo" of "Model ... is ready"."""
        label = self.model_label
        label.setMaximumWidth(16777215)  # QWIDGETSIZE_MAX: its whole name, unless a message needs the room
        message = self.currentMessage()
        if not message:
            return
        shown = [w for w in self.findChildren(QLabel) if w.isVisible() and w is not self.input_label]
        taken = sum(w.sizeHint().width() for w in shown) + 16 * (len(shown) + 1)  # labels, the layout's spacing
        short = self.fontMetrics().horizontalAdvance(message) - (self.width() - taken)
        if short > 0:
            label.setMaximumWidth(max(label.minimumSizeHint().width(), label.sizeHint().width() - short))

    def set_model(self, info: ModelInfo | None, loading: bool = False) -> None:
        self._float_model = info is not None and not loading and not info.bits
        if loading:
            self.model_label.setText("Loading model\u2026")
            self.model_label.setToolTip("")
        elif info is None:
            self.model_label.setText("No model")
            self.model_label.setToolTip("")
        else:
            family = {"moonshine_streaming": "Moonshine", "voxtral_realtime": "Voxtral"}.get(info.family, info.family)
            bits = f" \u00b7 {info.bits}-bit" if info.bits else ""
            self.model_label.setText(f"{info.name} \u00b7 {family} \u00b7 {info.backend}{bits}")
            self.model_label.setToolTip(f"{self.model_label.text()}\n{info.source}")

    def set_state(self, state: str) -> None:
        """Show the session state: "Captioning" while running, "Paused" while paused, "Waiting for an input" while
        running with no input to capture (lost, none to fall back to), "Waiting for the sound server" ("server")
        while the server does not answer, nothing otherwise."""
        text = {
            "running": "\u25cf Captioning",
            "paused": "\u275a\u275a Paused",
            "waiting": "\u25cc Waiting for an input",
            "server": "\u25cc Waiting for the sound server",
        }.get(state, "")
        self.state_label.setText(text)
        self.state_label.setProperty("state", state)
        self.state_label.style().unpolish(self.state_label)
        self.state_label.style().polish(self.state_label)
        self.state_label.setAccessibleName(text.split(" ", 1)[-1] if text else "")
        self.state_label.setVisible(bool(text))
        if state == "paused":  # its backlog was transcribed on pausing: "can't keep up" no longer holds
            self.keepup_label.hide()

    def end_session(self) -> None:
        """The session ended: the keep-up warning no longer applies, and its input is not what a Source chosen
        meanwhile captures (the next start names its own)."""
        self.keepup_label.hide()
        self.set_input("")

    def set_input(self, description: str) -> None:
        """Name the session's audio input ("" names none)."""
        self.input_label.setText(f"Input: {description}" if description else "")
        self.input_label.setToolTip(self.input_label.text())

    def set_elapsed(self, seconds: float) -> None:
        self.elapsed_label.setText(clock(seconds))

    def reset_session(self) -> None:
        """A session starts: nothing of the last one is shown (its input stayed after a start that failed), nor an
        old message ("Stopped; ...", "Model ... is ready", which also hid the input's name)."""
        self.clearMessage()
        self.set_input("")
        self._latency = None
        self.latency_label.setText("Latency \u2013")
        self.keepup_label.hide()
        self.invalid_label.hide()
        self.set_elapsed(0)

    def set_stats(self, stats: Stats) -> None:
        """Show latency (smoothed), the keep-up state (backlog over 2 s or any dropped audio) and any
        invalid (NaN/inf) audio the engine replaced by silence."""
        if stats.invalid_samples:
            from engine.audio.finite import describe, span_text

            self.invalid_label.setText(f"\u26a0 {span_text(stats.invalid_samples)} of invalid audio silenced")
            self.invalid_label.setToolTip(describe(stats.invalid_samples) + " The input device or file is faulty.")
            self.invalid_label.show()
        if stats.latency_s is not None:
            self._latency = stats.latency_s if self._latency is None else 0.8 * self._latency + 0.2 * stats.latency_s
            self.latency_label.setText(f"Latency {self._latency:.1f} s")
        behind = stats.backlog_s > BACKLOG_WARN_S
        if stats.dropped_s > 0 or behind:
            parts = []
            if behind:
                parts.append(f"{stats.backlog_s:.1f} s behind")
            if stats.dropped_s > 0:
                parts.append(f"{stats.dropped_s:.1f} s of audio dropped")
            detail = ", ".join(parts)
            self.keepup_label.setText("\u26a0 Can't keep up")
            weights = "8-bit weights (Model \u25b8 Weights), " if self._float_model else ""
            self.keepup_label.setToolTip(
                f"{detail[0].upper()}{detail[1:]}. The model is slower than real time on this machine; try "
                f"{weights}a smaller model or another backend."
            )
            self.keepup_label.setAccessibleName(f"Can't keep up: {detail}")
            self.keepup_label.show()
        else:
            self.keepup_label.hide()
