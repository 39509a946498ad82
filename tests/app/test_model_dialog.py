"""The model dialog driven with pytest-qt against the fake hub (tests/fakehub.py); no real network.

Run as a script to save a screenshot (use Xvfb for a real X server):
    xvfb-run -s "-screen 0 1280x800x24" .venv/bin/python -m tests.app.test_model_dialog OUT.png
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.app.catalog_hub import SMALL, SMALL_WEIGHTS, TINY, catalog_entry, fixture_files, serve_catalog
from tests.fakehub import FakeHub, block_network, hub_env

GIB = 1 << 30


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    block_network(monkeypatch)
    with FakeHub() as hub:
        hub_env(monkeypatch, hub, tmp_path / "hf")
        serve_catalog(hub)
        yield hub


@pytest.fixture
def qsettings(tmp_path: Path):
    from PySide6.QtCore import QSettings

    return QSettings(str(tmp_path / "dialog.ini"), QSettings.Format.IniFormat)


@pytest.fixture
def make_dialog(qtbot, qsettings):
    from app.model_dialog import ModelDialog
    from engine.catalog import Machine

    made = []

    def make(machine=None):
        d = ModelDialog(None, qsettings, machine=machine or Machine(16 * GIB, False, 2))
        qtbot.addWidget(d)
        made.append(d)
        return d

    yield make
    for d in made:
        if d._job is not None:
            d._job.cancel()
            d._job.wait(5)


def _install(key: str) -> Path:
    from engine import install

    e = catalog_entry(key)
    return install.install_model(
        e.repo_id, revision=e.revision, allow_patterns=e.allow_patterns, required=e.required_files
    )


def _status(dialog, source: str) -> str:
    row = dialog.row_for(source)
    return dialog.tree.topLevelItem(dialog.rows.index(row)).text(4)


def _wait_job(qtbot, dialog, timeout: int = 15000) -> None:
    qtbot.waitUntil(lambda: dialog._job is not None and not dialog.busy, timeout=timeout)


def test_list_shows_installed_state_and_the_recommendation(fake, make_dialog, qtbot, monkeypatch) -> None:
    from PySide6.QtGui import QDesktopServices

    path = _install("moonshine-streaming-tiny")
    tiny, small = catalog_entry("moonshine-streaming-tiny"), catalog_entry("moonshine-streaming-small")
    d = make_dialog()
    assert len(d.rows) >= 6
    assert _status(d, tiny.repo_id).startswith("Installed \u00b7 ")
    assert _status(d, small.repo_id) == "Not downloaded"
    assert "needs a token" in _status(d, "mistralai/Voxtral-Mini-4B-Realtime-2602")
    assert "Recommended for this computer" in d.recommendation_label.text()
    assert "Moonshine Streaming small" in d.recommendation_label.text()
    assert d.selected_row().source == small.repo_id  # nothing saved yet: the recommendation
    assert d.download_button.isEnabled() and not d.use_button.isEnabled()
    assert d.offline_banner.isHidden()

    assert d.select_source("moonshine-ai/moonshine-streaming-tiny")  # an alias finds the row
    assert d.use_button.isEnabled() and d.open_button.isEnabled() and d.delete_button.isEnabled()
    assert not d.download_button.isEnabled()
    assert "Installed in" in d.details.text()
    opened = []
    monkeypatch.setattr(QDesktopServices, "openUrl", staticmethod(lambda url: opened.append(url.toLocalFile())))
    d.open_button.click()
    assert opened == [str(path)]


def test_download_shows_progress_then_installed_and_is_chosen(fake, make_dialog, qtbot, qsettings) -> None:
    small = catalog_entry("moonshine-streaming-small")
    fake.rate = 20_000_000
    d = make_dialog()
    assert d.select_source(small.repo_id)
    seen = []
    d.download_button.click()
    job = d._job
    assert job is not None and not d.progress_bar.isHidden()
    job.progress.connect(lambda p: seen.append((p.done, p.total, d.progress_bar.value(), d.progress_label.text())))
    assert not d.download_button.isEnabled() and d.cancel_button.isEnabled()
    _wait_job(qtbot, d)
    assert seen, "progress signals reach the GUI thread"
    dones = [s[0] for s in seen]
    assert dones == sorted(dones) and seen[-1][0] == seen[-1][1]
    assert any(" of " in s[3] for s in seen)
    assert any("/s" in s[3] for s in seen), "speed is shown once known"
    assert d.progress_bar.value() == 1000
    assert d.progress_label.text().startswith("Installed")
    assert _status(d, small.repo_id).startswith("Installed")
    assert d.selected_row().source == small.repo_id and d.use_button.isEnabled()
    d.use_button.click()
    assert d.result() == d.DialogCode.Accepted and d.chosen == small.repo_id
    assert qsettings.value("model/source") == small.repo_id


def _cancel_past_12_mb(qtbot, d, repo_id: str) -> None:
    """Download ``repo_id`` in dialog ``d`` and press Cancel once its weights are past 12 MB (the last write step
    kept 10.5 MB)."""
    d.select_source(repo_id)
    d.download_button.click()
    qtbot.waitUntil(
        lambda: (
            d._last_progress is not None
            and d._last_progress.file == "model.safetensors"
            and d._last_progress.done > 12_000_000
        ),
        timeout=20000,
    )
    d.cancel_button.click()


def test_cancel_then_resume(fake, make_dialog, qtbot) -> None:
    from engine import install

    small = catalog_entry("moonshine-streaming-small")
    fake.rate = 4_000_000
    d = make_dialog()
    _cancel_past_12_mb(qtbot, d, small.repo_id)
    assert d.progress_label.text() == "Stopping\u2026" and not d.cancel_button.isEnabled()
    _wait_job(qtbot, d, timeout=5000)
    assert "Cancelled" in d.progress_label.text()
    assert _status(d, small.repo_id).startswith("Partly downloaded")
    on_disk = _status(d, small.repo_id).split("\u00b7 ")[1]  # "Partly downloaded · 10.5 MB"
    assert d.progress_label.text().startswith(f"Cancelled \u00b7 {on_disk} kept")  # it said 12.0 MB
    assert d.download_button.text() == "Resume download" and d.download_button.isEnabled()
    assert not d.use_button.isEnabled()
    state = install.local_state(small.repo_ids, small.revision, small.required_files)
    assert not state.complete and state.partial_bytes >= 10 * 1024 * 1024

    fake.rate = None
    fake.requests.clear()
    fake.body_bytes.clear()
    d.download_button.click()
    _wait_job(qtbot, d)
    assert _status(d, small.repo_id).startswith("Installed")
    ranges = [r.headers.get("range") for r in fake.served("GET", "model.safetensors")]
    assert ranges and ranges[0] and ranges[0].startswith("bytes=")
    kept = int(ranges[0][len("bytes=") : -1])
    assert fake.body_bytes["model.safetensors"] == len(SMALL_WEIGHTS) - kept  # only the rest came again
    assert (d.row_for(small.repo_id).path / "model.safetensors").read_bytes() == SMALL_WEIGHTS


def test_gated_model_needs_a_token(fake, make_dialog, qtbot) -> None:
    from engine import hub as H

    vox = catalog_entry("voxtral-bf16-official")
    d = make_dialog()
    d.select_source(vox.repo_id)
    assert "Gated model" in d.details.text()
    d.download_button.click()
    _wait_job(qtbot, d)
    assert not d.error_label.isHidden()
    assert "gated" in d.error_label.text() and "token" in d.error_label.text()
    assert _status(d, vox.repo_id).startswith("Not downloaded")

    d.token_edit.setText("hf_good_token")
    d.remember_token.setChecked(True)
    d.download_button.click()
    _wait_job(qtbot, d)
    assert _status(d, vox.repo_id).startswith("Installed"), d.error_label.text()
    assert d.error_label.isHidden()
    assert H.get_token() == "hf_good_token"  # remembered where huggingface_hub keeps its token
    names = sorted(p.name for p in d.row_for(vox.repo_id).path.iterdir())
    assert names == ["consolidated.safetensors", "params.json", "tekken.json"]  # only what the engine reads
    d.forget_button.click()
    assert H.get_token() is None


def test_custom_folder_is_validated(fake, make_dialog, qtbot, tmp_path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    d = make_dialog()
    d.custom_edit.setText(str(empty))
    d.add_button.click()
    qtbot.waitUntil(lambda: d.add_button.isEnabled() and "Checking" not in d.custom_status.text(), timeout=10000)
    assert (
        "No model found" in d.custom_status.text() and d.custom_status.property("role") == "error"
    )  # coloured as an error by the theme
    assert d.row_for(str(empty)) is None

    d.custom_edit.setText(str(TINY))
    d.add_button.click()
    qtbot.waitUntil(lambda: d.row_for(str(TINY)) is not None, timeout=10000)
    assert "accepts" in d.custom_status.text()
    assert d.selected_row().source == str(TINY) and d.use_button.isEnabled()
    d.use_button.click()
    assert d.chosen == str(TINY)


def test_enter_in_the_add_field_adds_the_folder_and_keeps_the_dialog_open(fake, make_dialog, qtbot, tmp_path) -> None:
    """Enter after typing a folder also pressed the default button: the dialog closed with the model selected
    before, and the typed folder was added after it had closed."""
    from PySide6.QtCore import Qt

    d = make_dialog()
    d.show()
    qtbot.waitExposed(d)
    d.custom_edit.setText(str(TINY))
    d.add_button.click()
    qtbot.waitUntil(lambda: d.row_for(str(TINY)) is not None, timeout=10000)
    assert d.selected_row().source == str(TINY) and d.use_button.isEnabled()  # an installed model is selected
    d.custom_edit.setFocus()
    d.custom_edit.setText(str(SMALL))
    qtbot.keyClick(d.custom_edit, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: d.row_for(str(SMALL)) is not None, timeout=10000)
    assert d.isVisible() and d.chosen is None
    assert d.selected_row().source == str(SMALL)


def test_at_its_smallest_the_selected_models_texts_do_not_run_under_its_buttons(fake, make_dialog, qtbot) -> None:
    """At its minimum size (800 x 560 then) a long description and a download error ran under the Download /
    Cancel buttons and the progress bar, unreadable (found in QA)."""
    d = make_dialog()
    d.show()
    qtbot.waitExposed(d)
    d.resize(d.minimumSize())
    d.select_source("mistralai/Voxtral-Mini-4B-Realtime-2602")  # the longest description
    d._show_error(
        "The model is gated: accept its terms on the model page (logged in on huggingface.co) and give an access token."
    )
    qtbot.wait(50)

    def span(w):
        top = w.mapTo(d, w.rect().topLeft()).y()
        return top, top + w.height()

    shown = [span(w) for w in (d.details_area, d.download_button, d.progress_bar, d.error_label) if w.isVisible()]
    assert len(shown) >= 3 and all(a[1] <= b[0] for a, b in zip(shown, shown[1:])), shown  # top to bottom, apart
    assert d.error_label.height() >= d.error_label.heightForWidth(d.error_label.width())


def test_custom_hub_repo(fake, make_dialog, qtbot) -> None:
    from engine import install

    d = make_dialog()
    d.custom_edit.setText("not a repo id!")
    d.add_button.click()
    assert "neither a folder" in d.custom_status.text()

    d.custom_edit.setText("acme/missing-model")
    d.add_button.click()
    _wait_job(qtbot, d)
    assert "was not found" in d.custom_status.text()
    assert d.error_label.isHidden()  # said once, next to the field the id was typed in
    assert d.row_for("acme/missing-model") is None

    # Files that pass the structural check but that the loader cannot build: rejected and removed.
    fake.add_repo(
        "acme/mismatched", {**fixture_files(TINY), "model.safetensors": (SMALL / "model.safetensors").read_bytes()}
    )
    d.custom_edit.setText("acme/mismatched")
    d.add_button.click()
    _wait_job(qtbot, d)
    assert "has shape [48, 80], expected [80, 80]" in d.custom_status.text()
    assert d.row_for("acme/mismatched") is None and install.local_state("acme/mismatched") is None

    d.custom_edit.setText("acme/custom-moon")
    d.add_button.click()
    assert d.row_for("acme/custom-moon") is not None  # listed while it downloads
    _wait_job(qtbot, d)
    assert "Added acme/custom-moon" in d.custom_status.text()
    assert _status(d, "acme/custom-moon").startswith("Installed")
    assert d.selected_row().source == "acme/custom-moon" and d.use_button.isEnabled()


def test_offline_mode_is_explained(fake, make_dialog, monkeypatch) -> None:
    tiny = catalog_entry("moonshine-streaming-tiny")
    _install("moonshine-streaming-tiny")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    fake.requests.clear()
    d = make_dialog()
    assert not d.offline_banner.isHidden()
    assert "HF_HUB_OFFLINE" in d.offline_banner.label.text()
    d.select_source(catalog_entry("moonshine-streaming-small").repo_id)
    assert not d.download_button.isEnabled() and "Offline" in d.download_button.toolTip()
    d.select_source(tiny.repo_id)
    assert d.use_button.isEnabled()
    d.custom_edit.setText("acme/custom-moon")
    d.add_button.click()
    assert "Offline mode is on" in d.custom_status.text()
    assert fake.requests == []


def test_delete(fake, make_dialog, monkeypatch) -> None:
    from engine import hub as H

    tiny = catalog_entry("moonshine-streaming-tiny")
    path = _install("moonshine-streaming-tiny")
    d = make_dialog()
    d.select_source(tiny.repo_id)
    monkeypatch.setattr(d, "_confirm", lambda title, text: False)
    d.delete_button.click()
    assert path.exists()
    asked = []
    monkeypatch.setattr(d, "_confirm", lambda title, text: asked.append(text) or True)
    d.delete_button.click()
    assert asked and "Moonshine Streaming tiny" in asked[0]
    assert not path.exists() and H.scan_models() == {}
    assert _status(d, tiny.repo_id) == "Not downloaded"
    assert "freed" in d.progress_label.text()


def test_closing_cancels_a_running_download(fake, make_dialog, qtbot) -> None:
    fake.rate = 500_000
    d = make_dialog()
    d.select_source(catalog_entry("moonshine-streaming-small").repo_id)
    d.download_button.click()
    job = d._job
    qtbot.waitUntil(lambda: d._last_progress is not None and d._last_progress.done > 0, timeout=10000)
    d.reject()
    assert job.token.cancelled and job.wait(5)


def test_closing_during_a_download_asks_first(fake, make_dialog, qtbot, monkeypatch) -> None:
    """Esc or Close during a download stopped it in 0.1 s without a word: it seemed to go on unseen (QA)."""
    fake.rate = 500_000
    d = make_dialog()
    d.show()
    qtbot.waitExposed(d)
    d.select_source(catalog_entry("moonshine-streaming-small").repo_id)
    d.download_button.click()
    job = d._job
    qtbot.waitUntil(lambda: d._last_progress is not None and d._last_progress.done > 0, timeout=10000)
    asked = []
    monkeypatch.setattr(d, "_confirm", lambda title, text: asked.append(text) or False)
    d.reject()  # Esc: "No" keeps downloading, and the dialog open
    assert d.isVisible() and not job.token.cancelled and job.running
    assert asked == [
        "<p>Stop downloading Moonshine Streaming small?</p>"
        "<p>What was downloaded is kept; the next download continues there.</p>"
    ]
    monkeypatch.setattr(d, "_confirm", lambda title, text: asked.append(text) or True)
    d.reject()
    assert len(asked) == 2 and not d.isVisible() and job.token.cancelled and job.wait(5)


def test_choose_model_returns_and_remembers_the_choice(fake, qtbot, qsettings, monkeypatch) -> None:
    from app import model_dialog
    from engine.catalog import Machine

    tiny = catalog_entry("moonshine-streaming-tiny")
    _install("moonshine-streaming-tiny")
    real_init = model_dialog.ModelDialog.__init__

    def init(self, parent=None, settings=None, **kw):
        real_init(self, parent, settings, machine=Machine(8 * GIB, True, 8, "Apple M1"))

    def run(self):
        assert self.select_source(tiny.repo_id)
        self._use()
        return self.result()

    monkeypatch.setattr(model_dialog.ModelDialog, "__init__", init)
    monkeypatch.setattr(model_dialog.ModelDialog, "exec", run)
    assert model_dialog.choose_model(None, qsettings) == tiny.repo_id
    assert qsettings.value("model/source") == tiny.repo_id

    def close(self):
        assert self.selected_row().source == tiny.repo_id  # the saved choice is preselected
        self.reject()
        return self.result()

    monkeypatch.setattr(model_dialog.ModelDialog, "exec", close)
    assert model_dialog.choose_model(None, qsettings) is None


def test_a_choice_not_remembered_leaves_the_settings_alone(fake, qtbot, settings, monkeypatch) -> None:
    """What the Sessions window's "Re-transcribe with > Another model..." uses: the live model stays saved."""
    from app import model_dialog
    from app.settings import Key

    tiny = catalog_entry("moonshine-streaming-tiny")
    _install("moonshine-streaming-tiny")
    settings.set_value(Key.MODEL_SOURCE, "acme/live-model")

    def run(self):
        assert self.select_source(tiny.repo_id)
        self._use()
        return self.result()

    monkeypatch.setattr(model_dialog.ModelDialog, "exec", run)
    assert model_dialog.choose_model(None, settings, remember=False) == tiny.repo_id
    assert settings.value(Key.MODEL_SOURCE) == "acme/live-model"
    assert model_dialog.choose_model(None, settings) == tiny.repo_id
    assert settings.value(Key.MODEL_SOURCE) == tiny.repo_id


