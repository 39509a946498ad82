"""Caption-safe text: the one helper every tokenizer's output passes through, and the token ids that decode to
control characters in both families (Voxtral's Tekken bytes, Moonshine's byte-fallback pieces)."""

from __future__ import annotations

import json
import unicodedata

import pytest

from engine.models.moonshine.tokenizer import MoonshineTokenizer
from engine.models.voxtral.tekken import ByteText, Tekken
from engine.text import caption_safe, one_line
from tests.conftest import FIXTURES

CONTROLS = [chr(c) for c in (*range(0x20), 0x7F, *range(0x80, 0xA0))]


def has_control(text: str) -> bool:
    return any(unicodedata.category(ch) == "Cc" for ch in text)


def test_every_c0_c1_control_goes_and_nothing_else_changes():
    assert {unicodedata.category(c) for c in CONTROLS} == {"Cc"}  # the full Cc set: C0, DEL, C1
    for c in CONTROLS:
        out = caption_safe(f"a{c}b")
        assert out in ("ab", "a b"), repr(c)
        assert out == ("a b" if c in "\t\n\v\f\r\x1c\x1d\x1e\x1f\x85" else "ab"), repr(c)
    keep = "".join(chr(c) for c in range(0x20, 0x3000) if unicodedata.category(chr(c)) != "Cc") + "\ufffd\U0001f600"
    assert caption_safe(keep) == keep
    assert one_line(" two\n\n lines\t\x07end ") == " two lines end "


def test_tekken_byte_tokens_for_control_characters(tmp_path):
    from tests.helpers import write_tekken

    f = tmp_path / "tekken.json"
    write_tekken(f, [b" hello"], {1: "<s>", 2: "</s>", 32: "[STREAMING_PAD]", 33: "[STREAMING_WORD]"})
    t = Tekken(f)
    byte = lambda b: 1000 + b  # noqa: E731 - the first 256 pieces are the single bytes
    # BEL, ESC, C1 CSI (U+009B as UTF-8 C2 9B), NEL (U+0085), a newline, DEL
    ids = [
        1256,
        byte(7),
        byte(0x1B),
        byte(ord("x")),
        byte(0xC2),
        byte(0x9B),
        byte(0xC2),
        byte(0x85),
        byte(10),
        byte(0x7F),
        byte(ord("y")),
    ]
    raw = b"".join(t.token_bytes(i) for i in ids).decode("utf-8")
    assert has_control(raw)  # the ids really carry C0 and C1 characters
    assert t.decode(ids) == " hellox  y"
    bt = ByteText()
    shown = []
    for i in ids:
        bt.add(t.token_bytes(i))
        shown.append(bt.text)
    bt.flush()
    assert bt.text == " hellox  y" and not any(has_control(s) for s in shown)


def test_voxtral_session_never_emits_control_characters():
    """The decoder is forced to produce byte tokens for C0/C1 characters; no event text carries one."""
    import numpy as np

    from engine import load_model

    m = load_model(FIXTURES / "models" / "vox_tiny_hf", backend="numpy")
    n = m.tok.num_special
    forced = [
        n + ord("a"),
        n + 7,
        n + 0x1B,
        n + ord("b"),
        n + 0xC2,
        n + 0x9B,
        n + 0xC2,
        n + 0x85,
        n + ord("c"),
        n + 10,
        n + ord("d"),
    ]
    orig, calls = m.B.argmax, {"n": 0}

    def argmax(x):
        calls["n"] += 1
        out = orig(x)
        k = calls["n"] - 1
        return out * 0 + forced[k] if k < len(forced) else out * 0 + m.tok.pad

    m.B.argmax = argmax
    try:
        s = m.start_session(delay_ms=480, keep_tokens=True)
        events = []
        audio = np.zeros(16000 * 3, np.float32)
        for i in range(0, len(audio), 1280):
            events += s.feed(audio[i : i + 1280])
        events += s.finish()
    finally:
        del m.B.argmax
    assert all(t in s.tokens for t in forced)
    texts = [ln.text for e in events for ln in (*e.committed, *([e.partial] if e.partial else []))]
    texts += [w.text for e in events for ln in e.committed for w in ln.words]
    assert texts and not any(has_control(t) for t in texts)
    committed = " ".join(ln.text for e in events for ln in e.committed)
    assert committed.replace(" ", "") == "abcd"


@pytest.mark.parametrize("name", ["moon_tiny_like", "moon_small_like"])
def test_moonshine_byte_fallback_ids_for_control_characters(name):
    path = FIXTURES / "models" / name / "tokenizer.json"
    vocab = json.loads(path.read_text())["model"]["vocab"]
    tok = MoonshineTokenizer(path)
    piece = lambda b: vocab[f"<0x{b:02X}>"]  # noqa: E731
    ids = [
        piece(ord("a")),
        piece(7),
        piece(0x1B),
        piece(ord("b")),
        piece(0xC2),
        piece(0x9B),
        piece(0xC2),
        piece(0x85),
        piece(ord("c")),
        piece(10),
        piece(0x7F),
        piece(ord("d")),
    ]
    raw = tok._tok.decode(ids, skip_special_tokens=True)
    assert has_control(raw)  # the library's own decoding keeps them
    out = tok.decode(ids)
    assert not has_control(out)
    assert out.replace(" ", "") == "abcd"
