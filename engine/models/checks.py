"""Plausibility checks of a model's config file, before any of its numbers is used.

A config.json (or params.json) with ``num_hidden_layers: -1`` used to load and produce garbage with exit
code 0, and ``vocab_size: "lots"`` failed with a Python message. :func:`check_config` walks the parsed
file (nested sections included, whatever the dialect) and refuses, with one sentence naming the entry,
any known size that is not a whole number >= 1 (null only where it means "derive it"), any token id that
is not a whole number >= 0, and any known scale (RoPE theta, norm epsilon, ...) that is not a finite
positive number. The families' config classes then check what relates entries to each other (:func:`require`).
"""

from __future__ import annotations

import math
import re
from typing import Any

from ..errors import ModelError

#: Entries that count something (dimensions, layers, heads, windows, vocabulary, ...): whole numbers >= 1.
SIZES = frozenset(
    {
        "hidden_size",
        "intermediate_size",
        "num_hidden_layers",
        "num_attention_heads",
        "num_key_value_heads",
        "head_dim",
        "vocab_size",
        "max_position_embeddings",
        "sample_rate",
        "num_mel_bins",
        "sliding_window",
        "dim",
        "n_layers",
        "n_heads",
        "n_kv_heads",
        "hidden_dim",
        "downsample_factor",
        "ada_rms_norm_t_cond_dim",
        "group_size",
        "bits",
    }
)
#: Sizes a config may give as null, meaning "derive it" (HF's convention): the rest of SIZES may not be null.
NULLABLE = frozenset({"head_dim", "num_key_value_heads", "sliding_window"})
#: Token ids: whole numbers >= 0 (or a list of them); null allowed (e.g. no pad token).
IDS = frozenset({"bos_token_id", "eos_token_id", "decoder_start_token_id", "pad_token_id"})
#: Scales: finite numbers > 0.
SCALES = frozenset({"rope_theta", "rms_norm_eps", "norm_eps", "frame_ms", "partial_rotary_factor"})
LIMIT = 1 << 31  # no real model has a size this large; anything above is a corrupt file


def check_config(config: Any, where: str) -> None:
    """Raise ModelError when a known entry anywhere in ``config`` (a parsed JSON object) is impossible.

    ``where`` names the file for the sentence, e.g. ``"The config.json in moonshine-tiny"``.
    """
    _walk(config, where)


def require(ok: bool, where: str, what: str) -> None:
    """ModelError ``"{where} is inconsistent: {what}."`` unless ``ok``."""
    if not ok:
        raise ModelError(f"{where} is inconsistent: {what}.")


def _walk(node: Any, where: str) -> None:
    if isinstance(node, list):
        for item in node:
            _walk(item, where)
        return
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        if value is None:
            if (key in SIZES and key not in NULLABLE) or key in SCALES:
                what = "a positive whole number" if key in SIZES else "a positive number"
                raise ModelError(f"{where} gives {key} = null; it must be {what}.")
            continue
        if key in SIZES:
            _whole(value, key, where, 1)
        elif key in IDS:
            if value == []:
                raise ModelError(
                    f"{where} gives {key} = []; it must be a whole number of at least 0 or a list of them."
                )
            for v in value if isinstance(value, list) else [value]:
                _whole(v, key, where, 0)
        elif key in SCALES:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
                raise ModelError(f"{where} gives {key} = {show(value)}; it must be a positive number.")
        elif key == "sliding_windows":
            _windows(value, where)
        else:
            _walk(value, where)


def _whole(value: Any, key: str, where: str, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value < LIMIT:
        what = "a positive whole number" if minimum == 1 else "a whole number of at least 0"
        raise ModelError(f"{where} gives {key} = {show(value)}; it must be {what}.")


def _windows(value: Any, where: str) -> None:
    ok = isinstance(value, list) and all(
        isinstance(w, list)
        and len(w) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v < LIMIT for v in w)
        for w in value
    )
    if not ok:
        raise ModelError(
            f"{where} gives sliding_windows = {show(value)}; it must be a list of [left, right] "
            "pairs of whole numbers of at least 0."
        )


def show(value: Any) -> str:
    """``value`` as a config error's sentence quotes it: JSON's null, strings quoted, at most 40 characters."""
    if value is None:
        return "null"  # as the JSON file writes it
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 40 else text[:37] + "..."


_INDEXED = re.compile(r"^(.*?\.)(\d+)\.")  # a layer's tensors: "model.decoder.layers." + "3" + "."


def check_layers_used(store: Any, where: str) -> None:
    """After a model was built from ``store`` (a ``TensorStore``): refuse a checkpoint with layers past those it
    read (a config.json whose layer count is smaller than the weights' loaded a shallower model, silently),
    naming the first such tensor. Tensors of other kinds that nothing reads are not judged here."""
    read = store.read()
    last: dict[str, int] = {}  # prefix -> the highest layer index read under it
    for name in read:
        m = _INDEXED.match(name)
        if m:
            last[m.group(1)] = max(last.get(m.group(1), -1), int(m.group(2)))
    for name in sorted(set(store.keys()) - read):
        m = _INDEXED.match(name)
        if m and m.group(1) in last and int(m.group(2)) > last[m.group(1)]:
            raise ModelError(
                f"The checkpoint in {where} has more layers than its configuration says ('{name}' is not used)."
            )
