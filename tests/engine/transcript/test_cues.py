"""make_cues: the limits as properties (hypothesis) and the break/timing preferences as examples."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from engine.errors import UsageError
from engine.events import Line, Word
from engine.transcript import Cue, format_txt, make_cues

EPS = 1e-9
CJK = "今天天气很好我们去公园散步吧然后可以在湖边吃午饭看风景再回家休息一下これはとても長い文章ですカタカナ"
CJK_PUNCT = "。、，！？「」ーっゃ"


def squash(text: str) -> str:
    return "".join(text.split())


def check_cues(lines: list[Line], cues: list[Cue], *, max_chars=42, max_lines=2, min_dur=0.83, max_dur=7.0):
    """Every limit of the contract, for any input."""
    assert squash("".join("".join(c.lines) for c in cues)) == squash("".join(l.text for l in lines))
    for k, c in enumerate(cues):
        assert 1 <= len(c.lines) <= max_lines
        for t in c.lines:
            assert 1 <= len(t) <= max_chars, t
            assert t == t.strip() and "\n" not in t
        assert c.start <= c.end
        assert c.end - c.start <= max_dur + EPS
        if k + 1 < len(cues):
            nxt = cues[k + 1]
            assert c.start <= nxt.start
            assert c.end <= nxt.start + EPS
            assert c.end - c.start >= min(min_dur, nxt.start - c.start) - EPS
        else:
            assert c.end - c.start >= min_dur - EPS


# ---------------------------------------------------------------- strategies

LATIN = "abcdefghijklmnopqrstuvwxyzABCDE0123456789.,!?;:'\"()-"
latin_words = st.text(alphabet=LATIN, min_size=1, max_size=12)
long_words = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=40, max_size=130)
cjk_runs = st.text(alphabet=CJK + CJK_PUNCT, min_size=1, max_size=160)
any_words = st.text(min_size=1, max_size=50).filter(lambda s: s.strip() != "")
marked = st.lists(st.sampled_from(["e\u0301", "a", "n\u0303", "\u093f", "क"]), min_size=1, max_size=60).map("".join)


@st.composite
def line_texts(draw) -> str:
    kind = draw(st.sampled_from(["latin", "latin", "cjk", "mixed", "long", "any", "marked"]))
    if kind == "latin":
        words = draw(st.lists(latin_words, min_size=0, max_size=60))
    elif kind == "cjk":
        words = draw(st.lists(cjk_runs, min_size=1, max_size=3))
    elif kind == "long":
        words = draw(st.lists(st.one_of(latin_words, long_words), min_size=1, max_size=6))
    elif kind == "marked":
        words = draw(st.lists(marked, min_size=1, max_size=6))
    elif kind == "mixed":
        words = draw(st.lists(st.one_of(latin_words, cjk_runs, long_words), min_size=1, max_size=10))
    else:
        words = draw(st.lists(any_words, min_size=0, max_size=8))
    seps = draw(
        st.lists(st.sampled_from([" ", " ", "  ", "\n", "\t", "\u3000"]), min_size=len(words), max_size=len(words))
    )
    return "".join(w + s for w, s in zip(words, seps))


@st.composite
def line_lists(draw) -> list[Line]:
    n = draw(st.integers(0, 5))
    t = draw(st.floats(0, 100))
    lines = []
    for _ in range(n):
        text = draw(line_texts())
        t += draw(st.sampled_from([0.0, 0.0, 0.1, 0.5, 3.0]))
        dur = draw(st.sampled_from([0.0, 0.2, 1.0, 3.0, 6.9, 7.5, 15.0, 40.0]))
        words: tuple[Word, ...] = ()
        if draw(st.booleans()):
            toks = text.split()
            cuts = sorted(draw(st.lists(st.floats(0, 1), min_size=2 * len(toks), max_size=2 * len(toks))))
            words = tuple(Word(w, t + dur * cuts[2 * i], t + dur * cuts[2 * i + 1]) for i, w in enumerate(toks))
        lines.append(Line(text, t, t + dur, words=words))
        t += dur
    return lines


# ---------------------------------------------------------------- properties


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(line_lists())
def test_limits_hold(lines):
    check_cues(lines, make_cues(lines))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    line_lists(),
    st.integers(1, 60),
    st.integers(1, 3),
    st.floats(0.0, 2.0),
    st.floats(0.5, 10.0),
    st.floats(5.0, 30.0),
)
def test_limits_hold_with_other_options(lines, max_chars, max_lines, min_dur, max_dur, cps):
    assume(min_dur <= max_dur)
    limits = dict(max_chars=max_chars, max_lines=max_lines, min_dur=min_dur, max_dur=max_dur)
    cues = make_cues(lines, cps=cps, **limits)
    check_cues(lines, cues, **limits)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(line_texts(), st.floats(0, 50), st.floats(0, 10)), max_size=4))
def test_unsorted_and_overlapping_input_still_gives_sane_cues(specs):
    lines = [Line(text, s, s + d) for text, s, d in specs]
    cues = make_cues(lines)
    assert squash("".join("".join(c.lines) for c in cues)) == squash("".join(l.text for l in lines))
    for a, b in zip(cues, cues[1:]):
        assert a.start <= b.start and a.end <= b.start + EPS and a.start <= a.end


@settings(max_examples=100, deadline=None)
@given(cjk_runs, st.floats(0.5, 60))
def test_cjk_without_spaces(text, dur):
    cues = make_cues([Line(text, 0.0, dur)])
    check_cues([Line(text, 0.0, dur)], cues)
    for c in cues:
        for t in c.lines:
            assert t[0] not in "。、，！？」ーっゃ" or t == text.strip()[: len(t)], (t, text)


# ---------------------------------------------------------------- examples: layout


def test_short_line_is_one_cue_one_line():
    [cue] = make_cues([Line("Hello world.", 1.0, 2.5)])
    assert cue.lines == ("Hello world.",) and cue.text == "Hello world."
    assert (cue.start, cue.end) == (1.0, 2.5)


def test_two_balanced_lines():
    text = "the quick brown fox jumps over the lazy dog and keeps on running"
    [cue] = make_cues([Line(text, 0.0, 4.0)])
    assert len(cue.lines) == 2
    assert " ".join(cue.lines) == text
    assert abs(len(cue.lines[0]) - len(cue.lines[1])) <= 10


def test_line_break_prefers_comma():
    text = "if the weather is good tomorrow, we will all go out to the lake"
    [cue] = make_cues([Line(text, 0.0, 4.0)])
    assert cue.lines == ("if the weather is good tomorrow,", "we will all go out to the lake")


def test_cue_break_prefers_sentence_end():
    first = "Nothing else matters to me right now."
    second = "But the rest of the story will have to wait for another day, sadly enough."
    cues = make_cues([Line(first + " " + second, 0.0, 7.0)])
    assert len(cues) == 2
    assert " ".join(cues[0].lines) == first
    assert " ".join(cues[1].lines) == second


def test_cue_break_prefers_clause_over_plain_space():
    first = "when we finally arrived at the station after all that walking,"
    second = "the last train to the city had already left without us"
    cues = make_cues([Line(first + " " + second, 0.0, 7.0)])
    assert [" ".join(c.lines) for c in cues] == [first, second]


def test_cue_break_at_pause_from_word_times():
    words = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen".split()
    words += "sixteen seventeen".split()  # 106 characters: two cues needed
    text = " ".join(words)
    pause_after = 9  # a 1.5 s pause after "ten"
    ws, t = [], 0.0
    for i, w in enumerate(words):
        ws.append(Word(w, t, t + 0.4))
        t += 0.45 + (1.5 if i == pause_after else 0.0)
    cues = make_cues([Line(text, 0.0, t, words=tuple(ws))])
    assert len(cues) == 2
    assert " ".join(cues[0].lines) == " ".join(words[: pause_after + 1])
    assert cues[1].start == pytest.approx(ws[pause_after + 1].start)


def test_long_duration_is_split():
    text = "a slow speaker says these few words over a long time indeed"
    cues = make_cues([Line(text, 0.0, 14.0)])
    assert len(cues) >= 2
    assert all(c.end - c.start <= 7.0 + EPS for c in cues)


def test_too_much_text_for_one_cue():
    text = " ".join(["word"] * 40)  # 199 characters: at least 3 cues of 2 x 42
    cues = make_cues([Line(text, 0.0, 12.0)])
    assert len(cues) == 3
    check_cues([Line(text, 0.0, 12.0)], cues)


def test_long_word_is_hard_split():
    word = "x" * 100
    cues = make_cues([Line(f"see {word} here", 0.0, 6.0)])
    check_cues([Line(f"see {word} here", 0.0, 6.0)], cues)
    pieces = [t for c in cues for t in c.lines]
    assert "".join(pieces).replace(" ", "") == f"see{word}here"
    assert max(len(t) for t in pieces) <= 42


def test_hard_split_keeps_combining_marks():
    word = "e\u0301" * 40  # 80 code points
    cues = make_cues([Line(word, 0.0, 5.0)], max_chars=9)
    for c in cues:
        for t in c.lines:
            assert not t.startswith("\u0301")


def test_cjk_breaks_after_punctuation():
    a = "今天天气很好，我们去公园散步吧。"
    b = "然后我们可以在湖边吃午饭，看看风景，再回家休息一下。"
    c = "这是一个很长的句子，需要被分成好几段字幕才能显示。"
    cues = make_cues([Line(a + b + c, 0.0, 14.0)])
    check_cues([Line(a + b + c, 0.0, 14.0)], cues)
    assert len(cues) >= 2
    for cue in cues:
        assert cue.lines[-1][-1] in "。，"


def test_cjk_long_run_without_punctuation():
    text = "我" * 200
    cues = make_cues([Line(text, 0.0, 20.0)])
    check_cues([Line(text, 0.0, 20.0)], cues)
    assert all(len(t) <= 42 for c in cues for t in c.lines)
    assert sum(len(t) for c in cues for t in c.lines) == 200


def test_japanese_small_kana_and_long_mark_stay_attached():
    text = "ちょっとコーヒーを飲みたいです" * 8
    for c in make_cues([Line(text, 0.0, 20.0)], max_chars=7):
        for t in c.lines:
            assert t[0] not in "ょっーゃ"


def test_empty_and_blank_lines_give_no_cues():
    assert make_cues([]) == []
    assert make_cues([Line("", 0, 1), Line("  \n ", 1, 2)]) == []


# ---------------------------------------------------------------- examples: timing


def test_interpolation_by_character_position():
    cues = make_cues([Line("aaaa bbbb", 0.0, 9.0)], max_chars=4, max_lines=1, min_dur=0.0)
    assert [c.lines for c in cues] == [("aaaa",), ("bbbb",)]
    assert cues[0].start == 0.0 and cues[1].start == pytest.approx(5.0)
    assert cues[0].end == pytest.approx(4.0) and cues[1].end == pytest.approx(9.0)


def test_word_times_are_used():
    words = (Word("aaaa", 0.0, 1.0), Word("bbbb", 6.0, 7.0))
    cues = make_cues([Line("aaaa bbbb", 0.0, 9.0, words=words)], max_chars=4, max_lines=1)
    assert cues[0].start == 0.0 and cues[0].end == pytest.approx(1.0)
    assert cues[1].start == pytest.approx(6.0) and cues[1].end == pytest.approx(7.0)


def test_short_cue_extended_into_silence():
    [cue, _] = make_cues([Line("Yes.", 1.0, 1.2), Line("Then we went home.", 5.0, 6.0)])
    assert cue.end == pytest.approx(1.0 + 0.83)


def test_extension_stops_at_next_cue():
    [cue, nxt] = make_cues([Line("Yes.", 1.0, 1.2), Line("No.", 1.5, 1.8)])
    assert cue.end == nxt.start == 1.5


def test_extension_to_reading_time():
    text = "this is said far too quickly for anybody to read it in time"
    [cue] = make_cues([Line(text, 2.0, 3.0)])
    assert len(cue.lines) == 2  # the characters shown: the space at the line break is not
    assert cue.end == pytest.approx(2.0 + (len(text) - 1) / 17.0)


def test_reading_time_capped_by_max_dur():
    text = " ".join(["abc"] * 20)
    [cue] = make_cues([Line(text, 0.0, 0.5)], cps=5.0)
    assert cue.end - cue.start == pytest.approx(7.0)


def test_overlapping_lines_are_clamped():
    cues = make_cues([Line("first line", 0.0, 3.0), Line("second line", 2.0, 4.0)])
    assert cues[0].end == 2.0 and cues[1].start == 2.0


def test_overlong_single_word_is_cut_to_max_dur():
    [cue] = make_cues([Line("Okay", 0.0, 12.0)])
    assert cue.end - cue.start == pytest.approx(7.0)


def test_title_abbreviation_is_not_a_break():
    text = "yesterday afternoon I went to see my good friend Dr. Livingstone who lives in the big house"
    for c in make_cues([Line(text, 0.0, 5.0)]):
        assert not any(re.search(r"\bDr\.$", t) for t in c.lines)


@pytest.mark.parametrize(
    "kw",
    [
        dict(max_chars=0),
        dict(max_lines=0),
        dict(min_dur=3.0, max_dur=2.0),
        dict(max_dur=0.0),
        dict(cps=0.0),
        dict(min_dur=-1.0),
        dict(audio_end=-0.5),
        dict(audio_end=float("nan")),
        dict(audio_end=float("inf")),
    ],
)
def test_bad_options(kw):
    with pytest.raises(UsageError):
        make_cues([Line("x", 0, 1)], **kw)


# ---------------------------------------------------------------- the end of the audio


def test_last_cue_is_not_extended_past_the_audio():
    """A line that ends where the audio ends: its cue is not extended into silence that is not there
    (it was: 'Yes.' at 0.7-1.0 s of a 1.0 s clip showed until 1.53 s)."""
    [cue] = make_cues([Line("Yes.", 0.7, 1.0)], audio_end=1.0)
    assert (cue.start, cue.end) == (0.7, 1.0)
    [cue] = make_cues([Line("Yes.", 0.7, 1.0)], audio_end=1.2)
    assert (cue.start, cue.end) == (0.7, 1.2)  # extended as far as the audio goes
    [cue] = make_cues([Line("Yes.", 0.7, 1.0)])
    assert cue.end == pytest.approx(0.7 + 0.83)  # audio length unknown: as before


def test_reading_time_extension_stops_at_the_audio_end():
    text = "a lot of words said very quickly right at the end of the recording"
    cues = make_cues([Line("Before.", 0.0, 0.5), Line(text, 9.0, 10.0)], audio_end=10.0)
    assert cues[-1].end == 10.0
    assert all(c.start <= c.end <= 10.0 for c in cues)


def test_times_past_the_audio_are_brought_back():
    """Lines timed past the audio (as journals of the past recorded them) give cues within it."""
    words = (Word("late", 9.9, 10.5), Word("words", 10.5, 10.8))
    lines = [Line("early", 1.0, 2.0), Line("late words", 9.9, 10.8, words=words), Line("after", 10.9, 11.0)]
    cues = make_cues(lines, audio_end=9.96)
    assert [c.text for c in cues] == ["early", "late words", "after"]
    # 'after' starts at the end: 'late words', which runs to the end too, gives it the second half of its time
    assert cues[1].start == 9.9 and cues[-1].start == pytest.approx(9.93) and cues[-1].end == 9.96
    for a, b in zip(cues, cues[1:]):
        assert a.start <= a.end <= b.start


def test_lines_decoded_after_the_audio_are_shown_before_its_end():
    """Voxtral's last words, decoded in the padding after the audio (timed at its end), gave a cue of no length
    (00:00:06,077 --> 00:00:06,077), which players skip: the words never showed."""
    end = 6.077
    late = Line("over", end, end, words=(Word("over", end, end),))
    cues = make_cues([Line("It is all", 1.0, 2.0), late], audio_end=end)
    assert [c.text for c in cues] == ["It is all", "over"]
    assert cues[-1].end == end and cues[-1].end - cues[-1].start == pytest.approx(0.83)
    assert cues[0].end <= cues[-1].start
    # two such lines: the room after the last line heard (0.5 s) was shared (0.25 s each, too short to read); that
    # line now gives up to the second half of its time so that each has 0.83 s
    cues = make_cues([Line("It is all", 1.0, end - 0.5), Line("over", end, end), Line("now", end, end)], audio_end=end)
    assert [c.text for c in cues] == ["It is all", "over", "now"]
    assert [round(c.end - c.start, 3) for c in cues[1:]] == [0.83, 0.83] and cues[-1].end == end
    assert cues[0].start == 1.0 and cues[0].end >= 1.0 + (end - 0.5 - 1.0) / 2
    for a, b in zip(cues, cues[1:]):
        assert a.start <= a.end <= b.start + EPS


def test_a_line_begun_as_the_audio_ended_is_shown_long_enough_to_read():
    """Stop pressed as a sentence began: a line starting at 9.999 s of 10 s (its times past the end brought back to
    it) gave a cue 1 ms long, at 9.95 s 50 ms, which players skip or flash (QA); one at the end itself got 0.83 s.
    It now starts early enough for 0.83 s; a short word really said just before the end keeps its times."""
    text = "And one more thing before we all go home"
    for start in (10.0, 9.999, 9.95, 9.8):
        lines = [Line("Thanks everyone for joining today.", 2.0, 8.0), Line(text, start, 11.2)]
        cues = make_cues(lines, audio_end=10.0)
        assert [c.text for c in cues] == [lines[0].text, text]
        assert (cues[-1].start, cues[-1].end) == (pytest.approx(9.17), 10.0), start
        assert cues[0].end <= cues[1].start
        txt = format_txt(lines, timestamps=True, audio_end=10.0).splitlines()[-1]
        assert txt.startswith("[00:00:09.170 --> 00:00:10.000]"), txt
    # the line before runs almost to the end: it gives up to the second half of its time
    cues = make_cues([Line("Thanks everyone.", 8.0, 9.99), Line(text, 9.999, 11.2)], audio_end=10.0)
    assert cues[-1].end - cues[-1].start == pytest.approx(0.83) and cues[0].end <= cues[1].start
    assert cues[0].start == 8.0 and cues[0].end >= 8.995 - EPS
    # a word said in its own time before the end is not moved
    [cue] = make_cues([Line("Yes.", 9.7, 10.0)], audio_end=10.0)
    assert (cue.start, cue.end) == (9.7, 10.0)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(line_lists(), st.floats(0.0, 2.0))
def test_limits_hold_with_the_audio_end(lines, slack):
    """Lines within the audio: the contract holds with the audio's end as the limit of the last cue."""
    end = max((ln.end for ln in lines), default=0.0) + slack
    cues = make_cues(lines, audio_end=end)
    assert squash("".join("".join(c.lines) for c in cues)) == squash("".join(l.text for l in lines))
    assert [c.lines for c in cues] == [c.lines for c in make_cues(lines)]  # the same cut
    for k, c in enumerate(cues):
        assert 0 <= c.start <= c.end <= end
        if k + 1 < len(cues):
            assert c.end <= cues[k + 1].start + EPS
        else:
            assert c.end - c.start >= min(0.83, end - c.start) - EPS