def test_app_settings_object_is_accepted(fake, qtbot, settings) -> None:
    from app.model_dialog import ModelDialog
    from app.settings import Key

    tiny = catalog_entry("moonshine-streaming-tiny")
    _install("moonshine-streaming-tiny")
    d = ModelDialog(None, settings)
    qtbot.addWidget(d)
    d.select_source(tiny.repo_id)
    d._use()
    assert settings.value(Key.MODEL_SOURCE) == tiny.repo_id


# -- screenshot -------------------------------------------------------------------------------------------------


def screenshot(out: str) -> None:  # pragma: no cover - a manual tool
    """The dialog on a Mac-like machine with one model installed, one partly downloaded and one downloading."""
    import os
    import tempfile
    import time

    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication

    home = tempfile.mkdtemp(prefix="livecap-shot-")
    os.environ["HF_HOME"] = home
    os.environ.pop("HF_HUB_OFFLINE", None)
    hub = FakeHub().start()
    os.environ["HF_ENDPOINT"] = hub.url
    serve_catalog(hub)
    from engine import hub as H
    from engine import install
    from engine.catalog import Machine, load_catalog

    cat = load_catalog()
    four = cat.by_key("voxtral-4bit-mlx")
    # The 4-bit Voxtral as a 60 MB stand-in that streams slowly, so the progress bar is caught mid-way.
    hub.add_repo(
        four.repo_id,
        {"config.json": b"{}", "model.safetensors": b"\0" * 60_000_000, "tekken.json": b"{}"},
        commit=four.revision,
    )
    _install("moonshine-streaming-tiny")
    medium = cat.by_key("moonshine-streaming-medium")
    hub.add_repo(medium.repo_id, {**fixture_files(SMALL), "model.safetensors": SMALL_WEIGHTS}, commit=medium.revision)
    hub.drop_at["model.safetensors"] = 12_000_000
    hub.down_after_drop = True
    try:
        install.install_model(medium.repo_id, revision=medium.revision, allow_patterns=medium.allow_patterns)
    except H.HubError:
        pass
    hub.down = False
    hub.drop_at.clear()
    hub.down_after_drop = False
    hub.rate = 6_000_000

    app = QApplication.instance() or QApplication(sys.argv[:1])
    from app.model_dialog import ModelDialog

    settings = QSettings(os.path.join(home, "s.ini"), QSettings.Format.IniFormat)
    d = ModelDialog(None, settings, machine=Machine(16 * GIB, True, 8, "Apple M2"))
    d.show()
    d.select_source(four.repo_id)
    d.download_button.click()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        app.processEvents()
        p = d._last_progress
        if p is not None and p.done > 20_000_000 and p.speed > 0:
            break
        time.sleep(0.02)
    for _ in range(10):
        app.processEvents()
        time.sleep(0.02)
    d.grab().save(out)
    d._job.cancel()
    d._job.wait(5)
    hub.stop()


