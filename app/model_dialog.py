"""The model dialog: pick, download, resume, delete and add speech models.

It lists the catalog (``resources/catalog.json``) with each model's installed state and size on disk (a
scan of the Hugging Face cache), models other tools put in that cache, and local folders; recommends one
for this machine; downloads with a progress bar (bytes, speed, time left) on a worker thread, with cancel
and resume; deletes; opens the model's folder; and adds a hub repo id or a local folder once the loader
has accepted it (also on a worker thread). A token field serves gated models (passed per download, or
saved where huggingface_hub keeps its login token when "Remember" is ticked; never logged). With
``HF_HUB_OFFLINE`` set the dialog says so and offers only what is on disk.

``choose_model(parent, settings)`` runs the dialog and returns the chosen source (a hub repo id or a local
folder) or None; the choice is remembered under the settings key ``model/source`` (not with ``remember=False``:
a model chosen for a re-transcription is not the live one).
"""

from __future__ import annotations

import html
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PySide6.QtCore import QEvent, QObject, QSettings, Qt, QUrl
from PySide6.QtGui import QDesktopServices, QFont
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFrame,
    QGridLayout,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app import placement, questions
from app.banner import Banner
from app.downloads import CheckJob, DownloadJob, Job, progress_text
from app.hub_messages import download_problem
from app.settings import Key
from engine import formats, hub, install
from engine.catalog import Catalog, CatalogEntry, Machine, chip_fit, load_catalog, recommend
from engine.errors import LivecapError

log = logging.getLogger(__name__)

TOKEN_URL = "https://huggingface.co/settings/tokens"
REPO_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*/[\w.\-]+$")
LANGUAGE_NAMES = {
    "en": "English",
    "de": "German",
    "fr": "French",
    "es": "Spanish",
    "it": "Italian",
    "pt": "Portuguese",
    "nl": "Dutch",
    "ru": "Russian",
    "ar": "Arabic",
    "hi": "Hindi",
    "zh": "Chinese",
    "ja": "Japanese",
    "ko": "Korean",
}
FAMILY_NAMES = {"moonshine_streaming": "Moonshine Streaming", "voxtral_realtime": "Voxtral Realtime"}
_LIVE_JOBS: set[Job] = set()  # jobs outlive a closed dialog until their thread ends


@dataclass
class Row:
    """One line of the list. ``source`` is what ``choose_model`` returns for it."""

    kind: str  # "catalog" | "hub" | "folder"
    source: str
    name: str
    entry: CatalogEntry | None = None
    state: install.LocalModel | None = None
    folder_ok: bool = False
    folder_problem: str = ""
    family: str = ""  # a folder's model family, when the loader recognises it

    @property
    def repo_ids(self) -> list[str]:
        return list(self.entry.repo_ids) if self.entry else [self.source]

    @property
    def installed(self) -> bool:
        if self.kind == "folder":
            return self.folder_ok
        return self.state is not None and self.state.complete

    @property
    def path(self) -> Path | None:
        if self.kind == "folder":
            return Path(self.source)
        return self.state.path if self.state is not None and self.state.path is not None else None

    @property
    def partial(self) -> int:
        return self.state.partial_bytes if self.state is not None and not self.state.complete else 0

    @property
    def plain_name(self) -> str:
        """The name without the list's "(recommended)" tag, for sentences."""
        return self.name.replace(" (recommended)", "").strip()

    def is_about(self, source: str | None) -> bool:
        """Whether ``source`` (a repo id, any alias, or this row's folder) names this row."""
        if not source:
            return False
        if self.kind == "folder":
            return Path(self.source) == Path(source).expanduser()
        return source.lower() in {r.lower() for r in self.repo_ids}


# -- settings ----------------------------------------------------------------------------------------------


def _read_source(settings: Any) -> str:
    if settings is None:
        settings = QSettings()
    if hasattr(settings, "set_value"):  # app.settings.Settings
        return str(settings.value(Key.MODEL_SOURCE) or "")
    value = settings.value(Key.MODEL_SOURCE.key)
    return str(value) if value else ""


def _write_source(settings: Any, source: str) -> None:
    if settings is None:
        settings = QSettings()
    if hasattr(settings, "set_value"):
        settings.set_value(Key.MODEL_SOURCE, source)
    else:
        settings.setValue(Key.MODEL_SOURCE.key, source)
    try:
        settings.sync()
    except AttributeError:  # pragma: no cover - a settings stand-in without sync
        pass


def languages_text(entry: CatalogEntry | None) -> str:
    """``"English"`` or ``"13 languages"`` for a catalog entry ("" for None)."""
    if entry is None or not entry.languages:
        return ""
    if len(entry.languages) == 1:
        return LANGUAGE_NAMES.get(entry.languages[0], entry.languages[0])
    return f"{len(entry.languages)} languages"


# -- the dialog ----------------------------------------------------------------------------------------------


