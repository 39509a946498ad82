"""Export: SRT / WebVTT / TXT round-trips through the dialog; an unwritable path is a message."""

from __future__ import annotations

import html
import io
from datetime import timedelta

import pytest
import srt
import webvtt
from PySide6.QtWidgets import QDialog

from app.export import FORMATS, format_by_key
from app.export_dialog import ExportDialog
from engine.events import Line

LINES = [
    Line("Good morning, everyone.", 0.5, 2.25),
    Line("Today we talk about <tags> & ampersands.", 2.5, 5.0),
    Line("Thanks for listening.", 61.0, 63.5),
]


def export_with(qtbot, tmp_path, key: str) -> str:
    dialog = ExportDialog(LINES, folder=str(tmp_path), fmt_key=key)
    qtbot.addWidget(dialog)
    assert dialog.format.key == key
    assert dialog.path().parent == tmp_path and dialog.path().suffix == format_by_key(key).suffix
    dialog.accept()
    assert dialog.result() == QDialog.DialogCode.Accepted
    assert dialog.saved_path == dialog.path()
    return dialog.saved_path.read_text(encoding="utf-8")


def test_srt_round_trip(qtbot, tmp_path):
    subs = list(srt.parse(export_with(qtbot, tmp_path, "srt")))
    joined = " ".join(s.content.replace("\n", " ") for s in subs).replace("\u2060", "")  # a joiner after "<"
    assert joined == " ".join(line.text for line in LINES)
    assert subs[0].start == timedelta(seconds=0.5)
    assert subs[-1].start == timedelta(seconds=61)
    assert [s.index for s in subs] == list(range(1, len(subs) + 1))


def test_webvtt_round_trip(qtbot, tmp_path):
    text = export_with(qtbot, tmp_path, "vtt")
    captions = webvtt.from_buffer(io.StringIO(text))
    joined = html.unescape(" ".join(c.text.replace("\n", " ") for c in captions))  # payload is escaped
    assert joined == " ".join(line.text for line in LINES)
    assert captions[0].start_in_seconds == 0 and captions[0].start.endswith("00.500")
    assert captions[-1].start_in_seconds == 61


def test_no_time_past_the_audio(qtbot, tmp_path):
    """With the audio's length (the session's), the last cue ends by it, in the preview and the file."""
    lines = [LINES[0], Line("Thanks.", 61.0, 61.2)]  # shown for 0.83 s, but the audio ends at 61.5 s
    dialog = ExportDialog(lines, folder=str(tmp_path), fmt_key="srt", audio_end=61.5)
    qtbot.addWidget(dialog)
    assert "00:01:01,000 --> 00:01:01,500" in dialog.preview.toPlainText()
    dialog.accept()
    subs = list(srt.parse(dialog.saved_path.read_text(encoding="utf-8")))
    assert subs[-1].end == timedelta(seconds=61.5)
    loose = ExportDialog(lines, folder=str(tmp_path), fmt_key="srt")  # length unknown: as before
    qtbot.addWidget(loose)
    assert "00:01:01,000 --> 00:01:01,830" in loose.preview.toPlainText()


def test_txt_with_and_without_timestamps(qtbot, tmp_path):
    plain = export_with(qtbot, tmp_path / "", "txt")
    assert plain == "".join(line.text + "\n" for line in LINES)
    (tmp_path / "ts").mkdir()
    stamped = export_with(qtbot, tmp_path / "ts", "txt-ts")
    assert stamped.splitlines()[0] == "[00:00:00.500 --> 00:00:02.250] Good morning, everyone."


def test_format_change_updates_suffix_and_preview(qtbot, tmp_path):
    dialog = ExportDialog(LINES, folder=str(tmp_path), fmt_key="srt")
    qtbot.addWidget(dialog)
    assert "-->" in dialog.preview.toPlainText() and "," in dialog.preview.toPlainText()
    dialog.format_combo.setCurrentIndex([f.key for f in FORMATS].index("vtt"))
    assert dialog.path().suffix == ".vtt"
    assert dialog.preview.toPlainText().startswith("WEBVTT")


@pytest.mark.parametrize("where", ["missing-folder", "a-file"])
def test_unwritable_path_shows_one_sentence_and_stays_open(qtbot, tmp_path, where):
    (tmp_path / "a-file").write_text("x")
    target = tmp_path / where / "out.srt"
    dialog = ExportDialog(LINES, folder=str(tmp_path), fmt_key="srt")
    qtbot.addWidget(dialog)
    dialog.path_edit.setText(str(target))
    dialog.accept()
    assert dialog.result() != QDialog.DialogCode.Accepted and dialog.saved_path is None
    message = dialog.error_label.text()
    assert not dialog.error_label.isHidden()
    assert message.startswith("Cannot write the transcript to") and "\n" not in message and "Traceback" not in message
    assert not target.exists()