if __name__ == "__main__":  # pragma: no cover
    screenshot(sys.argv[1] if len(sys.argv) > 1 else "docs/screenshots/model_dialog.png")


# -- rough edges ---------------------------------------------------------------------------------------------


def test_error_goes_with_another_row_and_focus_stays_on_the_buttons(fake, make_dialog, qtbot) -> None:
    small, tiny = catalog_entry("moonshine-streaming-small"), catalog_entry("moonshine-streaming-tiny")
    fake.down = True
    d = make_dialog()
    d.show()
    d.activateWindow()
    qtbot.waitUntil(d.isActiveWindow, timeout=2000)
    d.select_source(small.repo_id)
    d.download_button.setFocus()
    d.download_button.click()
    assert d.focusWidget() is d.cancel_button  # not the next field in the tab chain
    _wait_job(qtbot, d)
    text = d.error_label.text()
    assert not d.error_label.isHidden() and "cannot be reached" in text and "Errno" not in text
    assert d.focusWidget() is d.download_button and d.focusWidget() is not d.token_edit
    assert text not in d.details.text() and d.custom_status.isHidden()  # said once
    d.select_source(tiny.repo_id)
    assert d.error_label.isHidden()  # it was about the other model
    d.select_source(small.repo_id)
    assert d.error_label.isHidden()


