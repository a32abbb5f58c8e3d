"""Sampler: prompts from JSONL / Parquet files, handed out as groups of ``n`` samples per prompt.

Row formats (``SamplerConfig.row_format``):

``"verl"``
    verl's layout: ``prompt`` (chat messages, or a string), ``data_source``,
    ``reward_model.ground_truth``, optional ``extra_info`` and ``uid``.
``"gsm8k"``
    GSM8K's own layout (``question``, ``answer`` ending in ``#### <number>``), turned into verl's
    as verl's ``examples/data_preprocess/gsm8k.py`` does: the user prompt is the question plus
    ``Let's think step by step and output the final answer after "####".``, the ground truth the
    number after ``####`` (commas removed), ``data_source="openai/gsm8k"``.
``"fields"``
    any flat layout, mapped by ``prompt_field`` (text), ``answer_field`` (ground truth; with
    ``answer_after`` set, the text after its last occurrence), ``instruction`` (appended to the
    prompt after a space) and ``data_source``.
``"auto"`` (default)
    ``"verl"`` for a row with ``prompt`` or ``reward_model``, ``"gsm8k"`` for one with
    ``question`` and ``answer``.

A row that cannot be read becomes a :class:`~judger.trainer.io.RowError` naming its row and field
(``sampler.errors``); the others go on. Prompts longer than ``max_prompt_tokens`` (counted with
the tokenizer's chat template; a tokenizer is then required) or ``max_prompt_chars`` are left out
and counted in ``sampler.filtered``. Each epoch visits every prompt once, in an order shuffled
with ``seed + epoch`` when ``shuffle`` is on. A prompt's group id is its ``uid``, else
``<file stem>-<row>``, with ``@<epoch>`` after the first epoch: stable across runs, so
``judger eval`` can resume.
"""

from __future__ import annotations

import logging
import random
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from judger.core.rollout import RolloutState
from judger.trainer.io import RowError, iter_rows
from judger.trainer.tokenizer import chat_prompt_ids
from judger.trainer.verl_row import missing_message, read_verl_row

logger = logging.getLogger(__name__)

GSM8K_INSTRUCTION = 'Let\'s think step by step and output the final answer after "####".'
_GSM8K_ANSWER = re.compile(r"#### (\-?[0-9\.\,]+)")

RowFormat = Literal["auto", "verl", "gsm8k", "fields"]


class SamplerConfig(BaseModel):
    """Where prompts come from and how they are handed out (see the module docstring)."""

    model_config = ConfigDict(extra="forbid")

    data_files: list[Path] = Field(min_length=1, description="JSONL or Parquet files, read in order")
    row_format: RowFormat = Field(
        "auto",
        description=(
            "'verl', 'gsm8k', 'fields' (prompt_field / answer_field) or 'auto': verl's for a row with "
            "prompt or reward_model, GSM8K's for one with question and answer"
        ),
    )
    n: int = Field(1, ge=1, description="samples per prompt: the size of each group")
    shuffle: bool = Field(True, description="shuffle each epoch's order (with seed + epoch)")
    seed: int = Field(42, description="seed of the shuffling")
    epochs: int | None = Field(1, ge=1, description="passes over the prompts; None: endless")
    max_prompt_tokens: int | None = Field(None, ge=1, description="needs a tokenizer")
    max_prompt_chars: int | None = Field(
        None, ge=1, description="leave out prompts longer than this many characters"
    )
    limit: int | None = Field(None, ge=1, description="use only the first N prompts (after filtering)")
    prompt_field: str = Field("question", description="row_format='fields': the prompt text column")
    answer_field: str = Field("answer", description="row_format='fields': the ground-truth column")
    answer_after: str | None = Field(None, description="row_format='fields': ground truth follows this")
    instruction: str | None = Field(None, description="row_format='fields': appended to the prompt")
    data_source: str | None = Field(
        None, description="data_source for rows without one ('fields'; 'gsm8k': openai/gsm8k)"
    )

    @field_validator("data_files", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, (str, Path)) else value

    @model_validator(mode="after")
    def _files_exist(self) -> SamplerConfig:
        for path in self.data_files:
            if not path.is_file():
                raise ValueError(f"data_files: {path} does not exist (or is not a file)")
        return self

    def build(self, tokenizer: Any = None) -> Sampler:
        return Sampler(self, tokenizer=tokenizer)


def _gsm8k_truth(answer: Any) -> str:
    if not isinstance(answer, str):
        raise ValueError(f"field 'answer' must be a string, got {type(answer).__name__}")
    found = _GSM8K_ANSWER.findall(answer)
    if not found:
        raise ValueError("field 'answer' has no '#### <number>' final answer")
    return found[-1].replace(",", "")


def _text(row: dict[str, Any], name: str) -> str:
    if name not in row or row[name] is None:
        raise ValueError(f"missing field {name!r}")
    value = row[name]
    if not isinstance(value, str):
        raise ValueError(f"field {name!r} must be a string, got {type(value).__name__}")
    return value


def _verl_prompt(row: dict[str, Any]) -> tuple[list[dict[str, Any]], Any, dict[str, Any], dict[str, Any]]:
    """A verl row's prompt: read as :func:`judger.trainer.io.parse_row` reads a rollout's, so a bad
    row is refused with the same message; the sampler also needs the prompt and a data_source."""
    fields = read_verl_row(row, need_prompt=True)
    if fields.data_source is None:
        raise ValueError(missing_message(["data_source"]))
    return fields.message, fields.data_source, dict(fields.reward_model), dict(fields.extra_info or {})