@settings(max_examples=100, deadline=None)
@given(line_lists(), st.floats(0.0, 150.0))
def test_no_cue_passes_any_audio_end(lines, end):
    cues = make_cues(lines, audio_end=end)
    assert squash("".join("".join(c.lines) for c in cues)) == squash("".join(l.text for l in lines))
    for a, b in zip(cues, cues[1:]):
        assert a.start <= b.start and a.end <= b.start + EPS
    assert all(c.start <= c.end <= end for c in cues)


def test_wide_characters_take_two_columns_and_emoji_stay_whole():
    """QA: a line of Japanese held 42 characters, 84 columns on screen (twice a Latin line; subtitle norms say
    13-16), and a long run of emoji was split inside ZWJ, skin-tone and flag sequences (one emoji shown as two)."""
    import unicodedata

    text = "今日はとても良い天気ですね散歩に行きましょうそれから駅前の新しいカフェで"
    text += "コーヒーを飲みながら来週の会議の準備をしましょう"
    cues = make_cues([Line(text, 0.0, 8.0)])
    check_cues([Line(text, 0.0, 8.0)], cues)
    widths = [sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in t) for c in cues for t in c.lines]
    assert max(widths) <= 42 and max(len(t) for c in cues for t in c.lines) <= 21, widths
    family, thumbs, flag = "\U0001f468\u200d\U0001f469\u200d\U0001f467", "\U0001f44d\U0001f3fd", "\U0001f1eb\U0001f1f7"
    for unit, n in ((family, 9), (thumbs, 25), (flag, 25)):
        cues = make_cues([Line(unit * n, 0.0, 4.0)])
        pieces = [t for c in cues for t in c.lines]
        assert len(pieces) > 1 and all(len(p) % len(unit) == 0 and p == unit * (len(p) // len(unit)) for p in pieces)