def test_recommended_has_one_space_and_folder_rows_are_described(fake, make_dialog, qtbot, qsettings) -> None:
    d = make_dialog()
    names = [r.name for r in d.rows]
    assert "Moonshine Streaming small (recommended)" in names
    assert not any("  " in n for n in names)
    d.custom_edit.setText(str(TINY))
    d.add_button.click()
    qtbot.waitUntil(lambda: d.row_for(str(TINY)) is not None, timeout=10000)
    row = d.row_for(str(TINY))
    cells = [d.tree.topLevelItem(d.rows.index(row)).text(c) for c in range(5)]
    assert cells[0] == "moon_tiny_like \u00b7 Moonshine Streaming"
    assert cells[1] == "English"
    assert cells[2].endswith("on disk") and cells[3].startswith("about ")
    assert all(cells), cells
    assert "Moonshine Streaming model" in d.details.text()


def test_token_link_is_readable_in_every_theme(qtbot) -> None:
    from PySide6.QtGui import QPalette
    from PySide6.QtWidgets import QApplication

    from app.theme import apply_theme

    def luminance(c) -> float:
        def ch(v: float) -> float:
            return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4

        return 0.2126 * ch(c.redF()) + 0.7152 * ch(c.greenF()) + 0.0722 * ch(c.blueF())

    app = QApplication.instance()
    try:
        for theme in ("light", "dark", "high-contrast"):
            apply_theme(app, theme)
            pal = app.palette()
            for bg in (QPalette.ColorRole.Window, QPalette.ColorRole.Base):
                a, b = luminance(pal.color(QPalette.ColorRole.Link)), luminance(pal.color(bg))
                ratio = (max(a, b) + 0.05) / (min(a, b) + 0.05)
                assert ratio >= 4.5, (theme, bg, ratio)
    finally:
        apply_theme(app, "system")


