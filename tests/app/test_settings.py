"""Typed settings over an INI file."""

from __future__ import annotations

import pytest

from app.settings import DELAY_CHOICES_MS, Key, Settings, Shortcut


def test_defaults_types_and_persistence(tmp_path):
    path = tmp_path / "s.ini"
    s = Settings(path)
    assert s.value(Key.DELAY_MS) == 480 and s.value(Key.OVERLAY_CLICK_THROUGH) is False
    assert s.value(Key.OVERLAY_OPACITY) == pytest.approx(0.8)
    s.set_value(Key.DELAY_MS, 960)
    s.set_value(Key.OVERLAY_CLICK_THROUGH, True)
    s.set_value(Key.OVERLAY_GEOMETRY, b"\x01\x02geometry")
    s.set_value(Key.MODEL_SOURCE, "/models/moonshine-tiny")
    s.sync()
    t = Settings(path)
    assert t.value(Key.DELAY_MS) == 960
    assert t.value(Key.OVERLAY_CLICK_THROUGH) is True
    assert t.value(Key.OVERLAY_GEOMETRY) == b"\x01\x02geometry"
    assert t.value(Key.MODEL_SOURCE) == "/models/moonshine-tiny"
    with pytest.raises(TypeError):
        t.set_value(Key.DELAY_MS, "960")


def test_bad_values_fall_back_to_defaults(tmp_path):
    path = tmp_path / "s.ini"
    path.write_text("[model]\ndelay-ms=soon\n[overlay]\nopacity=lots\n")
    s = Settings(path)
    assert s.value(Key.DELAY_MS) == 480
    assert s.value(Key.OVERLAY_OPACITY) == pytest.approx(0.8)


def test_unknown_choices_and_colours_read_as_the_defaults(tmp_path):
    # a hand edit or a newer version's value: "cuda" stopped every model load; "notacolor" drew black on black
    path = tmp_path / "s.ini"
    path.write_text(
        "[model]\nbackend=cuda\nweights=2-bit\n[ui]\ntheme=solarized\n"
        "[overlay]\ntext-color=notacolor\nbackground-color=\n"
    )
    s = Settings(path)
    assert s.value(Key.BACKEND) == "auto" and s.value(Key.WEIGHTS) == "stored" and s.value(Key.THEME) == "system"
    assert (s.value(Key.OVERLAY_TEXT_COLOR), s.value(Key.OVERLAY_BG_COLOR)) == ("#ffffff", "#101010")
    path.write_text("[model]\nbackend=numpy\nweights=8-bit\n[ui]\ntheme=dark\n[overlay]\ntext-color=yellow\n")
    s = Settings(path)
    assert (s.value(Key.BACKEND), s.value(Key.WEIGHTS), s.value(Key.THEME)) == ("numpy", "8-bit", "dark")
    assert s.value(Key.OVERLAY_TEXT_COLOR) == "yellow"


def test_shortcuts_have_defaults_and_overrides(tmp_path):
    path = tmp_path / "s.ini"
    path.write_text("[shortcuts]\nexport=Ctrl+Shift+E\n")
    s = Settings(path)
    assert s.shortcut(Shortcut.START_PAUSE) == "Space"
    assert s.shortcut(Shortcut.EXPORT) == "Ctrl+Shift+E"


def test_delay_choices():
    assert DELAY_CHOICES_MS[0] == 80 and DELAY_CHOICES_MS[-2] == 1200 and DELAY_CHOICES_MS[-1] == 2400
    assert all(b - a == 80 for a, b in zip(DELAY_CHOICES_MS[:-2], DELAY_CHOICES_MS[1:-1]))


def test_a_settings_file_that_cannot_be_written_is_said_not_silently_ignored(tmp_path):
    """A settings file that cannot be written (QA: a read-only mount) lost every choice ("Keep audio", the model)
    at the next start without a word; the app now shows this sentence at start. A file standing where the
    settings folder should be is unwritable even for root, as a read-only mount is."""
    assert Settings(tmp_path / "s.ini").problem() is None
    (tmp_path / "config").write_text("a file, not a folder")
    path = tmp_path / "config" / "s.ini"
    assert (
        Settings(path).problem()
        == f"Settings cannot be saved ({path} cannot be written); changes last until livecap quits."
    )
