"""The policy's tokenizer, when one is reachable without the network."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

logger = logging.getLogger(__name__)


def load_tokenizer(hf_checkpoint: str | None) -> Any:
    """``transformers.AutoTokenizer`` for ``hf_checkpoint`` from local files (a model folder or the
    Hugging Face cache), or None when there is no checkpoint, no transformers, or no local copy.

    Never downloads: a data path must not stall on the network; without a tokenizer the server's
    token ids are used.
    """
    if not hf_checkpoint:
        return None
    try:
        from transformers import AutoTokenizer
    except ImportError:
        logger.info("transformers is not installed: no tokenizer for %s", hf_checkpoint)
        return None
    try:
        return AutoTokenizer.from_pretrained(hf_checkpoint, local_files_only=True)
    except Exception as exc:  # not a local model folder nor in the cache
        logger.info("no local tokenizer for %s (%s: %s)", hf_checkpoint, type(exc).__name__, exc)
        return None


def _as_ids(encoded: Any) -> list[int]:
    # transformers 5 returns a BatchEncoding (a UserDict, not a dict) from
    # apply_chat_template(tokenize=True); iterating one yields its keys, not token ids
    if isinstance(encoded, Mapping):
        if "input_ids" not in encoded:
            raise ValueError(f"the tokenizer returned {sorted(encoded)} without 'input_ids'")
        encoded = encoded["input_ids"]
    if hasattr(encoded, "tolist"):
        encoded = encoded.tolist()
    if encoded and isinstance(encoded[0], list):
        if len(encoded) != 1:
            raise ValueError(f"the tokenizer returned a batch of {len(encoded)} for one conversation")
        encoded = encoded[0]
    return [int(i) for i in encoded]


def text_ids(tokenizer: Any, text: str) -> list[int]:
    """``text``'s token ids under ``tokenizer``, without the special tokens it would add."""
    return _as_ids(tokenizer(text, add_special_tokens=False)) if text else []


def chat_prompt_ids(tokenizer: Any, messages: Sequence[dict[str, Any]]) -> list[int]:
    """The prompt's token ids under ``tokenizer``'s chat template (with the generation prompt);
    whatever ``apply_chat_template`` returns (a list, a dict or a BatchEncoding, batched or not)."""
    if hasattr(tokenizer, "apply_chat_template"):
        encoded = tokenizer.apply_chat_template(list(messages), add_generation_prompt=True, tokenize=True)
        return _as_ids(encoded)
    text = "\n".join(str(m.get("content") or "") for m in messages)
    return _as_ids(tokenizer.encode(text))


def chat_prompt_text(tokenizer: Any, messages: Sequence[dict[str, Any]]) -> str:
    """The prompt as text under ``tokenizer``'s chat template (with the generation prompt)."""
    text = tokenizer.apply_chat_template(list(messages), add_generation_prompt=True, tokenize=False)
    if not isinstance(text, str):
        raise ValueError(f"apply_chat_template(tokenize=False) returned {type(text).__name__}, not text")
    return text