# -- first-run QA: the progress row, the stop question, the delete question ------------------------------------


def _top(dialog, widget) -> int:
    from PySide6.QtCore import QPoint

    return widget.mapTo(dialog, QPoint(0, 0)).y()


def test_the_progress_bar_and_its_status_belong_to_their_row(fake, make_dialog, qtbot) -> None:
    """Medium had just finished downloading; selecting the tiny row ("Not downloaded") showed a full bar and
    "Installed · 22.2 MB" under tiny's details (QA)."""
    small, tiny = catalog_entry("moonshine-streaming-small"), catalog_entry("moonshine-streaming-tiny")
    d = make_dialog()
    d.show()
    qtbot.waitExposed(d)
    d.select_source(small.repo_id)
    d.download_button.click()
    _wait_job(qtbot, d)
    assert d.progress_bar.isVisible() and d.progress_label.text().startswith("Installed")
    d.select_source(tiny.repo_id)
    assert d.progress_bar.isHidden() and d.progress_label.isHidden()
    d.select_source(small.repo_id)  # said again with its model
    assert d.progress_bar.isVisible() and d.progress_bar.value() == 1000
    assert d.progress_label.isVisible() and d.progress_label.text().startswith("Installed")


def test_cancel_leaves_the_bar_at_what_was_kept(fake, make_dialog, qtbot) -> None:
    """After Cancel the bar stayed at the last count (67 %, 13.7 of 22.2 MB) beside "Cancelled · 10.5 MB kept" (QA)."""
    from engine import hub as H

    small = catalog_entry("moonshine-streaming-small")
    fake.rate = 4_000_000
    d = make_dialog()
    _cancel_past_12_mb(qtbot, d, small.repo_id)
    _wait_job(qtbot, d, timeout=5000)
    counted = d._last_progress
    kept = H.kept_bytes(small.repo_id)
    assert 0 < kept < counted.done and d.progress_label.text().startswith("Cancelled")
    assert d.progress_bar.value() == kept * 1000 // counted.total < int(counted.fraction * 1000)