def test_replacing_an_existing_file_asks_first(qtbot, tmp_path, monkeypatch):
    """Plain text with timestamps, then plain text: both are .txt, so the second export asks before it
    replaces the first."""
    from PySide6.QtWidgets import QMessageBox

    first = ExportDialog(LINES, folder=str(tmp_path), fmt_key="txt-ts")
    qtbot.addWidget(first)
    first.accept()
    target = first.saved_path
    stamped = target.read_text(encoding="utf-8")
    second = ExportDialog(LINES, folder=str(tmp_path), fmt_key="txt-ts")
    qtbot.addWidget(second)
    second.path_edit.setText(str(target))
    second.format_combo.setCurrentIndex([f.key for f in FORMATS].index("txt"))
    assert second.path() == target
    asked = []
    answer = {"value": QMessageBox.StandardButton.No}

    def question(parent, title, text, buttons, default):
        asked.append(text)
        return answer["value"]

    monkeypatch.setattr(QMessageBox, "question", staticmethod(question))
    second.accept()
    assert asked and target.name in asked[0] and second.saved_path is None
    assert second.result() != QDialog.DialogCode.Accepted
    assert target.read_text(encoding="utf-8") == stamped  # kept
    answer["value"] = QMessageBox.StandardButton.Yes
    second.accept()
    assert second.saved_path == target and target.read_text(encoding="utf-8") != stamped
    assert len(asked) == 2


def test_a_name_that_names_another_format_is_refused_not_written(qtbot, tmp_path):
    """SRT chosen and notes.txt typed: the SRT text was saved as notes.txt without a word (found in QA)."""
    dialog = ExportDialog(LINES, folder=str(tmp_path), fmt_key="srt")
    qtbot.addWidget(dialog)
    dialog.path_edit.setText(str(tmp_path / "notes.txt"))
    dialog.accept()
    assert dialog.result() != QDialog.DialogCode.Accepted and not (tmp_path / "notes.txt").exists()
    assert dialog.error_label.text() == (
        "The file name ends in .txt but the format is "
        + format_by_key("srt").label
        + "; change the name or the format."
    )
    dialog.path_edit.setText(str(tmp_path / "notes.final"))  # not a transcript extension: written as typed
    dialog.accept()
    assert dialog.saved_path == tmp_path / "notes.final" and (tmp_path / "notes.final").read_text().startswith("1\n")


@pytest.mark.parametrize(
    ("typed", "shown"),
    [
        ("meeting 3.5.2026", "meeting 3.5.2026.vtt"),  # ".2026" was taken for an extension and replaced
        ("transcript.final", "transcript.final.vtt"),
        ("talk.SRT", "talk.vtt"),
        ("talk.txt", "talk.vtt"),
    ],
)
def test_a_format_change_swaps_only_a_transcript_extension(qtbot, tmp_path, typed, shown):
    dialog = ExportDialog(LINES, folder=str(tmp_path), fmt_key="srt")
    qtbot.addWidget(dialog)
    dialog.path_edit.setText(str(tmp_path / typed))
    dialog.format_combo.setCurrentIndex([f.key for f in FORMATS].index("vtt"))
    assert dialog.path() == tmp_path / shown


def test_a_folder_typed_as_the_name_stays_a_folder(qtbot, tmp_path):
    dialog = ExportDialog(LINES, folder=str(tmp_path), fmt_key="srt")
    qtbot.addWidget(dialog)
    dialog.path_edit.setText(str(tmp_path) + "/")
    dialog.format_combo.setCurrentIndex([f.key for f in FORMATS].index("vtt"))
    assert dialog.path_edit.text() == str(tmp_path) + "/"  # it became <folder>.vtt, a new file beside it


def test_a_past_sessions_export_is_named_by_its_start(qtbot, tmp_path):
    dialog = ExportDialog(LINES, folder=str(tmp_path), fmt_key="srt", started="2025-03-07T18:42:05")
    qtbot.addWidget(dialog)
    assert dialog.path().name == "livecap-2025-03-07-1842.srt"


def test_a_session_of_blank_lines_has_nothing_to_export(qtbot, tmp_path):
    """Moonshine commits lines with ids and no text: Export was enabled and wrote a 0-byte SRT (export QA)."""
    folder = tmp_path / "out"
    folder.mkdir()
    dialog = ExportDialog([Line("   ", 0.0, 1.0), Line("", 1.0, 2.0)], folder=str(folder), fmt_key="srt")
    qtbot.addWidget(dialog)
    assert not dialog.export_button.isEnabled() and dialog.summary.text() == "0 lines to export."
    dialog.accept()
    assert list(folder.iterdir()) == []


