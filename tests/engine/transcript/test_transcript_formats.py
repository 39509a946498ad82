"""SRT / WebVTT / TXT / JSON text: parsed back with the `srt` and `webvtt-py` libraries."""

from __future__ import annotations

import html
import json
import re

import pytest
import srt
import webvtt
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.errors import UsageError
from engine.events import Line, Word
from engine.transcript import (
    format_for_path,
    format_json,
    format_srt,
    format_timestamp,
    format_transcript,
    format_txt,
    format_vtt,
    make_cues,
)

LINES = [
    Line("Hello there, my friend.", 0.5, 2.0, tokens=(1, 2, 3)),
    Line("This is a rather long sentence that will need two lines, if not two cues, to be shown.", 2.4, 7.9),
    Line("今天天气很好，我们去公园散步吧。然后我们可以在湖边吃午饭，看看风景，再回家休息一下。", 9.0, 16.0),
    Line("  spaced\n out  ", 3725.25, 3726.0, words=(Word("spaced", 3725.25, 3725.6), Word("out", 3725.7, 3726.0))),
]

SRT_TIME = r"\d{2,}:\d{2}:\d{2},\d{3}"
VTT_TIME = r"\d{2,}:\d{2}:\d{2}\.\d{3}"


def squash(text: str) -> str:
    return "".join(text.split())


def vtt_seconds(stamp: str) -> float:
    h, m, s = stamp.split(":")
    return int(h) * 3600 + int(m) * 60 + float(s)


# ---------------------------------------------------------------- timestamps


@pytest.mark.parametrize(
    "t,sep,expected",
    [
        (0.0, ",", "00:00:00,000"),
        (1.5, ".", "00:00:01.500"),
        (59.9996, ".", "00:01:00.000"),
        (3661.2344, ",", "01:01:01,234"),
        (360000.0, ".", "100:00:00.000"),
        (-3.0, ",", "00:00:00,000"),
        (0.0004, ".", "00:00:00.000"),
        (0.0006, ".", "00:00:00.001"),
    ],
)
def test_format_timestamp(t, sep, expected):
    assert format_timestamp(t, sep) == expected


# ---------------------------------------------------------------- SRT


def test_srt_layout_and_round_trip():
    text = format_srt(LINES)
    cues = make_cues(LINES)
    blocks = text.split("\n\n")
    assert len(blocks) == len(cues) and text.endswith("\n") and not text.endswith("\n\n")
    for k, block in enumerate(blocks, 1):
        rows = block.strip("\n").split("\n")
        assert rows[0] == str(k)
        assert re.fullmatch(f"{SRT_TIME} --> {SRT_TIME}", rows[1])
    subs = list(srt.parse(text))
    assert [s.index for s in subs] == list(range(1, len(cues) + 1))
    for sub, cue in zip(subs, cues):
        assert sub.content == "\n".join(cue.lines)
        assert sub.start.total_seconds() == pytest.approx(cue.start, abs=5e-4)
        assert sub.end.total_seconds() == pytest.approx(cue.end, abs=5e-4)
    assert squash("".join(s.content for s in subs)) == squash("".join(l.text for l in LINES))
    assert subs[0].start.total_seconds() == 0.5
    assert "01:02:05,250 -->" in text


def test_srt_empty():
    assert format_srt([]) == ""
    assert list(srt.parse(format_srt([Line(" ", 0, 1)]))) == []


def test_srt_cue_options_pass_through():
    text = format_srt([Line("aaaa bbbb", 0.0, 9.0)], max_chars=4, max_lines=1)
    assert [s.content for s in srt.parse(text)] == ["aaaa", "bbbb"]


SAFE = "abcdefghijklmnopqrstuvwxyzABC0123456789.,!?'éü今天天气。、"
safe_words = st.text(alphabet=SAFE, min_size=1, max_size=50)


@st.composite
def transcripts(draw) -> list[Line]:
    lines, t = [], draw(st.floats(0, 4000))
    for _ in range(draw(st.integers(0, 6))):
        words = draw(st.lists(safe_words, min_size=1, max_size=30))
        t += draw(st.floats(0, 3))
        dur = draw(st.floats(0, 12))
        lines.append(Line(" ".join(words), t, t + dur))
        t += dur
    return lines


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(transcripts())
def test_srt_round_trip_property(lines):
    subs = list(srt.parse(format_srt(lines)))
    cues = make_cues(lines)
    assert len(subs) == len(cues)
    assert squash("".join(s.content for s in subs)) == squash("".join(l.text for l in lines))
    for a, b in zip(subs, subs[1:]):
        assert a.start <= a.end <= b.start
    for sub, cue in zip(subs, cues):
        assert sub.content.split("\n") == list(cue.lines)
        assert abs(sub.start.total_seconds() - cue.start) <= 5e-4


