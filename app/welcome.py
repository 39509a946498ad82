"""The first-run welcome: shown in place of the captions while no model is loaded.

It names the model recommended for this computer (``engine.catalog.recommend``) with its download size and
languages, and offers one **Download** button (progress, speed and time left inline, Cancel; a cancelled
download resumes), "Add a model folder..." and "More models...". A failed download is one plain sentence
(``app.hub_messages``): when the hub cannot be reached it says what to check and that a folder on disk works
offline. When the recommended model is on this computer the button reads "Use ..." instead.

The panel does not load models itself: it emits ``model_ready(source)`` (the main window loads it, after
which the caption view replaces the welcome and Start is one key away), ``add_folder_requested`` and
``more_models_requested``.
"""

from __future__ import annotations

import logging
from html import escape
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFont
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from app.downloads import DownloadJob, progress_text
from app.hub_messages import download_problem, offline_text
from engine import hub, install
from engine.catalog import Catalog, CatalogEntry, Machine, load_catalog, recommend
from engine.errors import LivecapError

log = logging.getLogger(__name__)

TITLE = "Welcome to livecap"
CARD_WIDTH = 620
INTRO = (
    "livecap shows live captions of what your computer plays (a call, a video) or what is said into a "
    "microphone. Everything runs on this computer; no audio leaves it. To begin, livecap needs a speech model."
)


def languages_text(entry: CatalogEntry) -> str:
    """``"English only"`` or ``"13 languages"``."""
    if tuple(entry.languages) == ("en",):
        return "English only"
    n = len(entry.languages)
    return f"{n} language{'s' if n != 1 else ''}" if n else ""


