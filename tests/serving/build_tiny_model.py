"""Build the serving tier's policy model from the bundled data: nothing is downloaded.

A byte-level BPE tokenizer trained with ``tokenizers`` on the bundled GSM8K and MATH rows, a ChatML
chat template, and a 2-layer Llama of hidden size 256 with seeded random weights, saved as a model
folder vLLM and transformers load. The folder is rebuilt only when this file changes (its hash is
stamped in it). Run it directly to build into a folder of your choice::

    python tests/serving/build_tiny_model.py .serving-cache/tiny-llama
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "src" / "judger" / "data"
DEFAULT_DIR = ROOT / ".serving-cache" / "tiny-llama"
VOCAB_SIZE = 1024
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
STAMP = ".built-from"


def _stamp() -> str:
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]


def _texts() -> Iterator[str]:
    for name in ("gsm8k_test.jsonl", "math_rollouts_dev.jsonl"):
        for line in (DATA / name).read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            for value in row.values():
                if isinstance(value, str):
                    yield value
                elif isinstance(value, list):
                    yield from (str(m.get("content", "")) for m in value if isinstance(m, dict))


def train_bpe(vocab_size: int = VOCAB_SIZE, special: list[str] = SPECIAL) -> Any:
    """A byte-level BPE ``tokenizers.Tokenizer`` trained on the bundled GSM8K and MATH rows."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=special,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(_texts(), trainer=trainer)
    return bpe


def build(out: Path = DEFAULT_DIR) -> Path:
    """The model folder at ``out``, built unless already built by this version of the script."""
    if (out / STAMP).is_file() and (out / STAMP).read_text() == _stamp():
        return out
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=train_bpe(),
        bos_token="<|endoftext|>",
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token="<|endoftext|>",
    )
    tokenizer.chat_template = CHATML
    tokenizer.save_pretrained(tmp)

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=2048,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
        torch_dtype="float32",
    )
    model = LlamaForCausalLM(config).to(torch.float32)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.save_pretrained(tmp, safe_serialization=True)
    (tmp / STAMP).write_text(_stamp())
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out


if __name__ == "__main__":
    print(build(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_DIR))