# ---------------------------------------------------------------- WebVTT


def test_srt_text_that_looks_like_markup_is_not_read_as_markup():
    """SubRip has no escapes: players (ffmpeg's decoder, so mpv) showed "a < b and c > d" as "a d" with " d" in
    bold, dropped "<html>" and broke the line at "C:\\New" (export QA). A word joiner after each "<" and
    backslash keeps them text; the characters shown stay the same."""
    text = "a < b and c > d, <html> and <i>x</i> at C:\\New\\hint"
    out = format_srt([Line(text, 1.0, 3.0)])
    assert not re.search(r"<[A-Za-z/ ]|\\[A-Za-z]", out)
    [sub] = srt.parse(out)
    assert squash(sub.content.replace("\u2060", "")) == squash(text)


def test_vtt_layout_and_round_trip():
    text = format_vtt(LINES)
    assert text.startswith("WEBVTT\n\n")
    stamps = re.findall(f"^({VTT_TIME}) --> ({VTT_TIME})$", text, flags=re.M)
    cues = make_cues(LINES)
    assert len(stamps) == len(cues)
    parsed = list(webvtt.from_string(text))
    assert len(parsed) == len(cues)
    for cap, cue in zip(parsed, cues):
        assert cap.lines == list(cue.lines)
        assert vtt_seconds(cap.start) == pytest.approx(cue.start, abs=5e-4)
        assert vtt_seconds(cap.end) == pytest.approx(cue.end, abs=5e-4)
    assert "01:02:05.250 -->" in text


def test_vtt_escapes_markup():
    line = Line("a < b && c > d --> e", 0.0, 2.0)
    text = format_vtt([line])
    assert "-->" not in text.split("\n", 3)[3]
    [cap] = list(webvtt.from_string(text))
    assert html.unescape(cap.raw_text) == line.text


def test_vtt_empty():
    assert format_vtt([]) == "WEBVTT\n"
    assert list(webvtt.from_string(format_vtt([]))) == []


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(transcripts())
def test_vtt_round_trip_property(lines):
    parsed = list(webvtt.from_string(format_vtt(lines)))
    cues = make_cues(lines)
    assert [c.lines for c in parsed] == [list(c.lines) for c in cues]
    for cap, cue in zip(parsed, cues):
        assert abs(vtt_seconds(cap.start) - cue.start) <= 5e-4
        assert abs(vtt_seconds(cap.end) - cue.end) <= 5e-4


# ---------------------------------------------------------------- TXT and JSON


def test_txt_plain():
    lines = [Line("Hello there.", 0, 1), Line("", 1, 2), Line(" two\nrows ", 2, 3)]
    assert format_txt(lines) == "Hello there.\ntwo rows\n"
    assert format_txt([]) == ""


def test_txt_timestamps():
    lines = [Line("Hello there.", 0.5, 1.25), Line("Later.", 3725.0, 3726.5)]
    assert format_txt(lines, timestamps=True) == (
        "[00:00:00.500 --> 00:00:01.250] Hello there.\n[01:02:05.000 --> 01:02:06.500] Later.\n"
    )


def test_json():
    data = json.loads(format_json(LINES))
    assert len(data) == len(LINES)
    assert data[0] == {"start": 0.5, "end": 2.0, "text": "Hello there, my friend.", "tokens": [1, 2, 3]}
    assert "tokens" not in data[1] and "words" not in data[1]
    assert data[2]["text"] == LINES[2].text  # non-ASCII kept as is
    assert "今天" in format_json(LINES)
    assert data[3]["words"] == [
        {"text": "spaced", "start": 3725.25, "end": 3725.6},
        {"text": "out", "start": 3725.7, "end": 3726.0},
    ]
    assert json.loads(format_json([])) == []


# ---------------------------------------------------------------- the end of the audio


