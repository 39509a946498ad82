"""Moonshine's SentencePiece-style BPE tokenizer, decoded through the ``tokenizers`` library."""

from __future__ import annotations

import re
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
        # the byte-fallback pieces "<0xNN>": a character outside the vocabulary comes as one id per UTF-8 byte
        self._byte = {i: int(t[3:5], 16) for t, i in self._tok.get_vocab().items() if _BYTE.fullmatch(t)}

    def decode(self, ids: list[int]) -> str:
        """Text of ``ids`` without special tokens; ids outside the vocabulary are dropped, control
        characters (C0/C1) are removed and runs of whitespace become one space (captions are one line)."""
        ok = [int(i) for i in ids if 0 <= int(i) < self.vocab_size]
        return one_line(self._tok.decode(ok, skip_special_tokens=True))

    def complete(self, ids: list[int]) -> list[int]:
        """``ids`` without a last character whose UTF-8 bytes have not all come yet (byte-fallback ids that start
        a multi-byte character the hypothesis has not finished). Decoded with them, a partial caption would show
        replacement characters, for that character and for the bytes before it in the same run of byte ids."""
        k = len(ids)
        while k > 0 and len(ids) - k < 3 and self._byte.get(ids[k - 1], 0) & 0xC0 == 0x80:
            k -= 1  # continuation bytes
        lead = self._byte.get(ids[k - 1]) if k > 0 else None
        if lead is None:
            return ids
        need = 2 if lead & 0xE0 == 0xC0 else 3 if lead & 0xF0 == 0xE0 else 4 if lead & 0xF8 == 0xF0 else 0
        return ids[: k - 1] if len(ids) - (k - 1) < need else ids


_BYTE = re.compile(r"<0x[0-9A-Fa-f]{2}>")
