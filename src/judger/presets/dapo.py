"""DapoMathJudgerConfig: DAPO's Minerva ``Answer:`` scorer with eos stripping and the overlong penalty."""

from __future__ import annotations

import logging
from typing import Any, ClassVar

from pydantic import Field, model_validator

from judger.core.judger import JudgerPayload
from judger.core.rollout import RolloutState
from judger.core.sparse_log import SparseLog
from judger.presets.base import ScorerFn, ScorerJudger, ScorerJudgerConfig
from judger.presets.math import DEFAULT_MATH_TIMEOUT, add_prompt_facts, default_execution
from judger.scorers.labels import missing_label
from judger.scorers.math.dapo import committed_answer, compute_score

_log = logging.getLogger(__name__)
_overruns = SparseLog(first=3)


def token_count(tokenizer: Any, text: str) -> int:
    """How many tokens ``tokenizer(text)`` gives, as XTuner counts a response for the penalty."""
    ids = tokenizer(text)["input_ids"]
    if hasattr(ids, "tolist"):
        ids = ids.tolist()
    while ids and isinstance(ids[0], list):  # a batch of one
        ids = [i for row in ids for i in row]
    return len(ids)


class DapoMathJudger(ScorerJudger):
    """Passes the response's token count to the scorer for the overlong penalty: ``len(response_ids)``,
    or with a ``tokenizer`` the count of the re-tokenised text, as XTuner computes it. A list of eos
    tokens is stripped here (the first one the response ends with, as XTuner does)."""

    def __init__(
        self, *args: Any, eos_tokens: list[str] | None = None, tokenizer: Any = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.eos_tokens = list(eos_tokens or [])
        self.tokenizer = tokenizer

    def preprocess(self, rollout_state: RolloutState) -> JudgerPayload:
        payload = super().preprocess(rollout_state)
        payload["label"] = self._label(payload.get("label"))
        response = payload.get("response")
        if self.eos_tokens and isinstance(response, str):
            for eos in self.eos_tokens:
                if response.endswith(eos):
                    payload["response"] = response[: -len(eos)]
                    break
        if self.options.get("max_response_len") is not None:
            if self.tokenizer is not None:
                length = token_count(self.tokenizer, rollout_state.response or "")
            elif rollout_state.response_ids is None:
                raise ValueError(
                    f"judger {self.judger_name!r}: enable_overlong_buffer needs response_ids on the "
                    "rollout state (the penalty counts response tokens), or a tokenizer in the config"
                )
            else:
                length = len(rollout_state.response_ids)
            payload["scorer_kwargs"] = {"response_length": length}
        response = payload.get("response")
        if self.options.get("compat") is None and self.scorer is compute_score and isinstance(response, str):
            options = self.options
            answer = committed_answer(
                response, bool(options.get("strict_box_verify")), options.get("boxed_fallback", True)
            )
            add_prompt_facts(payload, rollout_state.message, answer)
        return payload

    def timeout_result(self, payload: JudgerPayload) -> dict[str, Any] | None:
        """verl's verdict when Math-Verify's equivalence check overran its deadline: the check runs
        only after the normalised strings differed, and could only turn that -1 into a +1, so the
        answer is graded wrong (with its overlong penalty, if any) rather than failed: a trainer
        that drops failed samples (XTuner) would otherwise never see it penalised."""
        if self.scorer is not compute_score or self.options.get("compat") == "verl":
            return None
        args, kwargs = self._call_args(payload)
        result = compute_score(*args, **{**kwargs, "compat": "verl"})
        n = _overruns.tick()
        if n is not None:
            _log.warning(
                "judger %r: Math-Verify's equivalence check of %r overran its %g s; verl's verdict kept "
                "(score %g; %d such overruns so far)",
                self.judger_name,
                str(result.get("pred"))[:80],
                self.timeout,
                result["score"],
                n,
            )
        return result

    def _label(self, label: Any) -> str:
        """DAPO compares strings: a number label is its text (default mode); anything else fails
        this sample with a message naming the field, not the scorer's raw AttributeError."""
        if isinstance(label, str):
            return label
        if label is None:
            raise missing_label(f"judger {self.judger_name!r}")
        number = isinstance(label, (int, float)) and not isinstance(label, bool)
        if number and self.options.get("compat") is None:
            return str(label)
        raise ValueError(
            f"judger {self.judger_name!r}: reward_model.ground_truth must be a string "
            f"{'' if self.options.get('compat') is None else '(compat=verl) '}"
            f"(or a number), got {type(label).__name__}"
        )


class DapoMathJudgerConfig(ScorerJudgerConfig):
    """DAPO math (see :mod:`judger.scorers.math.dapo`): +1 / -1 on the last ``Answer: ...`` line.

    Output ``{"score", "acc", "pred"}``, plus ``overlong_reward`` and ``overlong`` when the
    overlong buffer is on, in which case ``score`` includes the penalty
    ``min(-(L - (max_response_len - overlong_buffer_len)) / overlong_buffer_len * factor, 0)``
    (``factor`` = ``overlong_penalty_factor``) with ``L = len(response_ids)``, as verl's DAPO reward
    manager computes it (XTuner re-tokenises the text instead).
    One trailing ``eos_token`` is stripped from the response first.

    XTuner's options: ``eos_token`` may be a list (the first one the response ends with is
    stripped); ``tokenizer`` makes the penalty count the re-tokenised text as XTuner does (instead
    of ``response_ids``); ``score`` / ``format_score``, which XTuner packs into ``extra_info`` but
    its scorer never reads, are accepted at their defaults 1 and 0 and refused otherwise (they reach
    a ``reward_handler`` of your own, as in XTuner). They can also come in ``extra_info``.

    ``compat="verl"`` reproduces verl's ``math_dapo`` exactly (string equality after Minerva
    normalisation; runs inline). The default mode keeps the same extraction and format requirement
    but, when the normalised strings differ, compares them with Math-Verify's equivalence, fixing
    false negatives such as ``Answer: 5.0`` vs ``5`` or ``Answer: 1/2`` vs ``\\frac{1}{2}``; it runs
    on the process pool with a deadline per sample, and when the check overruns verl's verdict
    (-1: the check runs only once the strings differed) stands rather than a failure. Its lowest score, what a
    trainer gives a sample it fails on, is -1 (less the whole overlong penalty when that is on).
    """

    xtuner_extra_info: ClassVar[tuple[str, ...]] = (
        "eos_token",
        "score",
        "format_score",
        "enable_overlong_buffer",
        "max_response_len",
        "overlong_buffer_len",
        "overlong_penalty_factor",
        "tokenizer",
    )

    # the scorer reads no extra_info: verl rows differing only there are scored once
    extra_info_fields: ClassVar[tuple[str, ...] | None] = ()
    judger_name: str = Field("math_dapo", description="the judger's name; verl's data_source for DAPO math")
    timeout: float = Field(DEFAULT_MATH_TIMEOUT, gt=0, description="deadline of one sample, in seconds")
    eos_token: str | list[str] | None = Field(
        None, description="stripped once from the end of the response (a list: the first that matches)"
    )
    score: float = Field(
        1.0, description="XTuner's field; its DAPO scorer never reads it: only 1 is accepted"
    )
    format_score: float = Field(
        0.0, description="XTuner's field; its DAPO scorer never reads it: only 0 is accepted"
    )
    tokenizer: Any = Field(
        None, exclude=True, description="count response tokens as tokenizer(response) (XTuner's way)"
    )
    strict_box_verify: bool = Field(
        False, description="verl's strict mode: last \\boxed{} of the last 100 chars"
    )
    boxed_fallback: bool = Field(
        True, description="no 'Answer:' line: grade the last \\boxed{} (verl 0.9); False: older verl / XTuner"
    )
    enable_overlong_buffer: bool = Field(
        False,
        description=(
            "subtract DAPO's overlong penalty from responses longer than max_response_len - "
            "overlong_buffer_len (counted in response_ids, or with tokenizer)"
        ),
    )
    max_response_len: int | None = Field(None, gt=0, description="required with enable_overlong_buffer")
    overlong_buffer_len: int | None = Field(None, gt=0, description="required with enable_overlong_buffer")
    overlong_penalty_factor: float | None = Field(
        None, ge=0, description="required with enable_overlong_buffer"
    )

    @model_validator(mode="before")
    @classmethod
    def _pick_execution(cls, data: Any) -> Any:
        return default_execution(data)

    @model_validator(mode="after")
    def _check_overlong(self) -> DapoMathJudgerConfig:
        if isinstance(self.eos_token, list) and (
            not self.eos_token or not all(isinstance(e, str) and e.strip() for e in self.eos_token)
        ):
            raise ValueError(
                f"eos_token must be a non-empty list of non-empty strings, got {self.eos_token!r}"
            )
        if self.reward_handler is None and (self.score != 1 or self.format_score != 0):
            raise ValueError(
                f"DapoMathJudgerConfig(score={self.score!r}, format_score={self.format_score!r}) would not "
                "be honoured: DAPO scores +1 / -1 (XTuner packs score and format_score into extra_info "
                "but its scorer never reads them); leave them at 1 and 0, or pass a reward_handler "
                "that reads them"
            )
        if self.tokenizer is not None and not self.enable_overlong_buffer:
            raise ValueError(
                "tokenizer is used only to count response tokens for the overlong penalty; set "
                "enable_overlong_buffer=True (with its lengths) or remove it"
            )
        if self.enable_overlong_buffer:
            missing = [
                name
                for name in ("max_response_len", "overlong_buffer_len", "overlong_penalty_factor")
                if getattr(self, name) is None
            ]
            if missing:
                raise ValueError(f"enable_overlong_buffer=True requires {', '.join(missing)}")
            assert self.max_response_len is not None and self.overlong_buffer_len is not None
            if self.overlong_buffer_len > self.max_response_len:
                raise ValueError(
                    f"overlong_buffer_len ({self.overlong_buffer_len}) must not exceed "
                    f"max_response_len ({self.max_response_len})"
                )
        return self

    def preset_floor(self) -> float:
        # a wrong answer at the length limit: -1 and the whole overlong penalty
        if self.enable_overlong_buffer and self.overlong_penalty_factor:
            return -1.0 - self.overlong_penalty_factor
        return -1.0

    def scorer(self) -> ScorerFn:
        return compute_score

    def handler_extra_info(self) -> dict[str, Any]:
        # as XTuner packs it: the overlong settings only when the buffer is on
        info: dict[str, Any] = {
            "eos_token": self.eos_token,
            "score": self.score,
            "format_score": self.format_score,
        }
        if self.enable_overlong_buffer:
            for key in self.xtuner_extra_info[3:]:
                info[key] = getattr(self, key)
        return info

    def judger_options(self) -> dict[str, Any]:
        eos_tokens = self.eos_token if isinstance(self.eos_token, list) else None
        return {"eos_tokens": eos_tokens, "tokenizer": self.tokenizer}

    def scorer_options(self) -> dict[str, Any]:
        options: dict[str, Any] = {"compat": self.compat}
        if isinstance(self.eos_token, str) and self.eos_token:
            options["eos_token"] = self.eos_token
        if self.strict_box_verify:
            options["strict_box_verify"] = True
        if not self.boxed_fallback:
            options["boxed_fallback"] = False
        if self.enable_overlong_buffer:
            options["max_response_len"] = self.max_response_len
            options["overlong_buffer_len"] = self.overlong_buffer_len
            options["overlong_penalty_factor"] = self.overlong_penalty_factor
        return options

    def judger_class(self) -> type[ScorerJudger]:
        return DapoMathJudger
