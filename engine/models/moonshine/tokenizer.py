"""Moonshine's SentencePiece-style BPE tokenizer, decoded through the ``tokenizers`` library."""

from __future__ import annotations

from pathlib import Path

from ...errors import ModelError
from ...text import one_line


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
        characters (C0/C1) are removed and runs of whitespace become one space (captions are one line)."""
        ok = [int(i) for i in ids if 0 <= int(i) < self.vocab_size]
        return one_line(self._tok.decode(ok, skip_special_tokens=True))
