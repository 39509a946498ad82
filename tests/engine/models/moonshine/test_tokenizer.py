"""Moonshine's tokenizer: a character outside the vocabulary comes as one byte id per UTF-8 byte, and a partial
hypothesis can end between them."""

from __future__ import annotations

import pytest

from engine.models.moonshine.tokenizer import MoonshineTokenizer
from tests.conftest import FIXTURES

TEXT = "The café’s naïve 日本 owner 🎉 ok"


@pytest.fixture(scope="module")
def tok() -> MoonshineTokenizer:
    return MoonshineTokenizer(FIXTURES / "models" / "moon_tiny_like" / "tokenizer.json")


def test_every_prefix_shows_no_replacement_character_once_completed(tok):
    ids = tok._tok.encode(TEXT).ids
    assert tok.decode(ids) == TEXT
    cut_inside = 0
    for n in range(len(ids) + 1):
        shown = tok.decode(tok.complete(ids[:n]))
        assert "\ufffd" not in shown, (n, shown)
        assert TEXT.startswith(shown.rstrip()), (n, shown)
        cut_inside += "\ufffd" in tok.decode(ids[:n])
    assert cut_inside >= 8  # the prefixes that did end inside a character (2-, 3- and 4-byte ones)


def test_only_the_unfinished_character_is_held_back(tok):
    ids = tok._tok.encode("The café").ids
    assert tok.decode(ids[:-1]) != "The caf"  # decoded as it is, the run of byte ids turns into replacements
    assert tok.decode(tok.complete(ids[:-1])) == "The caf"
    assert tok.complete(ids) == ids


def test_invalid_bytes_are_not_hidden(tok):
    """A stray continuation byte or an ASCII byte after a lead byte is no character to wait for: kept as it is."""
    byte = {v: k for k, v in tok._byte.items()}
    a = tok._tok.encode("ab").ids
    stray = a + [byte[0x80]]
    assert tok.complete(stray) == stray
    broken = a + [byte[0xC3], byte[0x41]]  # a lead byte, then "A"
    assert tok.complete(broken) == broken
    four = a + [byte[0xF0], byte[0x9F], byte[0x8E]]  # three of an emoji's four bytes
    assert tok.complete(four) == a