def test_the_buttons_stay_put_when_a_download_starts_and_ends(fake, make_dialog, qtbot, monkeypatch) -> None:
    """The Download / Cancel row moved up ~20 px when the progress bar appeared, so a click aimed at Cancel landed
    on the bar (QA)."""
    small, tiny = catalog_entry("moonshine-streaming-small"), catalog_entry("moonshine-streaming-tiny")
    fake.rate = 10_000_000
    d = make_dialog()
    monkeypatch.setattr(d, "_confirm", lambda title, text: True)  # a failure mid-download closes it without asking
    d.show()
    qtbot.waitExposed(d)
    d.select_source(small.repo_id)
    qtbot.wait(20)
    before = _top(d, d.cancel_button)
    d.download_button.click()
    qtbot.waitUntil(lambda: d._last_progress is not None and d._last_progress.done > 0, timeout=10000)
    qtbot.wait(20)
    assert d.progress_bar.isVisible() and _top(d, d.cancel_button) == before
    _wait_job(qtbot, d)
    qtbot.wait(20)
    assert _top(d, d.cancel_button) == before
    d.select_source(tiny.repo_id)  # the bar hides again
    qtbot.wait(20)
    assert d.progress_bar.isHidden() and _top(d, d.cancel_button) == before


def test_the_stop_question_goes_when_the_download_ends(fake, make_dialog, qtbot) -> None:
    """Esc during a download asked "Stop downloading ...?"; the download finished meanwhile and the question stayed
    open beside a row that said Installed (QA). It goes, and the dialog closes as asked; nothing was stopped."""
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication, QMessageBox

    small = catalog_entry("moonshine-streaming-small")
    fake.rate = 10_000_000
    d = make_dialog()
    d.show()
    qtbot.waitExposed(d)
    d.select_source(small.repo_id)
    d.download_button.click()
    job = d._job
    qtbot.waitUntil(lambda: d._last_progress is not None and d._last_progress.done > 0, timeout=10000)
    asked = []

    def look() -> None:
        box = QApplication.activeModalWidget()
        if isinstance(box, QMessageBox):
            asked.append(box.text())

    def give_up() -> None:  # without the fix the question never goes: answer No after a while
        box = QApplication.activeModalWidget()
        if isinstance(box, QMessageBox):
            box.reject()

    QTimer.singleShot(200, look)
    safety = QTimer(d)
    safety.setSingleShot(True)
    safety.timeout.connect(give_up)
    safety.start(15000)
    d.reject()  # Esc: the question shows until the download ends
    safety.stop()
    assert asked and "Stop downloading Moonshine Streaming small?" in asked[0]
    assert not isinstance(QApplication.activeModalWidget(), QMessageBox)
    assert not d.isVisible() and not job.token.cancelled and not job.running
    assert _status(d, small.repo_id).startswith("Installed")


def test_the_delete_question_names_the_model_plainly_and_says_when_it_is_in_use(
    fake, make_dialog, qsettings, monkeypatch
) -> None:
    """It read "Delete Moonshine Streaming small (recommended) (22.2 MB) from this computer?", and said nothing of
    the model being the one livecap uses (QA)."""
    small, tiny = catalog_entry("moonshine-streaming-small"), catalog_entry("moonshine-streaming-tiny")
    _install("moonshine-streaming-small")
    _install("moonshine-streaming-tiny")
    qsettings.setValue("model/source", small.repo_id)  # the main window saves the model that loaded
    d = make_dialog()
    asked = []
    monkeypatch.setattr(d, "_confirm", lambda title, text: asked.append(text) or False)
    d.select_source(small.repo_id)
    d.delete_button.click()
    assert asked[0].startswith("Delete Moonshine Streaming small (") and "recommended" not in asked[0]
    assert "is the model livecap uses: it stays in use until you choose another one" in asked[0]
    d.select_source(tiny.repo_id)
    d.delete_button.click()
    assert asked[1].startswith("Delete Moonshine Streaming tiny (") and "livecap uses" not in asked[1]