def test_a_name_typed_without_an_extension_is_given_the_formats(qtbot, tmp_path):
    """'notes' typed with SRT chosen was written as 'notes', a file players and file managers do not know."""
    folder = tmp_path / "out"
    folder.mkdir()
    dialog = ExportDialog(LINES, folder=str(folder), fmt_key="srt")
    qtbot.addWidget(dialog)
    dialog.path_edit.setText(str(folder / "notes"))
    dialog.accept()
    assert dialog.saved_path == folder / "notes.srt" and [f.name for f in folder.iterdir()] == ["notes.srt"]
    assert dialog.path_edit.text() == str(folder / "notes.srt")
    dialog.path_edit.setText(str(folder / "minutes."))  # not "minutes..srt"
    dialog.accept()
    assert dialog.saved_path == folder / "minutes.srt"
    (folder / "Documents").mkdir()
    dialog.path_edit.setText(str(folder / "Documents"))  # a folder: said, not written as "Documents.srt" beside it
    dialog.accept()
    assert dialog.saved_path == folder / "minutes.srt" and "is a directory" in dialog.error_label.text()
    assert sorted(f.name for f in folder.iterdir()) == ["Documents", "minutes.srt", "notes.srt"]


def test_a_name_with_a_date_gets_the_formats_extension_and_blank_lines_leave_the_preview_filled(qtbot, tmp_path):
    """'meeting 3.5.2026' was written as an SRT file with no extension (".2026" taken for one), and a transcript
    whose first 12 lines were blank showed an empty preview under "1 line — preview:" (QA)."""
    lines = [Line("", float(i), i + 0.5) for i in range(12)] + [Line("Finally some words.", 20.0, 21.0)]
    dialog = ExportDialog(lines, folder=str(tmp_path), fmt_key="srt")
    qtbot.addWidget(dialog)
    assert "Finally some words." in dialog.preview.toPlainText()
    dialog.path_edit.setText(str(tmp_path / "meeting 3.5.2026"))
    dialog.accept()
    assert dialog.saved_path == tmp_path / "meeting 3.5.2026.srt"
    assert [s.content for s in srt.parse(dialog.saved_path.read_text(encoding="utf-8"))] == ["Finally some words."]


@pytest.mark.parametrize(
    "title", ["取締役会の議事録" * 13, "\U0001f468\u200d\U0001f469\u200d\U0001f467" * 40, "é" * 200]
)
def test_a_long_title_offers_a_name_the_file_system_takes(qtbot, tmp_path, title):
    """Review: the name offered from a session's title was cut at 80 characters, and 80 kanji are 240 bytes of
    the 255 a file name holds: Save raised OSError ("File name too long") into the unexpected-error handler."""
    dialog = ExportDialog(LINES, folder=str(tmp_path), fmt_key="srt", started="2025-03-07T18:42:05", title=title)
    qtbot.addWidget(dialog)
    name = dialog.path().name
    assert len(name.encode()) <= 200 and name.endswith(" 2025-03-07-1842.srt") and title.startswith(name[:4])
    dialog.accept()
    assert dialog.result() == QDialog.DialogCode.Accepted and dialog.saved_path.is_file()


def test_a_title_with_a_lone_surrogate_still_names_the_file():
    """Second review: a title with a lone surrogate (a hand-edited session file) raised UnicodeEncodeError when the
    dialog opened; a family emoji cut at the limit left a dangling zero-width joiner at the end of the name."""
    from app.export_dialog import default_file_name

    fmt = format_by_key("srt")
    name = default_file_name(fmt, "2025-03-07T18:42:05", "Call with \ud83d team")
    assert name == "Call with team 2025-03-07-1842.srt"
    family = "\U0001f468\u200d\U0001f469\u200d\U0001f467"
    for n in range(1, 40):
        stem = default_file_name(fmt, "2025-03-07T18:42:05", family * n).removesuffix(" 2025-03-07-1842.srt")
        assert not stem.endswith(("\u200d", "\ufe0f")), n


def test_a_name_too_long_for_the_file_system_is_one_sentence(qtbot, tmp_path):
    """Typed by hand, a name over 255 bytes raised OSError from is_file() out of the dialog; it is said, and the
    dialog stays open."""
    folder = tmp_path / "out"
    folder.mkdir()
    dialog = ExportDialog(LINES, folder=str(folder), fmt_key="srt")
    qtbot.addWidget(dialog)
    dialog.path_edit.setText(str(folder / ("x" * 300 + ".srt")))
    dialog.accept()
    assert dialog.result() != QDialog.DialogCode.Accepted and dialog.saved_path is None
    assert "could not be saved" in dialog.error_label.text() and "file name too long" in dialog.error_label.text()
    assert list(folder.iterdir()) == []
