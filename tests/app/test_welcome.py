"""The first-run welcome in the main window, against the loopback fake hub: download the recommended model,
then Start is one key away; cancel and resume; a plain sentence when the hub cannot be reached or offline."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from app.main_window import MainWindow
from app.settings import Key
from tests.app.catalog_hub import catalog_entry, serve_catalog
from tests.fakehub import FakeHub, block_network, hub_env

GIB = 1 << 30


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    block_network(monkeypatch)
    from engine.catalog import Machine

    # This computer, as the recommendation sees it: 16 GB, 2 cores, no Apple GPU -> Moonshine small.
    monkeypatch.setattr(Machine, "current", classmethod(lambda cls: Machine(16 * GIB, False, 2)))
    with FakeHub() as hub:
        hub_env(monkeypatch, hub, tmp_path / "hf")
        serve_catalog(hub)
        yield hub


@pytest.fixture
def window(qtbot, fake, controller, settings, fake_sd):
    w = MainWindow(controller, settings, sounddevice=fake_sd)
    qtbot.addWidget(w)
    w.show()
    qtbot.waitExposed(w)
    yield w
    if w.welcome.job is not None:
        w.welcome.job.cancel()
        w.welcome.job.wait(5)


def _wait_job(qtbot, welcome, timeout=15000):
    qtbot.waitUntil(
        lambda: welcome.job is not None and not welcome.busy and welcome.cancel_button.isHidden(), timeout=timeout
    )


def _plain(text: str) -> None:
    """A sentence for people: no errno, no exception name, no raw error text in brackets, no traceback."""
    assert text and "(" not in text and "[" not in text
    assert not re.search(r"errno|\[Err|Error\b|Exception|Traceback|refused|\(\w+Error", text, re.IGNORECASE), text


def test_welcome_downloads_the_recommended_model_then_space_starts(qtbot, window, fake, settings):
    small = catalog_entry("moonshine-streaming-small")
    w = window.welcome
    assert window.caption_stack.currentWidget() is w and w.isVisible()
    assert "Moonshine Streaming small" in w.model_label.text()
    assert "562 MB" in w.model_label.text() and "English only" in w.model_label.text()
    assert w.download_button.text() == "Download (562 MB)" and w.download_button.isEnabled()
    assert window.focusWidget() is w.download_button  # Enter or Space downloads
    assert w.folder_button.isVisible() and w.folder_button.text() == "Add a model folder\u2026"

    fake.rate = 3_000_000
    seen = []
    with qtbot.waitSignal(window.controller.model_changed, timeout=20000):
        w.download_button.click()
        job = w.job
        job.progress.connect(lambda p: seen.append((p.done, w.progress_bar.value(), w.progress_label.text())))
        assert not w.progress_bar.isHidden() and not w.cancel_button.isHidden() and w.download_button.isHidden()
    assert seen and any(" of " in text for _, _, text in seen)
    assert [d for d, _, _ in seen] == sorted(d for d, _, _ in seen)
    # the model is selected and loaded: the captions replace the welcome, Space starts
    assert settings.value(Key.MODEL_SOURCE) == small.repo_id
    assert window.controller.model.source == small.repo_id
    assert window.caption_stack.currentWidget() is window.caption_view
    assert window.start_action.isEnabled()
    assert "Space" in window.caption_view.hint()
    assert window.focusWidget() is window.caption_view
    with qtbot.waitSignal(window.controller.state_changed, timeout=3000):
        QTest.keyClick(window.focusWidget(), Qt.Key.Key_Space)
    assert window.controller.state == "running"
    with qtbot.waitSignal(window.controller.session_finished, timeout=5000):
        window.stop_action.trigger()


def test_cancel_keeps_the_part_and_resume_finishes(qtbot, window, fake):
    w = window.welcome
    fake.rate = 4_000_000
    w.download_button.click()
    # past huggingface_hub's 10 MB write step of the (padded) weights, so the cancel keeps a part
    qtbot.waitUntil(
        lambda: w._last is not None and w._last.file == "model.safetensors" and w._last.done > 12_000_000, timeout=20000
    )
    w.cancel_button.click()
    _wait_job(qtbot, w)
    assert "kept" in w.progress_label.text()
    from engine import hub

    kept = hub.format_bytes(hub.kept_bytes(window.welcome.entry.repo_id))
    assert f"({kept} kept)" in w.progress_label.text()  # what is on disk, not what the download had counted
    left = hub.format_bytes(catalog_entry("moonshine-streaming-small").download_bytes - hub.kept_bytes(w.entry.repo_id))
    assert w.download_button.text() == f"Resume download ({left} left)" and w.download_button.isEnabled()  # was 562
    assert window.controller.model is None and window.caption_stack.currentWidget() is w
    fake.rate = None
    fake.requests.clear()
    with qtbot.waitSignal(window.controller.model_changed, timeout=20000):
        w.download_button.click()
    ranges = [r.headers.get("range") for r in fake.served("GET", "model.safetensors")]
    assert ranges and ranges[0] and ranges[0].startswith("bytes=")


def test_unreachable_hub_is_a_plain_sentence(qtbot, window, fake):
    w = window.welcome
    fake.down = True
    w.download_button.click()
    _wait_job(qtbot, w)
    text = w.message()
    _plain(text)
    assert "cannot be reached" in text and "Check that this computer is online" in text
    assert "folder" in text and "without a connection" in text
    assert w.download_button.isEnabled() and w.download_button.isVisible()
    assert window.controller.model is None

    fake.down = False  # the connection is back: the same button tries again
    with qtbot.waitSignal(window.controller.model_changed, timeout=20000):
        w.download_button.click()
    assert w.message() == ""


def test_a_download_cut_off_says_what_it_kept(qtbot, window, fake):
    """The hub went away mid-download: the progress line went, only "cannot be reached" stayed, and nothing said
    that the 15 MB already fetched were kept (first-run QA); a cancel said so. It says so now too."""
    from engine import hub

    w = window.welcome
    fake.rate = 4_000_000
    fake.drop_at["model.safetensors"] = 14_000_000
    fake.down_after_drop = True
    w.download_button.click()
    _wait_job(qtbot, w)
    assert "cannot be reached" in w.message()
    kept = hub.kept_bytes(w.entry.repo_id)
    assert kept > 10_000_000
    assert w.progress_label.isVisible()
    assert w.progress_label.text() == f"{hub.format_bytes(kept)} kept; \u201cResume download\u201d continues there."


def test_offline_mode_says_so_and_offers_folders(qtbot, fake, controller, settings, fake_sd, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    fake.requests.clear()
    w = MainWindow(controller, settings, sounddevice=fake_sd)
    qtbot.addWidget(w)
    _plain(w.welcome.message())
    assert "Offline mode is on" in w.welcome.message() and "folder" in w.welcome.message()
    assert not w.welcome.download_button.isEnabled()
    assert fake.requests == []


def test_installed_recommendation_is_one_click_and_folder_button(qtbot, window, fake, monkeypatch):
    from PySide6.QtWidgets import QFileDialog

    from engine import install

    e = catalog_entry("moonshine-streaming-small")
    install.install_model(e.repo_id, revision=e.revision, allow_patterns=e.allow_patterns, required=e.required_files)
    window.welcome.refresh()
    assert window.welcome.download_button.text() == "Use Moonshine Streaming small"
    asked = []
    monkeypatch.setattr(QFileDialog, "getExistingDirectory", staticmethod(lambda *a: asked.append(a) or ""))
    window.welcome.folder_button.click()
    assert asked  # "Add a model folder..." asks for a folder
    with qtbot.waitSignal(window.controller.model_changed, timeout=5000):
        window.welcome.download_button.click()
    assert window.controller.model.source == e.repo_id


def test_the_welcome_follows_what_the_model_dialog_did(qtbot, window, fake, monkeypatch):
    """Downloading the recommended model in "More models..." and closing the dialog left the welcome offering
    "Download (562 MB)" for a model now on this computer (found in QA)."""
    from app import model_dialog
    from engine import install

    assert window.welcome.download_button.text() == "Download (562 MB)"
    e = catalog_entry("moonshine-streaming-small")

    def download_then_close(parent, settings=None):
        install.install_model(
            e.repo_id, revision=e.revision, allow_patterns=e.allow_patterns, required=e.required_files
        )
        return None  # Close, nothing chosen

    monkeypatch.setattr(model_dialog, "choose_model", download_then_close)
    window.welcome.more_button.click()
    assert window.welcome.download_button.text() == "Use Moonshine Streaming small"


def test_a_chosen_model_not_on_this_computer_is_offered_for_download(qtbot, window, fake, settings):
    """``livecap --model <catalog id>`` (or a saved model deleted since) downloaded the whole model inside
    "Loading the model...", with no progress and no Cancel, like a hang (found in QA)."""
    tiny = catalog_entry("moonshine-streaming-tiny")
    window.load_model(tiny.repo_id, "numpy", 8)
    w = window.welcome
    assert window.controller.state == "no-model" and window.caption_stack.currentWidget() is w
    assert "The chosen model" in w.model_label.text() and "Moonshine Streaming tiny" in w.model_label.text()
    assert w.download_button.text() == "Download (178 MB)" and window.focusWidget() is w.download_button
    with qtbot.waitSignal(window.controller.model_changed, timeout=20000):
        w.download_button.click()
        assert not w.cancel_button.isHidden()  # progress and Cancel, as for the recommended model
    assert window.controller.model.source == tiny.repo_id and settings.value(Key.MODEL_SOURCE) == tiny.repo_id
    assert window.controller.model.bits == 8 and window.controller.model.backend == "numpy"  # the run's choices


def test_the_model_dialog_waits_for_a_welcome_download(qtbot, window, fake, monkeypatch):
    """While the welcome downloaded a model, "More models..." offered the same model a second download beside it
    (found in QA)."""
    from app import model_dialog

    opened = []
    monkeypatch.setattr(model_dialog, "choose_model", lambda *a, **k: opened.append(a))
    fake.rate = 1_000_000
    window.welcome.download_button.click()
    assert window.welcome.busy
    window.welcome.more_button.click()
    assert not opened and window.banner.label.text() == (
        "A model is downloading on the welcome page; cancel it or let it finish."
    )
    window.welcome.cancel()
    _wait_job(qtbot, window.welcome)


def test_a_model_folder_waits_for_a_welcome_download(qtbot, window, fake, monkeypatch):
    """ "Add a model folder..." during the welcome's download loaded the folder, and when the download ended unseen
    it loaded its own model over it, in the middle of the session the user had started (QA)."""
    from PySide6.QtWidgets import QFileDialog

    asked = []
    monkeypatch.setattr(QFileDialog, "getExistingDirectory", staticmethod(lambda *a, **k: asked.append(a) or ""))
    fake.rate = 1_000_000
    window.welcome.download_button.click()
    window.welcome.folder_button.click()
    assert not asked and window.banner.label.text() == (
        "A model is downloading on the welcome page; cancel it or let it finish."
    )
    window.welcome.cancel()
    _wait_job(qtbot, window.welcome)
    window.welcome.folder_button.click()
    assert len(asked) == 1


def test_cancel_by_keyboard_leaves_the_focus_on_resume(qtbot, window, fake):
    """Space on Download, Space on Cancel: the focus went on to "Add a model folder...", so the next Space opened a
    file dialog instead of resuming the download (QA, real key presses)."""
    w = window.welcome
    fake.rate = 4_000_000
    assert window.focusWidget() is w.download_button
    QTest.keyClick(w.download_button, Qt.Key.Key_Space)
    assert window.focusWidget() is w.cancel_button
    qtbot.waitUntil(lambda: w._last is not None and w._last.done > 12_000_000, timeout=20000)
    QTest.keyClick(w.cancel_button, Qt.Key.Key_Space)
    _wait_job(qtbot, w)
    assert w.download_button.text().startswith("Resume download") and window.focusWidget() is w.download_button


def test_a_cache_folder_that_cannot_be_written_is_named(qtbot, window, fake, monkeypatch, tmp_path):
    """A read-only (or impossible) model cache was "The download ... did not finish. Try again", which failed the
    same way every time; the cause was only in the log (QA)."""
    blocker = tmp_path / "notes.txt"
    blocker.write_text("not a folder")
    monkeypatch.setenv("HF_HOME", str(blocker / "hf"))
    w = window.welcome
    w.download_button.click()
    _wait_job(qtbot, w)
    text = w.message()
    assert text == (
        f"livecap cannot store models in {blocker / 'hf' / 'hub'}: not a directory. Set HF_HOME to a folder it can "
        "write, or make this one writable."
    )
    assert "Error" not in text and "errno" not in text.lower()


def test_a_stalled_download_says_it_waits_instead_of_an_old_time_left(qtbot, window, fake, monkeypatch):
    """The server stopped sending mid-file: "15.0 MB of 22.2 MB · 2.9 MB/s · about 2 s left" stayed for 12 s while
    no byte arrived (QA)."""
    from app import downloads

    monkeypatch.setattr(downloads, "STALL_S", 0.5)
    w = window.welcome
    fake.rate = 4_000_000
    fake.stall_at["model.safetensors"] = 6_000_000
    w.download_button.click()
    qtbot.waitUntil(lambda: "waiting for the server" in w.progress_label.text(), timeout=15000)
    assert "left" not in w.progress_label.text() and "/s" not in w.progress_label.text()
    with qtbot.waitSignal(window.controller.model_changed, timeout=30000):
        fake.release.set()
        qtbot.waitUntil(lambda: "waiting for the server" not in w.progress_label.text(), timeout=15000)


def test_a_failed_load_brings_the_welcome_back(qtbot, window):
    with qtbot.waitSignal(window.controller.model_changed, timeout=5000):
        window.load_model("fake-moonshine")
    assert window.caption_stack.currentWidget() is window.caption_view
    with qtbot.waitSignal(window.controller.model_failed, timeout=5000):
        window.load_model("/nowhere/broken")
    assert window.caption_stack.currentWidget() is window.welcome


@pytest.mark.parametrize("exc_name", ["HubUnreachableError", "OSError", "ConnectionError", "HubError", "RuntimeError"])
def test_download_problem_never_shows_raw_errors(fake, exc_name):
    from app.hub_messages import download_problem
    from engine import hub as H

    exc = {
        "HubUnreachableError": H.HubUnreachableError("The hub at x cannot be reached ([Errno 111] Connection refused)"),
        "OSError": OSError(111, "Connection refused"),
        "ConnectionError": ConnectionError("[Errno 104] reset"),
        "HubError": H.HubError("Downloading a/b failed (KeyError: 'etag')."),
        "RuntimeError": RuntimeError("boom"),
    }[exc_name]
    _plain(download_problem(exc, "Moonshine Streaming small"))


def test_a_damaged_model_list_is_said_as_such(qtbot, monkeypatch, tmp_path):
    """livecap's own catalog file damaged: the welcome said "No model is recommended for this computer" and sent
    the user to "More models...", which listed nothing (found in QA)."""
    from app.welcome import WelcomePanel
    from engine import catalog
    from engine.errors import ModelError

    bad = tmp_path / "catalog.json"
    bad.write_text("{not json")
    monkeypatch.setattr(catalog, "catalog_path", lambda: bad)
    with pytest.raises(ModelError) as err:
        catalog.load_catalog()
    w = WelcomePanel()
    qtbot.addWidget(w)
    text = w.model_label.text()
    assert text.startswith(str(err.value)) and "reinstalling it brings it back" in text
    assert w.download_button.isHidden() and w.folder_button.isEnabled()


def test_the_welcome_shown_again_after_a_failed_load_says_nothing_of_the_old_download(qtbot, window, fake):
    """Download the recommended model on the welcome (it loads), then a later load fails: the welcome came back
    with "Moonshine Streaming small is downloaded; loading it..." and a full progress bar beside "Use Moonshine
    Streaming small", while nothing was loading (first-run QA)."""
    w = window.welcome
    with qtbot.waitSignal(window.controller.model_changed, timeout=20000):
        w.download_button.click()
    assert window.caption_stack.currentWidget() is window.caption_view
    with qtbot.waitSignal(window.controller.model_failed, timeout=5000):
        window.load_model("/nowhere/broken")
    assert window.caption_stack.currentWidget() is w
    assert w.download_button.text() == "Use Moonshine Streaming small" and w.download_button.isVisible()
    assert w.progress_label.isHidden() and w.progress_bar.isHidden(), w.progress_label.text()
    assert w.cancel_button.isHidden() and w.message() == ""
