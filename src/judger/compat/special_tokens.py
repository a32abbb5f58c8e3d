"""Special-token text in a decoded response, removed as ``decode(skip_special_tokens=True)`` would.

AReaL hands a reward ``tokenizer.decode(output_tokens)`` and OpenRLHF ``decode(..., skip_special_tokens=
False)``: the response still ends with its stop token's text (``<|im_end|>``, ``<|eot_id|>``), which a
scorer reading the end of the response (DAPO's ``Answer:`` line) would take as part of the answer.

Each text is removed wherever it occurs and nothing else is: the response is never cut at the first
one, so a response that writes a stop token's text mid-way cannot hide what follows it from the
grader (a second ``\\boxed{}`` after a fake end is still graded, and the last one counts).

The texts are the policy tokenizer's special tokens (``tokenizer=``: its directory, read with
``transformers``, which every trainer here installs), the texts given, or by default
:data:`DEFAULT_TEXTS`: the chat and end-of-text markers of the common open model families.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import lru_cache

TOKENIZER_ENV = "JUDGER_TOKENIZER"
DEFAULT_TEXTS = (
    # Qwen / ChatML
    "<|im_start|>",
    "<|im_end|>",
    "<|endoftext|>",
    # Llama 3
    "<|begin_of_text|>",
    "<|end_of_text|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eot_id|>",
    # DeepSeek
    "<｜begin▁of▁sentence｜>",
    "<｜end▁of▁sentence｜>",
    # Phi, Gemma
    "<|end|>",
    "<bos>",
    "<eos>",
    "<end_of_turn>",
    "<start_of_turn>",
)


@lru_cache(maxsize=8)
def tokenizer_texts(directory: str) -> tuple[str, ...]:
    """Every special token text of the Hugging Face tokenizer in ``directory``."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(directory)
    return tuple(t for t in tokenizer.all_special_tokens if t)


def texts_for(strip: Sequence[str] | None = None, tokenizer: str | None = None) -> tuple[str, ...]:
    """The texts to remove: ``strip`` and ``tokenizer``'s special tokens when either is given; else
    those of the tokenizer in ``$JUDGER_TOKENIZER``, else :data:`DEFAULT_TEXTS`. Longest first, so
    a text holding another goes whole."""
    if strip is None and tokenizer is None:
        tokenizer = os.environ.get(TOKENIZER_ENV) or None
        texts = set(tokenizer_texts(tokenizer)) if tokenizer else set(DEFAULT_TEXTS)
    else:
        texts = set(tokenizer_texts(tokenizer)) if tokenizer else set()
        texts.update(t for t in strip or () if t)
    return tuple(sorted(texts, key=lambda t: (-len(t), t)))


def remove_texts(text: str, texts: Sequence[str]) -> str:
    """``text`` without any occurrence of ``texts``."""
    for token in texts:
        if token in text:
            text = text.replace(token, "")
    return text
