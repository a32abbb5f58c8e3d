"""The policy's tokenizer, when one is reachable without the network."""

from __future__ import annotations

import logging
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
