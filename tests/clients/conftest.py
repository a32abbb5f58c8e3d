"""The client tier: judger inside the trainers' own code (verl 0.9.1, TRL), in ``.venv-clients``.

``make test-clients`` builds that environment; in any environment without the trainers' packages
these tests are skipped as a whole (the main suite never imports verl, torch or trl).
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CLIENTS = ("verl", "trl", "torch", "transformers")
_missing = [name for name in CLIENTS if importlib.util.find_spec(name) is None]
if _missing:
    collect_ignore_glob = ["test_*.py"]


def byte_tokenizer(directory: Path | None = None) -> Any:
    """A byte-level tokenizer built here (no hub): every text decodes back exactly."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {"<pad>": 0, "<eos>": 1, **{ch: i + 2 for i, ch in enumerate(alphabet)}}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>", pad_token="<pad>")
    fast.chat_template = (
        "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}assistant: {% endif %}"
    )
    if directory is not None:
        fast.save_pretrained(directory)
    return fast


def tiny_causal_lm(tokenizer: Any) -> Any:
    from transformers import AutoModelForCausalLM, Qwen2Config

    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=256,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.eos_token_id,
    )
    return AutoModelForCausalLM.from_config(config)


@pytest.fixture(scope="session")
def make_lm() -> Any:
    return tiny_causal_lm


@pytest.fixture
def tokenizer() -> Any:
    return byte_tokenizer()


@pytest.fixture(scope="session")
def byte_tokenizer_factory() -> Any:
    return byte_tokenizer


@pytest.fixture(scope="module")
def areal_logging() -> Iterator[None]:
    """Importing AReaL replaces logging's root logger and manager and applies its dictConfig, which
    disables every logger already made, each time one of its modules gets a logger: import AReaL
    under this fixture, and logging is put back as it was after the module's tests."""
    saved = (logging.root, logging.Logger.root, logging.Logger.manager)
    root_state = (list(logging.root.handlers), logging.root.level)
    loggers = {
        name: (lg.disabled, lg.level, list(lg.handlers), lg.propagate)
        for name, lg in logging.root.manager.loggerDict.items()
        if isinstance(lg, logging.Logger)
    }
    yield
    logging.root, logging.Logger.root, logging.Logger.manager = saved
    logging.root.handlers[:], logging.root.level = root_state
    for name, (disabled, level, handlers, propagate) in loggers.items():
        lg = logging.getLogger(name)
        lg.disabled, lg.level, lg.handlers[:], lg.propagate = disabled, level, handlers, propagate