class Sampler:
    """Reads every prompt at construction; ``groups()`` / ``next_group()`` hand out groups."""

    def __init__(self, config: SamplerConfig, tokenizer: Any = None) -> None:
        if config.max_prompt_tokens is not None and tokenizer is None:
            raise ValueError(
                "SamplerConfig.max_prompt_tokens needs a tokenizer (give hf_checkpoint a reachable "
                "tokenizer, or pass tokenizer=); use max_prompt_chars to filter without one"
            )
        self.config = config
        self.tokenizer = tokenizer
        self.prompts: list[RolloutState] = []
        self.errors: list[RowError] = []
        self.filtered = 0
        for path in config.data_files:
            self._read(path)
        if config.limit is not None:
            self.prompts = self.prompts[: config.limit]
        for error in self.errors[:20]:
            logger.warning("sampler: %s", error)
        self._iter: Iterator[list[RolloutState]] | None = None

    def __len__(self) -> int:
        return len(self.prompts)

    # --- reading ----------------------------------------------------------------------------------

    def _read(self, path: Path) -> None:
        """Every row of ``path``; raises InputError when the file itself cannot be read."""
        for number, row in iter_rows(path):
            if isinstance(row, RowError):
                self.errors.append(RowError(row.row, f"{path.name}: {row.message}"))
                continue
            try:
                state = self.parse_row(row, f"{path.stem}-{number}")
            except (ValueError, TypeError) as exc:
                self.errors.append(RowError(number, f"{path.name}: {exc}"))
                continue
            if self._too_long(state):
                self.filtered += 1
                continue
            self.prompts.append(state)

    def parse_row(self, row: Any, default_uid: str) -> RolloutState:
        """One prompt as a RolloutState (status INIT); raises ValueError naming the bad field."""
        if not isinstance(row, dict):
            raise ValueError(f"expected a JSON object, got {type(row).__name__}")
        fmt = self.config.row_format
        if fmt == "auto":
            if "prompt" in row or "reward_model" in row:
                fmt = "verl"
            elif "question" in row and "answer" in row:
                fmt = "gsm8k"
            else:
                raise ValueError(
                    "neither verl's layout (field 'prompt') nor GSM8K's ('question', 'answer'); "
                    "set SamplerConfig.row_format='fields' with prompt_field / answer_field"
                )
        extra_info: dict[str, Any] = {}
        if fmt == "verl":
            message, data_source, reward_model, extra_info = _verl_prompt(row)
        elif fmt == "gsm8k":
            question = _text(row, "question")
            answer = _text(row, "answer")
            truth = _gsm8k_truth(answer)
            message = [{"role": "user", "content": f"{question} {GSM8K_INSTRUCTION}"}]
            data_source = self.config.data_source or "openai/gsm8k"
            reward_model = {"style": "rule", "ground_truth": truth}
            extra_info = {"split": "test", "index": row.get("idx", row.get("index")), "question": question}
        else:
            prompt = _text(row, self.config.prompt_field)
            if self.config.instruction:
                prompt = f"{prompt} {self.config.instruction}"
            if self.config.answer_field not in row or row[self.config.answer_field] is None:
                raise ValueError(f"missing field {self.config.answer_field!r}")
            truth = row[self.config.answer_field]
            if self.config.answer_after is not None:
                text = _text(row, self.config.answer_field)
                if self.config.answer_after not in text:
                    field, marker = self.config.answer_field, self.config.answer_after
                    raise ValueError(f"field {field!r} has no {marker!r}")
                truth = text.rsplit(self.config.answer_after, 1)[1].strip()
            message = [{"role": "user", "content": prompt}]
            data_source = row.get("data_source") or self.config.data_source or "<none>"
            reward_model = {"style": "rule", "ground_truth": truth}
        uid = row.get("uid")
        extra: dict[str, Any] = {"extra_info": extra_info} if extra_info else {}
        state = RolloutState(
            message=message,
            data_source=data_source,
            reward_model=reward_model,
            group_id=str(uid) if uid is not None else default_uid,
            extra_fields=extra,
        )
        if self.tokenizer is not None:
            state.prompt_ids = self.prompt_ids(message)
        return state

    def prompt_ids(self, message: Sequence[dict[str, Any]]) -> list[int]:
        return chat_prompt_ids(self.tokenizer, message)

    def _too_long(self, state: RolloutState) -> bool:
        cfg = self.config
        if cfg.max_prompt_tokens is not None and len(state.prompt_ids or ()) > cfg.max_prompt_tokens:
            return True
        if cfg.max_prompt_chars is not None:
            chars = sum(len(str(m.get("content") or "")) for m in state.message)
            return chars > cfg.max_prompt_chars
        return False

    # --- handing out groups -----------------------------------------------------------------------

    def group(self, prompt: RolloutState, epoch: int = 0) -> list[RolloutState]:
        """``n`` fresh samples of ``prompt``: copies sharing nothing they could write to."""
        gid = prompt.group_id if epoch == 0 else f"{prompt.group_id}@{epoch}"
        return [
            prompt.model_copy(
                update={
                    "message": list(prompt.message),
                    "reward_model": dict(prompt.reward_model or {}),
                    "extra_fields": dict(prompt.extra_fields),
                    "group_id": gid,
                }
            )
            for _ in range(self.config.n)
        ]

    def groups(self) -> Iterator[list[RolloutState]]:
        """Every group of every epoch, in order (endless when ``epochs`` is None)."""
        epoch = 0
        while self.config.epochs is None or epoch < self.config.epochs:
            order = list(range(len(self.prompts)))
            if self.config.shuffle:
                random.Random(self.config.seed + epoch).shuffle(order)
            if not order:
                return
            for i in order:
                yield self.group(self.prompts[i], epoch)
            epoch += 1

    def next_group(self) -> list[RolloutState] | None:
        """The next group, or None when every epoch is done."""
        if self._iter is None:
            self._iter = self.groups()
        return next(self._iter, None)
