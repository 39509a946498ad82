"""Tekken (Mistral) tokenizer, decode side, from ``tekken.json``.

Ids below ``num_special`` are control tokens, never shown; special ids are looked up by name
(``[STREAMING_PAD]``, ``[STREAMING_WORD]``, ``</s>``) rather than hard-coded. Other ids map to byte strings
(``vocab[id - num_special]``); text is the concatenation of those bytes. ``ByteText`` decodes incrementally:
a token may hold part of a UTF-8 character, and only complete characters are released, so invalid bytes
become exactly one U+FFFD once they are known to be invalid (never flickering in partials). Decoded text
is caption-safe (``engine.text.caption_safe``): the byte tokens for C0/C1 control characters never reach a
caption, a journal or an export.
"""

from __future__ import annotations

import base64
import codecs
import json
from pathlib import Path

from ...errors import ModelError
from ...text import caption_safe


class Tekken:
    """Id -> bytes table and the special ids of a ``tekken.json``."""

    def __init__(self, path: Path, vocab_size: int | None = None):
        if not path.is_file():
            raise ModelError(f"The model folder {path.parent} has no tekken.json.")
        try:
            d = json.loads(path.read_text(encoding="utf-8"))
            cfg = d.get("config", {})
            self.num_special = int(cfg.get("default_num_special_tokens", len(d.get("special_tokens", [])) or 1000))
            specials = {s["token_str"]: int(s["rank"]) for s in d.get("special_tokens", [])}
            n_vocab = (vocab_size or int(cfg.get("default_vocab_size", 131072))) - self.num_special
            self.pieces = [base64.b64decode(v["token_bytes"]) for v in d["vocab"][: max(n_vocab, 0)]]
            self.audio = d.get("audio", {})
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ModelError(f"The tokenizer file {path} is unreadable or malformed.") from e
        self.specials = specials

        def sid(name: str, default: int) -> int:
            return specials.get(name, default)

        self.bos = sid("<s>", 1)
        self.eos = sid("</s>", 2)
        self.pad = sid("[STREAMING_PAD]", 32)
        self.word = sid("[STREAMING_WORD]", 33)

    def token_bytes(self, tid: int) -> bytes:
        """The bytes of a text token; empty for special or out-of-range ids."""
        i = tid - self.num_special
        return self.pieces[i] if 0 <= i < len(self.pieces) else b""

    def decode(self, ids: list[int]) -> str:
        """Text of ``ids`` (specials dropped, invalid UTF-8 replaced, control characters removed)."""
        return caption_safe(b"".join(self.token_bytes(t) for t in ids).decode("utf-8", errors="replace"))


class ByteText:
    """Incremental UTF-8 text: ``add(token_bytes) -> newly complete text``; ``flush()`` at the end. Control
    characters are dropped (spacing ones become a space) as they complete, so ``text`` never holds one."""

    def __init__(self):
        self._dec = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.text = ""

    def add(self, b: bytes) -> str:
        s = caption_safe(self._dec.decode(b)) if b else ""
        self.text += s
        return s

    def flush(self) -> str:
        s = caption_safe(self._dec.decode(b"", final=True))
        self.text += s
        return s

    @property
    def pending(self) -> bool:
        """Whether bytes of an unfinished character are held back."""
        return bool(self._dec.getstate()[0])
