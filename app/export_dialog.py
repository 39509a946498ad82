"""The export dialog: pick a format (SRT, WebVTT, TXT with or without timestamps, JSON) and a file.

The file is written atomically by ``engine.transcript``; when that fails (an unwritable folder, a full
disk) the dialog shows the one-sentence reason and stays open, so nothing is lost. A file that exists already
is replaced only after the user confirms (two formats share ``.txt``, so switching between them would
otherwise overwrite the earlier export silently).
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Sequence
from pathlib import Path

from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app import questions
from app.export import FORMATS, ExportFormat, export, format_by_key, render
from engine.errors import os_reason, user_message
from engine.events import Line

log = logging.getLogger(__name__)

PREVIEW_LINES = 12
TITLE_BYTES = 160  # of a file name offered from a session's title; the date and extension add ~20


SUFFIXES = {f.suffix for f in FORMATS}  # the extensions a transcript file name may end in


def default_file_name(fmt: ExportFormat, started: str = "", title: str = "") -> str:
    """``livecap-YYYY-MM-DD-HHMM`` plus the format's suffix: the time ``started`` (ISO 8601, a kept session's
    start) when it reads as one, else now; a session's ``title`` ("Board meeting") in place of "livecap", with
    what no file system takes (separators, ``<>:"|?*``, control characters) as spaces, at most 80 characters and
    ``TITLE_BYTES`` bytes of UTF-8 (file names hold 255 bytes: 80 kanji are 240)."""
    try:
        when = time.strptime(started[:16], "%Y-%m-%dT%H:%M")
    except ValueError:
        when = time.localtime()
    name = " ".join(re.sub(r'[<>:"/\\|?*\x00-\x1f\x7f]', " ", title).split())[:80]
    name = name.encode(errors="ignore")[:TITLE_BYTES].decode(errors="ignore")  # a character cut in two goes
    name = " ".join(name.rstrip("\u200d\ufe0e\ufe0f").split()).strip(" .")  # and a joiner left at the cut
    return (f"{name} " if name else "livecap-") + time.strftime("%Y-%m-%d-%H%M", when) + fmt.suffix


def with_format(name: str, fmt: ExportFormat) -> str:
    """``name`` for ``fmt``: a transcript extension swapped for ``fmt``'s, any other name given it as well
    ("meeting 3.5.2026" keeps its ".2026"); a folder (ending in a separator) is left as it is."""
    if not name or name.endswith(("/", os.sep)):
        return name
    stem, ext = os.path.splitext(name)
    return (stem if ext.lower() in SUFFIXES else name) + fmt.suffix


class ExportDialog(QDialog):
    """Exports ``lines`` (of ``audio_end`` seconds of audio, when known: no time written passes it); the file
    name offered carries the time ``started`` (a kept session's start), else now, and its ``title``. After an
    accepted ``exec()``, ``saved_path`` and ``format`` say what was written."""

    def __init__(
        self,
        lines: Sequence[Line],
        *,
        folder: str,
        fmt_key: str = "srt",
        parent: QWidget | None = None,
        audio_end: float | None = None,
        started: str = "",
        title: str = "",
    ) -> None:
        super().__init__(parent)
        self.setObjectName("exportDialog")
        self.setWindowTitle("Export transcript")
        self.setMinimumWidth(560)
        self._lines = list(lines)
        self._spoken = sum(1 for line in self._lines if line.text.strip())  # blank Lines give no cue, no text
        self._audio_end = audio_end
        self.saved_path: Path | None = None
        self._confirmed: Path | None = None  # chosen in the file dialog, which asked about replacing it

        self.format_combo = QComboBox(self)
        self.format_combo.setObjectName("exportFormat")
        for fmt in FORMATS:
            self.format_combo.addItem(fmt.label, fmt.key)
        self.path_edit = QLineEdit(self)
        self.path_edit.setObjectName("exportPath")
        self.path_edit.setAccessibleName("File")
        self.format_combo.setAccessibleName("Format")
        browse = QPushButton("Browse\u2026", self)
        browse.setAccessibleName("Choose the file")
        browse.clicked.connect(self._browse)
        path_row = QHBoxLayout()
        path_row.addWidget(self.path_edit, 1)
        path_row.addWidget(browse)

        self.summary = QLabel(self)
        self.preview = QPlainTextEdit(self)
        self.preview.setObjectName("exportPreview")
        self.preview.setReadOnly(True)
        self.preview.setMaximumBlockCount(200)
        self.preview.setMinimumHeight(160)
        self.preview.setAccessibleName("Preview")
        self.preview.setTabChangesFocus(True)
        self.error_label = QLabel(self)
        self.error_label.setObjectName("exportError")
        self.error_label.setWordWrap(True)
        self.error_label.setProperty("role", "error")  # coloured by the theme's style sheet (QLabel[role="error"])
        self.error_label.hide()

        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel, self)
        self.export_button = buttons.addButton("Export", QDialogButtonBox.ButtonRole.AcceptRole)
        self.export_button.setObjectName("exportButton")
        self.export_button.setDefault(True)
        self.export_button.setEnabled(self._spoken > 0)  # nothing to export: no empty file (players refuse an SRT)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)

        form = QFormLayout()
        form.addRow("Format", self.format_combo)
        form.addRow("File", path_row)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.summary)
        layout.addWidget(self.preview, 1)
        layout.addWidget(self.error_label)
        layout.addWidget(buttons)

        fmt = format_by_key(fmt_key)
        self.format_combo.setCurrentIndex(FORMATS.index(fmt))
        self.path_edit.setText(str(Path(folder or Path.home()) / default_file_name(fmt, started, title)))
        self.format_combo.currentIndexChanged.connect(self._format_changed)
        self._update_preview()

    @property
    def format(self) -> ExportFormat:
        return FORMATS[self.format_combo.currentIndex()]

    def path(self) -> Path:
        return Path(self.path_edit.text().strip()).expanduser()

    def accept(self) -> None:
        """Write the file; on failure show why and stay open."""
        if not self._spoken:
            return
        if not self.path_edit.text().strip():
            self._show_error("Choose a file name first.")
            return
        try:  # is_dir / is_file raise for a name the file system refuses (too long: OSError 36)
            suffix = self.path().suffix
            if not any(c.isalpha() for c in suffix) and not self.path().is_dir():  # "notes", "meeting 3.5.2026": a
                typed = self.path_edit.text().strip()  # file is known by its extension (".2026" is none)
                self.path_edit.setText(with_format(typed.rstrip(".") if typed.endswith(".") else typed, self.format))
            path = self.path()
            ext = path.suffix.lower()
            if ext in SUFFIXES and ext != self.format.suffix:  # SRT written into notes.txt, without a word
                self._show_error(
                    f"The file name ends in {path.suffix} but the format is {self.format.label}; "
                    "change the name or the format."
                )
                return
            if path.is_file() and path != self._confirmed and not self.confirm_replace(path):
                return
        except OSError as exc:
            self._show_error(f"The transcript could not be saved to {self.path()}: {os_reason(exc)}.")
            return
        try:
            export(self._lines, path, self.format, self._audio_end)
        except Exception as exc:  # ExportError, or anything else: one sentence, stay open
            log.warning("export failed: %s", path, exc_info=True)
            self._show_error(user_message(exc, f"The transcript could not be saved to {path}"))
            return
        self.saved_path = path
        super().accept()

    def confirm_replace(self, path: Path) -> bool:
        """Ask whether to replace the existing file ``path``."""
        text = f"{path.name} already exists in {path.parent}. Replace it with this {self.format.label} export?"
        return questions.ask(self, "Replace the file?", text)

    def _show_error(self, text: str) -> None:
        self.error_label.setText(text)
        self.error_label.show()

    def _format_changed(self) -> None:
        fmt = self.format
        text = self.path_edit.text().strip()
        if text:
            self.path_edit.setText(with_format(text, fmt))
        self.error_label.hide()
        self._update_preview()

    def _update_preview(self) -> None:
        n = self._spoken
        self.summary.setText(f"{n} line{'s' if n != 1 else ''}" + (" \u2014 preview:" if n else " to export."))
        try:
            spoken = [line for line in self._lines if line.text.strip()]  # blank Lines give no text
            text = render(spoken[:PREVIEW_LINES], self.format, self._audio_end)
        except Exception as exc:  # a preview must never break the dialog
            text = user_message(exc, "No preview")
        if n > PREVIEW_LINES:
            text = text.rstrip("\n") + "\n\u2026"
        self.preview.setPlainText(text)

    def _browse(self) -> None:
        fmt = self.format
        path, _ = QFileDialog.getSaveFileName(
            self, "Export transcript", str(self.path()), f"{fmt.label} (*{fmt.suffix});;All files (*)"
        )
        if path:
            self.path_edit.setText(path)
            self._confirmed = self.path()
