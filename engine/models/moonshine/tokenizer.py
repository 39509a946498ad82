"""Moonshine's SentencePiece-style BPE tokenizer, decoded through the ``tokenizers`` library."""

from __future__ import annotations

import re
from pathlib import Path

from ...errors import ModelError


class MoonshineTokenizer:
    """Decodes ids to text from ``tokenizer.json``; special ids (<s>, </s>, <unk>) are never shown."""

    def __init__(self, path: Path):
        from tokenizers import Tokenizer

        if not path.is_file():
            raise ModelError(f"The model folder {path.parent} has no tokenizer.json.")
        try:
            self._tok = Tokenizer.from_file(str(path))
        except Exception as e:  # noqa: BLE001 - the library raises bare Exceptions for bad files
            raise ModelError(f"The tokenizer file {path} is unreadable.") from e
        self.vocab_size = self._tok.get_vocab_size()

    def decode(self, ids: list[int]) -> str:
        """Text of ``ids`` without special tokens; ids outside the vocabulary are dropped, control
        characters are removed and runs of whitespace become one space (captions are one line)."""
        ok = [int(i) for i in ids if 0 <= int(i) < self.vocab_size]
        return clean_text(self._tok.decode(ok, skip_special_tokens=True))


_CONTROL = dict.fromkeys(c for c in range(32) if chr(c) not in "\t\n\r")
_CONTROL[127] = None


def clean_text(text: str) -> str:
    """Caption-safe text: no control characters, whitespace runs collapsed to single spaces."""
    return re.sub(r"\s+", " ", text.translate(_CONTROL))