def test_no_format_writes_a_time_past_the_audio():
    """Every format takes the audio's length: no time written passes it (lines the session timed past the
    end are written at the end; the last cue is not extended into silence that is not there)."""
    words = (Word("Yes", 9.5, 9.9), Word("indeed.", 9.9, 10.8))
    lines = [Line("Early.", 1.0, 2.0), Line("Yes indeed.", 9.5, 10.8, words=words)]
    end = 9.963
    for fmt in ("srt", "vtt"):
        text = format_transcript(lines, fmt, audio_end=end)
        stamps = re.findall(r"(\d\d):(\d\d):(\d\d)[.,](\d\d\d)", text)
        assert max(int(h) * 3600 + int(m) * 60 + int(s) + int(ms) / 1000 for h, m, s, ms in stamps) == end
        assert text == (format_srt if fmt == "srt" else format_vtt)(lines, audio_end=end)
    data = json.loads(format_transcript(lines, "json", audio_end=end))
    assert data[1]["end"] == end and data[1]["words"][1] == {"text": "indeed.", "start": 9.9, "end": end}
    assert data[0] == json.loads(format_json(lines))[0]
    assert format_transcript(lines, "txt", timestamps=True, audio_end=end).endswith(
        "[00:00:09.500 --> 00:00:09.963] Yes indeed.\n"
    )
    assert format_txt(lines, audio_end=end) == format_txt(lines)


def test_text_decoded_after_the_audio_gets_time_before_its_end():
    """Voxtral's last words, decoded after the audio ended (its delay), are timed at the end itself: JSON wrote
    them as words of no length (``["da", 13.952, 13.952]``, found in QA) and TXT as ``[end --> end]``. They take
    the time before the end as the SRT/VTT cues do, and the words keep their order."""
    end = 14.0
    before = Line(
        "It is all", 10.0, 12.0, words=(Word("It", 10.0, 10.5), Word("is", 10.6, 11.0), Word("all", 11.2, 12.0))
    )
    late = Line("over now", end, end, words=(Word("over", end, end), Word("now", end, end)))
    data = json.loads(format_json([before, late], audio_end=end))
    assert data[0] == json.loads(format_json([before]))[0]  # a Line that ends in time is as it was
    assert 12.0 <= data[1]["start"] < data[1]["end"] == end
    words = data[1]["words"]
    assert [w["text"] for w in words] == ["over", "now"]
    assert all(w["start"] < w["end"] for w in words) and words[0]["end"] <= words[1]["start"]
    assert words[0]["start"] == data[1]["start"] and words[-1]["end"] == end
    txt = format_txt([before, late], timestamps=True, audio_end=end)
    assert "[00:00:14.000 --> 00:00:14.000]" not in txt and txt.endswith(" --> 00:00:14.000] over now\n")


def test_last_words_of_a_line_at_the_audio_end_get_time_before_it():
    """A Line that began in time but whose last word was decoded after the audio: that word had no length."""
    end = 13.952
    words = (Word("Good", 12.0, 12.4), Word("night", 12.5, 13.0), Word("all", end, end))
    data = json.loads(format_json([Line("Good night all", 12.0, end, words=words)], audio_end=end))
    w = data[0]["words"]
    assert w[:2] == [{"text": "Good", "start": 12.0, "end": 12.4}, {"text": "night", "start": 12.5, "end": 13.0}]
    assert w[2]["text"] == "all" and 13.0 <= w[2]["start"] < w[2]["end"] == end
    # the word before runs to the end too: it gives up its second half at most
    words = (Word("Good", 12.0, 12.4), Word("night", 13.5, end), Word("all", end, end))
    w = json.loads(format_json([Line("Good night all", 12.0, end, words=words)], audio_end=end))[0]["words"]
    assert 13.5 < w[1]["end"] == w[2]["start"] < w[2]["end"] == end and w[1]["end"] >= 13.5 + (end - 13.5) / 2 - 1e-3


# ---------------------------------------------------------------- dispatch


def test_format_transcript_dispatch():
    assert format_transcript(LINES, "txt") == format_txt(LINES)
    assert format_transcript(LINES, "txt", timestamps=True) == format_txt(LINES, timestamps=True)
    assert format_transcript(LINES, "srt") == format_srt(LINES)
    assert format_transcript(LINES, "SRT") == format_srt(LINES)
    assert format_transcript(LINES, "vtt") == format_vtt(LINES)
    assert format_transcript(LINES, "json") == format_json(LINES)
    with pytest.raises(UsageError, match="'docx'"):
        format_transcript(LINES, "docx")


@pytest.mark.parametrize(
    "path,fmt",
    [("a.txt", "txt"), ("dir.x/b.SRT", "srt"), ("c.tar.vtt", "vtt"), ("/tmp/d.Json", "json")],
)
def test_format_for_path(path, fmt):
    assert format_for_path(path) == fmt


@pytest.mark.parametrize("path", ["a.docx", "noext", "srt", "dir.srt/file"])
def test_format_for_path_unknown(path):
    with pytest.raises(UsageError) as info:
        format_for_path(path)
    assert path in str(info.value)