class WelcomePanel(QWidget):
    """Welcome and first download. ``machine``/``catalog`` default to this computer and the app's catalog."""

    model_ready = Signal(str)  # a model on this computer (hub repo id) to load
    add_folder_requested = Signal()
    more_models_requested = Signal()

    def __init__(
        self, parent: QWidget | None = None, *, machine: Machine | None = None, catalog: Catalog | None = None
    ) -> None:
        super().__init__(parent)
        self.setObjectName("welcomePanel")
        self.setAccessibleName("Welcome")
        self._machine = machine
        self._catalog = catalog
        self.entry: CatalogEntry | None = None
        self.reason = ""
        self.state: install.LocalModel | None = None
        self.job: DownloadJob | None = None
        self._last: hub.Progress | None = None
        self._cancel_had_focus = False  # Cancel had the keyboard focus when it was pressed (see cancel)
        self._ready: str | None = None  # the downloaded model, announced once its job has finished
        self._offered: CatalogEntry | None = None  # a model asked for by name (``offer``), not the recommendation
        self._no_catalog = ""  # why the app's list of models cannot be read, when it cannot
        self._build()
        self.refresh()

    # -- layout -------------------------------------------------------------------------------------
    def _build(self) -> None:
        self.title = QLabel(TITLE, self)
        self.title.setObjectName("welcomeTitle")
        font = QFont(self.title.font())
        font.setPointSizeF(font.pointSizeF() * 1.6)
        font.setBold(True)
        self.title.setFont(font)
        self.intro = _wrapping(QLabel(INTRO, self))

        self.model_label = _wrapping(QLabel(self))
        self.model_label.setObjectName("welcomeModel")
        self.model_label.setTextFormat(Qt.TextFormat.RichText)
        self.reason_label = _wrapping(QLabel(self))
        self.reason_label.setObjectName("welcomeReason")

        self.download_button = QPushButton("Download", self)
        self.download_button.setObjectName("welcomeDownload")
        self.download_button.setDefault(True)
        self.download_button.clicked.connect(self._primary)
        self.cancel_button = QPushButton("Cancel", self)
        self.cancel_button.setObjectName("welcomeCancel")
        self.cancel_button.setAccessibleName("Cancel the download")
        self.cancel_button.clicked.connect(self.cancel)
        self.cancel_button.hide()
        self.progress_bar = QProgressBar(self)
        self.progress_bar.setObjectName("welcomeProgress")
        self.progress_bar.setAccessibleName("Download progress")
        self.progress_bar.setRange(0, 1000)
        self.progress_bar.setTextVisible(False)
        self.progress_bar.setMaximumHeight(14)
        self.progress_bar.hide()
        self.progress_label = _wrapping(QLabel(self))
        self.progress_label.setObjectName("welcomeProgressText")
        self.progress_label.hide()
        self.message_label = _wrapping(QLabel(self))
        self.message_label.setObjectName("welcomeMessage")
        self.message_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.message_label.hide()

        self.folder_button = QPushButton("Add a model folder\u2026", self)
        self.folder_button.setObjectName("welcomeFolder")
        self.folder_button.setToolTip("Use a model that is already on this computer (works offline)")
        self.folder_button.clicked.connect(self.add_folder_requested)
        self.more_button = QPushButton("More models\u2026", self)
        self.more_button.setObjectName("welcomeMore")
        self.more_button.setToolTip("All models: other sizes, languages and gated models")
        self.more_button.clicked.connect(self.more_models_requested)

        card = QFrame(self)
        card.setObjectName("welcomeCard")
        card.setMaximumWidth(CARD_WIDTH)
        card.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        box = QVBoxLayout(card)
        box.setSpacing(10)
        box.addWidget(self.title)
        box.addWidget(self.intro)
        box.addSpacing(6)
        box.addWidget(self.model_label)
        box.addWidget(self.reason_label)
        row = QHBoxLayout()
        row.addWidget(self.download_button)
        row.addWidget(self.progress_bar, 1)
        row.addWidget(self.cancel_button)
        row.addStretch(0)
        box.addLayout(row)
        box.addWidget(self.progress_label)
        box.addWidget(self.message_label)
        box.addSpacing(6)
        more = QHBoxLayout()
        more.addWidget(self.folder_button)
        more.addWidget(self.more_button)
        more.addStretch(1)
        box.addLayout(more)

        inner = QWidget(self)
        centre = QVBoxLayout(inner)
        centre.setContentsMargins(24, 24, 24, 24)
        centre.addStretch(1)
        across = QHBoxLayout()
        across.addStretch(1)
        across.addWidget(card, 100)  # as wide as it may be (CARD_WIDTH), so the wrapped text gets its height
        across.addStretch(1)
        centre.addLayout(across)
        centre.addStretch(2)
        scroll = QScrollArea(self)
        scroll.setObjectName("welcomeScroll")
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        scroll.setWidget(inner)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(scroll)

    # -- state --------------------------------------------------------------------------------------
    @property
    def busy(self) -> bool:
        """A download is running (until its ``finished`` signal has been handled)."""
        return self.job is not None and self.job.running

    def refresh(self) -> None:
        """Work out the recommendation and whether it is on this computer already; update the texts. What the last
        download said (its progress line and bar, its problem) goes: the welcome shown again later (say after a
        model failed to load) is about the model as it is now. Nothing changes while a download runs."""
        if self.busy:
            return
        self.progress_bar.hide()
        self.progress_label.hide()
        self._message("")
        self._rescan()

    def _rescan(self) -> None:
        """``refresh`` keeping what the download that just ended said (``_on_finished``)."""
        if self._offered is not None:
            self.entry = self._offered
            self.reason = f"{self._offered.name} was chosen, and it is not on this computer yet."
        else:
            try:
                catalog = self._catalog or load_catalog()
            except LivecapError as exc:  # livecap's own list of models: an installation problem, said as such
                log.warning("the model catalog cannot be read: %s", exc)
                self.entry, self.reason, self._no_catalog = None, "", str(exc)
            else:
                self._no_catalog = ""
                try:
                    rec = recommend(self._machine or Machine.current(), catalog)
                except (KeyError, LivecapError):
                    log.warning("no model recommendation", exc_info=True)
                    self.entry, self.reason = None, ""
                else:
                    self.entry, self.reason = rec.entry, rec.reason
        self.state = None
        if self.entry is not None:
            try:
                self.state = install.local_state(self.entry.repo_ids, self.entry.revision, self.entry.required_files)
            except Exception:  # noqa: BLE001 - an unreadable cache only means "not installed"
                log.warning("scanning the model cache failed", exc_info=True)
        self._update()

    def offer(self, entry: CatalogEntry) -> None:
        """Offer ``entry`` (a model asked for by name, e.g. ``--model`` or the saved one, not on this computer)
        in place of the recommendation: its download with progress and Cancel, then ``model_ready``."""
        self._offered = entry
        self.refresh()

    @property
    def installed(self) -> bool:
        return self.state is not None and self.state.complete

    def _update(self) -> None:
        e = self.entry
        if e is None and self._no_catalog:
            self.model_label.setText(
                f"{escape(self._no_catalog, quote=False)} The list of models comes with livecap: reinstalling "
                "it brings it back; meanwhile a model folder on this computer works "
                "(\u201cAdd a model folder\u2026\u201d)."
            )
            self.reason_label.hide()
            self.download_button.hide()
            return
        if e is None:
            self.model_label.setText(
                "No model is recommended for this computer; choose one with "
                "\u201cMore models\u2026\u201d, or add a model folder."
            )
            self.reason_label.hide()
            self.download_button.hide()
            return
        size = hub.format_bytes(e.download_bytes)
        heading = "The chosen model" if self._offered is not None else "Recommended for this computer"
        self.model_label.setText(
            f"{heading}:<br><b>{escape(e.name, quote=False)}</b> \u00b7 "
            f"{escape(languages_text(e), quote=False)} \u00b7 {size} download"
        )
        self.reason_label.setText(self.reason)
        self.reason_label.show()
        self.download_button.show()
        if self.installed:
            text, tip = f"Use {e.name}", "This model is on this computer already"
        else:
            kept = (self.state.size_on_disk + self.state.partial_bytes) if self.state is not None else 0
            if self.state is not None and self.state.partial_bytes:  # what is left, not the whole model again
                text = f"Resume download ({hub.format_bytes(max(e.download_bytes - kept, 0))} left)"
            else:
                text = f"Download ({size})"
            tip = f"Download {e.name} ({size}) from {hub.endpoint()}"
        self.download_button.setText(text)
        self.download_button.setToolTip(tip)
        self.download_button.setAccessibleName(text if self.installed else f"{text} {e.name}, {size}")
        offline = hub.offline() and not self.installed
        self.download_button.setEnabled(not self.busy and not offline)
        if offline:
            self._message(offline_text())

    def focus_first(self) -> None:
        """Put the keyboard focus on the main button (Download / Use), else on "Add a model folder..."."""
        for button in (self.download_button, self.folder_button):
            if button.isVisibleTo(self) and button.isEnabled():
                button.setFocus(Qt.FocusReason.OtherFocusReason)
                return

    def _message(self, text: str) -> None:
        self.message_label.setText(text)
        self.message_label.setVisible(bool(text))
        self.message_label.setAccessibleName(text)

    def message(self) -> str:
        """The sentence shown under the button (empty when none)."""
        return self.message_label.text() if not self.message_label.isHidden() else ""

    # -- actions ------------------------------------------------------------------------------------
    def _primary(self) -> None:
        if self.entry is None:
            return
        if self.installed:
            self.model_ready.emit(self.entry.repo_id)
        else:
            self.start_download()

    def start_download(self) -> DownloadJob | None:
        """Download the recommended model (resuming what an earlier try left)."""
        e = self.entry
        if e is None or self.busy:
            return None
        if hub.offline():
            self._message(offline_text())
            return None
        self._message("")
        job = DownloadJob(
            e.repo_id,
            revision=e.revision,
            allow_patterns=e.allow_patterns,
            aliases=e.aliases,
            required=e.required_files,
        )
        job.progress.connect(self._on_progress)
        job.succeeded.connect(self._on_succeeded)
        job.failed.connect(self._on_failed)
        job.finished.connect(self._on_finished)
        self.job, self._last = job, None
        self.progress_bar.setValue(0)
        self.progress_bar.show()
        self.progress_label.setText(f"Preparing the download of {e.name}\u2026")
        self.progress_label.show()
        self.download_button.hide()
        self.cancel_button.setEnabled(True)
        self.cancel_button.show()
        job.start()
        self.cancel_button.setFocus(Qt.FocusReason.OtherFocusReason)
        return job

    def cancel(self) -> None:
        """Stop the download; what was downloaded is kept for the next try."""
        if self.busy and self.job is not None:
            self.job.cancel()
            # disabling the focused button moves the focus on (to "Add a model folder..."): remember it was here
            self._cancel_had_focus = self.cancel_button.hasFocus()
            self.cancel_button.setEnabled(False)
            self.progress_label.setText("Stopping\u2026")

    def _on_progress(self, p: hub.Progress) -> None:
        self._last = p
        self.progress_bar.setValue(int(p.fraction * 1000))
        if self.job is not None and not self.job.token.cancelled:
            self.progress_label.setText(progress_text(p))

    def _on_succeeded(self, path: Path) -> None:
        e = self.entry
        self.progress_bar.setValue(1000)
        self.progress_label.setText(f"{e.name if e else 'The model'} is downloaded; loading it\u2026")
        self._ready = e.repo_id if e is not None else None

    def _on_failed(self, message: str, exc: object) -> None:
        name = self.entry.name if self.entry is not None else "the model"
        log.info("welcome download failed: %s", message)
        kept = hub.kept_bytes(self.entry.repo_id) if self.entry is not None else 0
        size, resume = hub.format_bytes(kept), "\u201cResume download\u201d continues there."
        if isinstance(exc, hub.DownloadCancelled):
            self.progress_label.setText(
                f"Download stopped ({size} kept); {resume}" if kept else "Download stopped; nothing was kept."
            )
        else:
            self.progress_label.setText(f"{size} kept; {resume}")  # what the next try starts from (a network drop)
            self.progress_label.setVisible(bool(kept))
            self._message(download_problem(exc, name))
        self.progress_bar.hide()
        self._ready = None

    def _on_finished(self) -> None:
        ready, self._ready = self._ready, None
        had_focus = self.cancel_button.hasFocus() or self._cancel_had_focus
        self._cancel_had_focus = False
        self.cancel_button.hide()
        self._rescan()
        if had_focus and self.download_button.isEnabled():  # keyboard users stay on the button they used
            self.download_button.setFocus(Qt.FocusReason.OtherFocusReason)
        if ready:
            self.model_ready.emit(ready)


def _wrapping(label: QLabel) -> QLabel:
    label.setWordWrap(True)
    return label