class ModelDialog(QDialog):
    """After ``exec()`` returns Accepted, ``chosen`` is the source to load (repo id or folder); with ``remember``
    it is also stored in ``settings``."""

    COLUMNS = ("Model", "Languages", "Download", "Memory", "On this computer")

    def __init__(
        self,
        parent: QWidget | None = None,
        settings: Any = None,
        *,
        catalog: Catalog | None = None,
        machine: Machine | None = None,
        remember: bool = True,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("modelDialog")
        self.setWindowTitle("Speech models")
        # at 560 the texts of the selected model overlapped its buttons; a smaller screen still gets them all
        placement.limit_minimum(self, 800, 640)
        placement.fit(self, 920, 660, share=1.0)
        self._settings = settings
        self._remember = remember
        self.chosen: str | None = None
        self.machine = machine or Machine.current()
        try:
            self.catalog = catalog or load_catalog()
        except LivecapError as e:  # the app still works with local folders and cached repos
            log.warning("model catalog unavailable: %s", e)
            self.catalog = Catalog(())
            self._catalog_error = str(e)
        else:
            self._catalog_error = ""
        try:
            self.recommendation = recommend(self.machine, self.catalog) if len(self.catalog) else None
        except (KeyError, LivecapError):
            self.recommendation = None
        self.rows: list[Row] = []
        self._folders: list[str] = []  # local folders accepted in this dialog (plus the saved one)
        self._pending: list[str] = []  # custom hub ids being downloaded
        self._job: DownloadJob | None = None
        self._busy = False
        self._check: CheckJob | None = None
        self._error_source: str | None = None  # the row the error label is about
        self._progress_source: str | None = None  # the row the progress bar and its label are about
        self._progress_bar_on = False  # the bar is part of what is said about it (not after a delete)
        self._last_progress: hub.Progress | None = None
        self._question: QMessageBox | None = None  # the question shown now (``_confirm``)
        self._asking_to_stop = False  # that question is "Stop downloading ...?" (moot once the download ends)
        saved = _read_source(settings)
        self.in_use = saved  # the model the app uses: the main window saves a model once it has loaded
        if saved and Path(saved).expanduser().is_dir():
            self._folders.append(str(Path(saved).expanduser()))
        self._build()
        self.refresh()
        self._select_initial(saved)

    # -- layout -----------------------------------------------------------------------------------------------
    def _build(self) -> None:
        self.offline_banner = Banner(self)
        self.offline_banner.close_button.hide()

        self.recommendation_label = QLabel(self)
        self.recommendation_label.setObjectName("recommendation")
        self.recommendation_label.setWordWrap(True)
        self.recommendation_label.setTextFormat(Qt.TextFormat.RichText)

        self.tree = QTreeWidget(self)
        self.tree.setObjectName("modelList")
        self.tree.setAccessibleName("Speech models")
        self.tree.setColumnCount(len(self.COLUMNS))
        self.tree.setHeaderLabels(list(self.COLUMNS))
        self.tree.setRootIsDecorated(False)
        self.tree.setUniformRowHeights(True)
        self.tree.setAlternatingRowColors(True)
        self.tree.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        header = self.tree.header()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for col in range(1, len(self.COLUMNS)):
            header.setSectionResizeMode(col, QHeaderView.ResizeMode.ResizeToContents)
        roomy = self.minimumHeight() >= 640  # a short screen: the list and the details get less room, not overlap
        self.tree.setMinimumHeight(170 if roomy else 96)  # a short screen: fewer rows show, the list scrolls
        self.tree.currentItemChanged.connect(lambda *_: self._update_selection())
        self.tree.itemDoubleClicked.connect(lambda *_: self._use() if self.use_button.isEnabled() else None)

        self.details = QLabel(self)
        self.details.setObjectName("modelDetails")
        self.details.setWordWrap(True)
        self.details.setTextFormat(Qt.TextFormat.RichText)
        self.details.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self.details.setTextInteractionFlags(Qt.TextInteractionFlag.TextBrowserInteraction)
        self.details.setOpenExternalLinks(True)
        self.details.setAccessibleName("Selected model details")
        self.details_area = QScrollArea(self)  # a long description scrolls instead of running under the buttons
        self.details_area.setWidget(self.details)
        self.details_area.setWidgetResizable(True)
        self.details_area.setFrameShape(QFrame.Shape.NoFrame)
        self.details_area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.details_area.setMinimumHeight(104 if roomy else 48)
        self.details_area.setObjectName("modelDetailsArea")
        self.details_area.setAccessibleName("Selected model details (scrolls)")
        self.details_area.viewport().setAutoFillBackground(False)
        self.details.setAutoFillBackground(False)

        self.download_button = QPushButton("Download", self)
        self.download_button.setObjectName("downloadButton")
        self.download_button.clicked.connect(self._download_selected)
        self.cancel_button = QPushButton("Cancel download", self)
        self.cancel_button.setObjectName("cancelButton")
        self.cancel_button.clicked.connect(self._cancel)
        self.delete_button = QPushButton("Delete\u2026", self)
        self.delete_button.setObjectName("deleteButton")
        self.delete_button.clicked.connect(self._delete_selected)
        self.open_button = QPushButton("Open folder", self)
        self.open_button.setObjectName("openFolderButton")
        self.open_button.clicked.connect(self._open_folder)
        actions = QHBoxLayout()
        for b in (self.download_button, self.cancel_button, self.delete_button, self.open_button):
            actions.addWidget(b)
        actions.addStretch(1)

        self.progress_bar = QProgressBar(self)
        self.progress_bar.setObjectName("downloadProgress")
        self.progress_bar.setRange(0, 1000)
        self.progress_bar.setTextVisible(False)
        self.progress_bar.setMaximumHeight(14)
        self.progress_label = QLabel(self)
        self.progress_label.setObjectName("downloadStatus")
        progress_row = QHBoxLayout()
        progress_row.addWidget(self.progress_bar, 1)
        progress_row.addWidget(self.progress_label)
        for w in (self.progress_bar, self.progress_label):  # hidden, they keep their room: the buttons stay put
            policy = w.sizePolicy()
            policy.setRetainSizeWhenHidden(True)
            w.setSizePolicy(policy)
            w.hide()

        self.error_label = QLabel(self)
        self.error_label.setObjectName("modelError")
        self.error_label.setWordWrap(True)
        self.error_label.setProperty("role", "error")  # coloured by the theme's style sheet (QLabel[role="error"])
        self.error_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.error_label.hide()

        # Token for gated models.
        self.token_edit = QLineEdit(self)
        self.token_edit.setObjectName("tokenEdit")
        self.token_edit.setEchoMode(QLineEdit.EchoMode.Password)
        self.token_edit.setClearButtonEnabled(True)
        self.token_edit.setAccessibleName("Access token")
        self.remember_token = QCheckBox("Remember on this computer", self)
        self.remember_token.setObjectName("rememberToken")
        self.token_hint = QLabel(self)
        self.token_hint.setObjectName("tokenHint")
        self.token_hint.setTextFormat(Qt.TextFormat.RichText)
        self.token_hint.setOpenExternalLinks(True)
        self.token_hint.setWordWrap(True)
        self.forget_button = QPushButton("Forget saved token", self)
        self.forget_button.setObjectName("forgetToken")
        self.forget_button.clicked.connect(self._forget_token)

        # Custom model: a hub repo id or a local folder.
        self.custom_edit = QLineEdit(self)
        self.custom_edit.setObjectName("customEdit")
        self.custom_edit.setPlaceholderText("owner/name on the Hugging Face hub, or a folder on this computer")
        self.custom_edit.installEventFilter(self)  # Enter adds what was typed (eventFilter), nothing else
        self.custom_edit.setAccessibleName("Add a model: hub id or folder")
        self.browse_button = QPushButton("Browse\u2026", self)
        self.browse_button.setObjectName("browseButton")
        self.browse_button.clicked.connect(self._browse)
        self.add_button = QPushButton("Add", self)
        self.add_button.setObjectName("addCustomButton")
        self.add_button.clicked.connect(self._add_custom)
        self.custom_status = QLabel(self)
        self.custom_status.setObjectName("customStatus")
        self.custom_status.setWordWrap(True)
        self.custom_status.hide()

        more = QGroupBox("Other models and access", self)
        grid = QGridLayout(more)
        grid.setColumnStretch(1, 1)
        grid.addWidget(QLabel("Add model:"), 0, 0)
        grid.addWidget(self.custom_edit, 0, 1)
        grid.addWidget(self.browse_button, 0, 2)
        grid.addWidget(self.add_button, 0, 3)
        grid.addWidget(self.custom_status, 1, 1, 1, 3)
        grid.addWidget(QLabel("Access token:"), 2, 0)
        grid.addWidget(self.token_edit, 2, 1)
        grid.addWidget(self.remember_token, 2, 2, 1, 2)
        grid.addWidget(self.token_hint, 3, 1, 1, 2)
        grid.addWidget(self.forget_button, 3, 3)

        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        self.use_button = self.buttons.addButton("Use this model", QDialogButtonBox.ButtonRole.AcceptRole)
        self.use_button.setObjectName("useButton")
        self.use_button.setDefault(True)
        self.buttons.accepted.connect(self._use)
        self.buttons.rejected.connect(self.reject)

        selected = QGroupBox("Selected model", self)
        selected.setObjectName("selectedModel")
        box = QVBoxLayout(selected)
        box.addWidget(self.details_area, 1)
        box.addLayout(actions)
        box.addLayout(progress_row)
        box.addWidget(self.error_label)

        layout = QVBoxLayout(self)
        layout.addWidget(self.offline_banner)
        layout.addWidget(self.recommendation_label)
        layout.addWidget(self.tree, 1)
        layout.addWidget(selected)
        layout.addWidget(more)
        layout.addWidget(self.buttons)
        self._update_token_hint()

    # -- state ------------------------------------------------------------------------------------------------
    @property
    def offline(self) -> bool:
        return hub.offline()

    @property
    def busy(self) -> bool:
        """A download is running (from the GUI's view: until its ``finished`` signal has been handled)."""
        return self._busy

    def refresh(self) -> None:
        """Rescan the cache and rebuild the list, keeping the selection."""
        keep = self.selected_row().source if self.selected_row() else None
        try:
            scans = hub.scan_models()
        except Exception as e:  # noqa: BLE001 - an unreadable cache must not break the dialog
            log.warning("scanning the model cache failed", exc_info=True)
            scans = {}
            self._show_error(f"The model cache in {hub.cache_dir()} could not be read ({type(e).__name__}).")
        rows: list[Row] = []
        claimed: set[str] = set()
        rec_key = self.recommendation.entry.key if self.recommendation else None
        for e in self.catalog:
            state = install.local_state(e.repo_ids, e.revision, e.required_files, scans)
            name = e.name + (" (recommended)" if e.key == rec_key else "")
            rows.append(Row("catalog", e.repo_id, name, e, state))
            claimed.update(r.lower() for r in e.repo_ids)
        for key, scan in sorted(scans.items()):
            if key in claimed:
                continue
            rows.append(Row("hub", scan.repo_id, scan.repo_id, None, install.local_state(scan.repo_id, scans=scans)))
            claimed.add(key)
        for rid in self._pending:
            if rid.lower() not in claimed:
                rows.append(Row("hub", rid, rid))
        for folder in self._folders:
            problem = install.snapshot_problem(Path(folder))
            rows.append(
                Row(
                    "folder",
                    folder,
                    Path(folder).name or folder,
                    folder_ok=not problem,
                    folder_problem=problem,
                    family=_folder_family(Path(folder)),
                )
            )
        self.rows = rows
        self.tree.blockSignals(True)
        self.tree.clear()
        for i, row in enumerate(rows):
            item = QTreeWidgetItem(self._cells(row))
            item.setData(0, Qt.ItemDataRole.UserRole, i)
            item.setToolTip(0, row.source)
            if row.entry is not None and row.entry.key == rec_key:
                f = QFont(item.font(0))
                f.setBold(True)
                item.setFont(0, f)
            for col in (2, 3):
                item.setTextAlignment(col, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            self.tree.addTopLevelItem(item)
        self.tree.blockSignals(False)
        if keep is not None:
            self.select_source(keep)
        self._update_banner()
        self._update_selection()

    def _cells(self, row: Row) -> list[str]:
        e = row.entry
        if row.kind == "folder":
            family = FAMILY_NAMES.get(row.family, "")
            status = "Local folder" if row.folder_ok else "Local folder, not usable"
            weights = _weights_bytes(Path(row.source))
            return [
                f"{row.name} \u00b7 {family}" if family else row.name,
                self._family_languages(row.family),
                f"{hub.format_bytes(_folder_bytes(Path(row.source)))} on disk",
                f"about {hub.format_bytes(weights)}" if weights else "",
                status,
            ]
        download = hub.format_bytes(e.download_bytes) if e else ""
        memory = hub.format_bytes(e.memory_bytes) if e else ""
        return [row.name, languages_text(e), download, memory, self._status(row)]

    def _status(self, row: Row) -> str:
        job = self._job
        if job is not None and self.busy and job.repo_id.lower() in {r.lower() for r in row.repo_ids}:
            p = self._last_progress
            if job.token.cancelled:
                return "Stopping\u2026"
            return f"Downloading {p.fraction * 100:.0f} %" if p and p.total else "Downloading\u2026"
        s = row.state
        if s is not None and s.complete:
            return f"Installed \u00b7 {hub.format_bytes(s.size_on_disk + s.partial_bytes)}"
        if s is not None and s.partial_bytes:
            return f"Partly downloaded \u00b7 {hub.format_bytes(s.partial_bytes)}"
        if s is not None:
            return "Incomplete"
        if row.entry is not None and row.entry.gated:
            return "Not downloaded (needs a token)"
        return "Not downloaded"

    def _update_banner(self) -> None:
        if self.offline:
            self.offline_banner.show_message(
                "warning",
                "Offline mode: HF_HUB_OFFLINE is set, so nothing can be downloaded and only models "
                "already on this computer can be used. Start livecap without HF_HUB_OFFLINE to "
                "download models.",
            )
        else:
            self.offline_banner.hide()
        rec = self.recommendation
        if rec is None:
            self.recommendation_label.setText(self._catalog_error or "")
            return
        self.recommendation_label.setText(
            f"<b>Recommended for this computer</b> ({_esc(self.machine.describe())}): "
            f"<b>{_esc(rec.entry.name)}</b>. {_esc(rec.reason)}"
        )

    def selected_row(self) -> Row | None:
        item = self.tree.currentItem() if hasattr(self, "tree") else None
        if item is None:
            return None
        i = item.data(0, Qt.ItemDataRole.UserRole)
        return self.rows[i] if isinstance(i, int) and 0 <= i < len(self.rows) else None

    def row_for(self, source: str) -> Row | None:
        """The row for a repo id (aliases included) or a folder."""
        return next((row for row in self.rows if row.is_about(source)), None)

    def select_source(self, source: str) -> bool:
        row = self.row_for(source)
        if row is None:
            return False
        self.tree.setCurrentItem(self.tree.topLevelItem(self.rows.index(row)))
        return True

    def _select_initial(self, saved: str) -> None:
        if saved and self.select_source(saved):
            return
        if self.recommendation is not None and self.select_source(self.recommendation.entry.repo_id):
            return
        if self.rows:
            self.tree.setCurrentItem(self.tree.topLevelItem(0))

    def _update_selection(self) -> None:
        row = self.selected_row()
        if self._error_source is not None and (row is None or row.source != self._error_source):
            self._error_source = None  # the error was about another model
            self.error_label.hide()
        focus = self.focusWidget()
        job_running = self.busy
        mine = bool(
            job_running
            and row is not None
            and row.kind != "folder"
            and self._job.repo_id.lower() in {r.lower() for r in row.repo_ids}
        )
        can_download = (
            row is not None and row.kind != "folder" and not row.installed and not job_running and not self.offline
        )
        self.download_button.setEnabled(can_download)
        self.download_button.setText("Resume download" if row is not None and row.partial else "Download")
        self.download_button.setToolTip("Offline mode (HF_HUB_OFFLINE) is on." if self.offline else "")
        self.cancel_button.setEnabled(mine and not self._job.token.cancelled)
        self.delete_button.setEnabled(row is not None and row.kind != "folder" and row.state is not None and not mine)
        self.open_button.setEnabled(row is not None and row.path is not None and row.path.is_dir())
        self.use_button.setEnabled(row is not None and row.installed)
        self.details.setText(self._details(row) if row is not None else "")
        self._show_progress(row)
        if isinstance(focus, QPushButton) and not focus.isEnabled():
            self._move_focus_from(focus)
        for i, r in enumerate(self.rows):  # keep the status column live
            item = self.tree.topLevelItem(i)
            if item is not None and r.kind != "folder":
                item.setText(4, self._status(r))

    def _set_progress(self, about: str, text: str, per_mille: int | None) -> None:
        """Say ``text`` about the model ``about`` under its buttons, with the progress bar at ``per_mille`` (no bar
        for None); both show while that model is selected (or while nothing is, once it has left the list)."""
        self._progress_source = about
        self._progress_bar_on = per_mille is not None
        if per_mille is not None:
            self.progress_bar.setValue(max(0, min(per_mille, 1000)))
        self.progress_label.setText(text)
        self._show_progress(self.selected_row())

    def _show_progress(self, row: Row | None) -> None:
        about = self._progress_source
        if row is None:  # e.g. a model from the cache just deleted: its row went, the sentence stays
            mine = about is not None and self.row_for(about) is None
        else:
            mine = row.is_about(about)
        self.progress_bar.setVisible(mine and self._progress_bar_on)
        self.progress_label.setVisible(mine)

    def _details(self, row: Row) -> str:
        e = row.entry
        if row.kind == "folder":
            head = f"<b>Local folder</b> {_esc(row.source)}"
            family = FAMILY_NAMES.get(row.family)
            if family:
                langs = self._family_languages(row.family)
                head += f"<br>A {_esc(family)} model" + (f" ({_esc(langs)})." if langs else ".")
            if row.folder_ok:
                return head + "<br>The loader accepts this folder."
            return head + f"<br><b>{_esc(row.folder_problem)}</b>"  # bold: a fixed colour fails some theme
        if e is None:
            lines = [f"<b>{_esc(row.source)}</b> (from the Hugging Face cache, not in livecap's catalog)"]
            if row.state is not None and not row.state.complete and row.state.problem:
                lines.append(_esc(row.state.problem))
            if row.path is not None:
                lines.append(f"Folder: {_esc(str(row.path))}")
            return "<br>".join(lines)
        langs = ", ".join(LANGUAGE_NAMES.get(c, c) for c in e.languages)
        rev = f"revision {e.revision[:10]}" if e.revision else "newest revision"
        also = f" (also {', '.join(e.aliases)})" if e.aliases else ""
        lines = [
            f"<b>{_esc(e.name)}</b>: {_esc(e.description)}",
            f"{_esc(e.repo_id)}{_esc(also)}, {rev} \u00b7 {_esc(e.license)} licence \u00b7 {_esc(e.params)}"
            f" parameters, {_esc(e.precision)}",
            f"Download {hub.format_bytes(e.download_bytes)} \u00b7 needs about "
            f"{hub.format_bytes(e.memory_bytes)} of memory \u00b7 {_esc(langs)}",
        ]
        runs = "; ".join(
            f"{name.upper() if name == 'mlx' else 'NumPy'}: {_esc(text)}" for name, text in e.backends.items()
        )
        if runs:
            lines.append(f"Runs on {runs}.")
        if self.machine.apple_silicon and e.bandwidth_gbs:
            fit = chip_fit(e, self.machine.chip, self.catalog)
            if fit:
                lines.append(f"On this {_esc(self.machine.chip or 'Mac')}: <b>{fit}</b>.")
        if e.gated:
            lines.append(f"Gated model: {_esc(e.gated_note)} (<a href='{hub.endpoint()}/{e.repo_id}'>model page</a>).")
        s = row.state
        if s is not None and s.complete and s.path is not None:
            lines.append(f"Installed in {_esc(str(s.path))}")
        elif s is not None and s.partial_bytes:
            lines.append(f"{hub.format_bytes(s.partial_bytes)} already downloaded; the download resumes from there.")
        elif s is not None and s.problem:
            lines.append(_esc(s.problem))
        return "<br>".join(lines)

    def _family_languages(self, family: str) -> str:
        """What the catalog says about the languages of ``family`` ("English", "13 languages"), or ""."""
        entry = next((e for e in self.catalog if e.family == family), None)
        return languages_text(entry)

    def _show_error(self, text: str, about: str | None = None) -> None:
        """Show ``text`` about the model ``about`` (default: the selected one); it goes when another row is
        selected. "" hides it."""
        row = self.row_for(about) if about else self.selected_row()
        self._error_source = (row.source if row is not None else about) if text else None
        self.error_label.setText(text)
        self.error_label.setVisible(bool(text))

    def _move_focus_from(self, button: QPushButton) -> None:
        """``button`` was just disabled while it had focus: go to the button that continues the task (Cancel
        while downloading, Download or Use after), else the list, never into the token field."""
        for candidate in (self.cancel_button, self.download_button, self.use_button):
            if candidate is not button and candidate.isEnabled() and candidate.isVisible():
                candidate.setFocus(Qt.FocusReason.OtherFocusReason)
                return
        self.tree.setFocus(Qt.FocusReason.OtherFocusReason)

    # -- token --------------------------------------------------------------------------------------------------
    def _token(self) -> str | None:
        typed = self.token_edit.text().strip()
        if typed and self.remember_token.isChecked():
            try:
                hub.save_token(typed)
            except OSError as e:
                self._show_error(
                    f"The token could not be saved ({e.strerror or type(e).__name__}); it is used "
                    "for this download only."
                )
            self._update_token_hint()
        return typed or None

    def _update_token_hint(self) -> None:
        saved = hub.get_token() is not None
        self.token_edit.setPlaceholderText("A saved token is used" if saved else "hf_\u2026 (gated models only)")
        self.forget_button.setEnabled(hub.token_path().is_file())
        self.token_hint.setText(
            f"Needed only for gated models such as the official Voxtral. "
            f"<a href='{TOKEN_URL}'>Create a read token</a>, and accept the model's terms on "
            "its page."
        )

    def _forget_token(self) -> None:
        hub.forget_token()
        self._update_token_hint()

    # -- actions ------------------------------------------------------------------------------------------------
    def _download_selected(self) -> None:
        row = self.selected_row()
        if row is None or row.kind == "folder":
            return
        e = row.entry
        if e is not None:
            self.start_download(
                e.repo_id,
                revision=e.revision,
                allow_patterns=e.allow_patterns,
                aliases=e.aliases,
                required=e.required_files,
            )
        else:
            self.start_download(row.source, full_check=True)

    def start_download(
        self,
        repo_id: str,
        *,
        revision: str | None = None,
        allow_patterns=None,
        aliases=(),
        required=(),
        full_check: bool = False,
    ) -> DownloadJob | None:
        if self.busy:
            self._show_error("Another download is running; cancel it or wait for it to finish.")
            return None
        if self.offline:
            self._show_error(hub.offline_message(repo_id))
            return None
        self._show_error("")
        job = DownloadJob(
            repo_id,
            revision=revision,
            allow_patterns=allow_patterns,
            aliases=aliases,
            required=required,
            token=self._token(),
            full_check=full_check,
        )
        job.progress.connect(self._on_progress)
        job.succeeded.connect(self._on_downloaded)
        job.failed.connect(self._on_download_failed)
        job.finished.connect(self._on_job_finished)
        self._job = job
        self._busy = True
        self._last_progress = None
        _LIVE_JOBS.add(job)
        job.finished.connect(lambda j=job: _LIVE_JOBS.discard(j))
        self._set_progress(repo_id, f"Preparing {repo_id}\u2026", 0)
        job.start()
        self._update_selection()
        return job

    def _on_progress(self, p: hub.Progress) -> None:
        self._last_progress = p
        self.progress_bar.setValue(int(p.fraction * 1000))
        if self._job is not None and not self._job.token.cancelled:
            self.progress_label.setText(progress_text(p))
        self._update_selection()

    def _on_downloaded(self, path: Path) -> None:
        repo_id = self._job.repo_id if self._job is not None else ""
        if repo_id in self._pending:
            self._pending.remove(repo_id)
            self.custom_status.setText(f"Added {repo_id}: the loader accepts it.")
            self.custom_status.setStyleSheet("")
            self.custom_status.show()
        p = self._last_progress
        self._set_progress(repo_id, f"Installed \u00b7 {hub.format_bytes(p.total)}" if p else "Installed", 1000)
        self.refresh()
        self.select_source(repo_id)

    def _on_download_failed(self, message: str, exc: object) -> None:
        repo_id = self._job.repo_id if self._job is not None else ""
        kept = hub.kept_bytes(repo_id) if repo_id else 0
        kept_bar = self._per_mille(repo_id, kept)  # the bar shows what is on disk, not the last count
        if isinstance(exc, hub.DownloadCancelled):
            self._set_progress(
                repo_id,
                f"Cancelled \u00b7 {hub.format_bytes(kept)} kept; Resume download continues from there."
                if kept
                else "Cancelled \u00b7 nothing was kept.",
                kept_bar,
            )
        else:
            text = download_problem(exc, repo_id)
            self._set_progress(repo_id, "Download failed.", kept_bar)
            if repo_id in self._pending:  # said once, where the user typed the id
                self._custom_message(text, error=True)
            else:
                self._show_error(text, about=repo_id)
        if repo_id in self._pending:
            self._pending.remove(repo_id)
        self.refresh()
        self.select_source(repo_id)

    def _per_mille(self, repo_id: str, done: int) -> int:
        """``done`` bytes of ``repo_id``'s download in thousandths (of the total the download counted, else of the
        catalog's download size)."""
        p = self._last_progress
        row = self.row_for(repo_id) if repo_id else None
        total = p.total if p is not None and p.total else (row.entry.download_bytes if row and row.entry else 0)
        return min(1000, done * 1000 // total) if total else 0

    def _on_job_finished(self) -> None:
        self._busy = False
        if self._asking_to_stop and self._question is not None:  # "Stop downloading ...?": nothing to stop now
            self._question.done(QMessageBox.StandardButton.No.value)
        self._update_selection()

    def _cancel(self) -> None:
        if self._job is not None and self.busy:
            self._job.cancel()
            self.progress_label.setText("Stopping\u2026")
            self._update_selection()

    def _job_name(self) -> str:
        """The name the list shows for the model being downloaded (its repo id when not listed)."""
        repo_id = self._job.repo_id if self._job is not None else ""
        row = next((r for r in self.rows if r.kind != "folder" and r.is_about(repo_id)), None)
        return row.plain_name if row is not None else repo_id.lower()

    def _confirm(self, title: str, text: str) -> bool:
        """Ask ``text`` in a modal Yes/No box (No is the default); True only for Yes. The box is ``_question``
        while it shows, so that a question the download's end makes moot can be closed (as No)."""
        box = questions.box(self, title, text)
        self._question = box
        try:
            return box.exec() == QMessageBox.StandardButton.Yes.value
        finally:
            self._question = None
            box.deleteLater()

    def _delete_selected(self) -> None:
        row = self.selected_row()
        if row is None or row.kind == "folder" or row.state is None:
            return
        size = row.state.size_on_disk + row.state.partial_bytes
        text = (
            f"Delete {row.plain_name} ({hub.format_bytes(size)}) from this computer? It can be downloaded again later."
        )
        if row.is_about(self.in_use):  # the main window keeps a loaded model until another one is chosen
            text += (
                f" {row.plain_name} is the model livecap uses: it stays in use until you choose another one, and the "
                "next start offers to download it again."
            )
        if not self._confirm("Delete model", text):
            return
        try:
            freed = hub.delete_model(row.repo_ids)
        except Exception as e:  # noqa: BLE001 - one sentence, the dialog stays usable
            log.warning("deleting %s failed", row.source, exc_info=True)
            self._show_error(f"{row.source} could not be deleted ({type(e).__name__}: {e}).")
            return
        self._show_error("")
        self._set_progress(row.source, f"Deleted {row.source} \u00b7 {hub.format_bytes(freed)} freed", None)
        self.refresh()

    def _open_folder(self) -> None:
        row = self.selected_row()
        if row is not None and row.path is not None:
            QDesktopServices.openUrl(QUrl.fromLocalFile(str(row.path)))

    def _browse(self) -> None:
        start = self.custom_edit.text().strip() or str(Path.home())
        folder = QFileDialog.getExistingDirectory(self, "Choose a model folder", start)
        if folder:
            self.custom_edit.setText(folder)
            self._add_custom()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt's name
        """Enter in the "Add model" field adds what was typed, and is not passed on: the dialog's default button
        ("Use this model") closed the dialog with the model selected before."""
        if (
            watched is self.custom_edit
            and event.type() == QEvent.Type.KeyPress
            and event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter)
        ):
            self._add_custom()
            return True
        return super().eventFilter(watched, event)

    def _add_custom(self) -> None:
        text = self.custom_edit.text().strip()
        self.custom_status.setStyleSheet("")
        if not text:
            self._custom_message("Type a hub id such as owner/name, or choose a folder.", error=True)
            return
        folder = Path(text).expanduser()
        if folder.is_dir():
            if self._check is not None and self._check.running:
                return
            job = CheckJob(str(folder.resolve()))
            job.succeeded.connect(self._on_folder_ok)
            job.failed.connect(self._on_folder_failed)
            self._check = job
            _LIVE_JOBS.add(job)
            job.finished.connect(lambda j=job: _LIVE_JOBS.discard(j))
            self._custom_message(f"Checking {folder}\u2026")
            self.add_button.setEnabled(False)
            job.finished.connect(lambda: self.add_button.setEnabled(True))
            job.start()
            return
        if folder.exists() or text.startswith(("/", "~", ".")) or not REPO_ID.match(text):
            self._custom_message(
                f"{text} is neither a folder on this computer nor a hub id like owner/name.", error=True
            )
            return
        if self.row_for(text) is not None and self.row_for(text).installed:
            self.select_source(text)
            self._custom_message(f"{text} is already on this computer.")
            return
        if self.offline:
            self._custom_message(hub.offline_message(text), error=True)
            return
        entry = self.catalog.find(text)
        if entry is not None:
            self.select_source(text)
            self._download_selected()
            return
        if self.busy:
            self._custom_message("Another download is running; cancel it or wait for it to finish.", error=True)
            return
        self._pending.append(text)
        self.refresh()
        self.select_source(text)
        self._custom_message(f"Downloading {text}; it is added once the loader accepts it.")
        if self.start_download(text, full_check=True) is None:
            self._pending.remove(text)
            self.refresh()

    def _custom_message(self, text: str, error: bool = False) -> None:
        self.custom_status.setText(text)
        self.custom_status.setProperty("role", "error" if error else "")
        self.custom_status.style().unpolish(self.custom_status)  # the style sheet follows the property
        self.custom_status.style().polish(self.custom_status)
        self.custom_status.setVisible(bool(text))

    def _on_folder_ok(self, result: tuple[str, str]) -> None:
        folder = self._check.folder if self._check is not None else ""
        family, _dialect = result
        if folder and folder not in self._folders:
            self._folders.append(folder)
        name = FAMILY_NAMES.get(family, family)
        self._custom_message(f"Added {folder}: a {name} model the loader accepts.")
        self.refresh()
        self.select_source(folder)

    def _on_folder_failed(self, message: str, exc: object) -> None:
        self._custom_message(message, error=True)

    def _use(self) -> None:
        row = self.selected_row()
        if row is None or not row.installed:
            return
        self.chosen = row.source
        if self._remember:
            _write_source(self._settings, row.source)
        self.accept()

    def done(self, result: int) -> None:
        """Closing the dialog cancels a running download (the part downloaded so far is kept); while it shows, it
        asks first (closed with Esc, the download stopped without a word and seemed to go on unseen). A download
        that ends while the question shows makes it moot: the question goes and the dialog closes as asked."""
        job = self._job
        if job is not None and job.running:
            if self.isVisible() and not job.token.cancelled:
                name = html.escape(self._job_name())
                question = (
                    f"<p>Stop downloading {name}?</p>"
                    "<p>What was downloaded is kept; the next download continues there.</p>"
                )
                self._asking_to_stop = True
                try:
                    stop = self._confirm("Stop the download", question)
                finally:
                    self._asking_to_stop = False
                if not stop and self.busy:  # No, and the download goes on
                    return
            if job.running:
                job.cancel()
                job.wait(2.0)
        super().done(result)


def _folder_family(folder: Path) -> str:
    """The model family the loader sees in ``folder`` ("" when none)."""
    try:
        return formats.detect(folder)[0]
    except (LivecapError, OSError):
        return ""


def _folder_bytes(folder: Path) -> int:
    """The size of the files directly in ``folder``."""
    try:
        return sum(p.stat().st_size for p in folder.iterdir() if p.is_file())
    except OSError:
        return 0


def _weights_bytes(folder: Path) -> int:
    """The size of the weight files in ``folder`` (about the memory the model takes)."""
    try:
        return sum(p.stat().st_size for p in folder.glob("*.safetensors"))
    except OSError:
        return 0


def _esc(text: str) -> str:
    return html.escape(text, quote=False)


def choose_model(parent: QWidget | None = None, settings: Any = None, remember: bool = True) -> str | None:
    """Show the model dialog; the chosen source (hub repo id or local folder), or None when closed.

    ``settings`` is ``app.settings.Settings``, a ``QSettings``, or None (the application's QSettings); with
    ``remember`` the choice is stored under ``model/source``.
    """
    dialog = ModelDialog(parent, settings, remember=remember)
    try:
        if dialog.exec() == QDialog.DialogCode.Accepted:
            return dialog.chosen
        return None
    finally:
        dialog.deleteLater()
