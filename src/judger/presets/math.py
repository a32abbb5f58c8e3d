"""MathJudgerConfig: MATH / MATH-500 ``\\boxed{}`` answers, graded for equivalence on the process pool."""

from __future__ import annotations

from functools import lru_cache
from typing import Any, ClassVar

from pydantic import Field, model_validator

from judger.core.judger import JudgerPayload
from judger.core.rollout import RolloutState
from judger.presets.base import ScorerFn, ScorerJudger, ScorerJudgerConfig
from judger.scorers.committed import committed_text
from judger.scorers.math.boxed import BOXED, final_answer, final_boxes, last_boxed
from judger.scorers.math.order import prompt_text
from judger.scorers.math.prompt_facts import prompt_facts
from judger.scorers.math.restated import copies_question
from judger.scorers.math.reward import compute_score, ground_truth_text, trivial_result
from judger.scorers.math.stated import stated_answer

VERL_DATA_SOURCES = ("lighteval/MATH", "DigitalLearningGmbH/MATH-lighteval", "HuggingFaceH4/MATH-500")
"""The data_source names verl scores with ``math_reward``."""

DEFAULT_MATH_TIMEOUT = 10.0


def default_execution(data: Any) -> Any:
    """``execution`` defaults to "process" (killable workers), or "inline" for the pure-regex verl mode."""
    # a reward_handler replaces the scorer: where it runs, judger decides as for any handler
    # unless execution is asked for (judger.presets.xtuner_options.build_with_handler)
    if isinstance(data, dict) and "execution" not in data and data.get("reward_handler") is None:
        data = {**data, "execution": "inline" if data.get("compat") == "verl" else "process"}
    return data


_EXTRACTED_ONLY = {"extracted": True}


@lru_cache(maxsize=4096)
def _gold(label: str) -> str:
    # a label is the dataset's text, not the model's: GRPO groups repeat it, so it is read once
    return ground_truth_text(label)


def add_prompt_facts(payload: JudgerPayload, message: Any, answer: str | None) -> None:
    """Add what the prompt asks for, and whether ``answer`` restates it, to the scorer's keyword
    options (:func:`~judger.scorers.math.prompt_facts.prompt_facts`): the MATH-family presets whose
    answers are graded with the MATH equivalence."""
    facts = prompt_facts(message, answer, payload.get("label"))
    if facts:
        payload["scorer_kwargs"] = {**(payload.get("scorer_kwargs") or {}), **facts}


def quick_math_result(answer: Any, label: Any, kwargs: dict[str, Any]) -> dict[str, Any] | None:
    """``compute_score(answer, label, extracted=True, **kwargs)`` where it needs no parser
    (:func:`~judger.scorers.math.reward.trivial_result`), but two answers that differ are not
    decided when a run of boxes may still be graded as a list. None: grade it in full, on the pool.

    Only string labels: a missing one fails on the pool with the scorer's own reason.
    """
    if not isinstance(label, str) or not (answer is None or isinstance(answer, str)):
        return None
    if "boxes" in kwargs or "restates_question" in kwargs:
        return None  # two different boxes are graded as their list, a restatement refused, on the pool
    return trivial_result(answer, _gold(label))


class MathJudger(ScorerJudger):
    """A ScorerJudger that finds the boxed answer before dispatch (default mode only).

    Extracting in the calling process is a linear scan; it makes the payload small (a 10 MB
    response ships a few characters) and lets the batch dedup grade each distinct
    (answer, label) once, as GRPO groups repeat final answers far more often than whole responses.
    """

    # a grade is a pure function of the extracted answer, the label and the options: the same
    # answer to the same problem in a later batch (a validation file, the next GRPO step) is not
    # sent to a worker again
    remembers_grades: ClassVar[bool] = True

    def preprocess(self, rollout_state: RolloutState) -> JudgerPayload:
        payload = super().preprocess(rollout_state)
        response = payload.get("response")
        if self.options.get("compat") is None and isinstance(response, str):
            response = committed_text(response)  # a box inside <think> reasoning is no answer
            answer = final_answer(response)
            kwargs: dict[str, Any] = {"extracted": True}
            if answer is None and self.options.get("unboxed", True):
                answer = stated_answer(response)
                # read without a box: from the question restated, it would pay without solving
                if answer is not None and copies_question(response, prompt_text(rollout_state.message)):
                    kwargs["restates_question"] = True
            payload["response"] = answer
            payload["scorer_kwargs"] = kwargs
            if answer is not None and response.count(BOXED) >= 2 and answer == last_boxed(response):
                boxes = final_boxes(response)
                if len(set(boxes)) >= 2:
                    kwargs["boxes"] = tuple(boxes)
            # the prompt is read only for an answer that needs grading: what it asks for never
            # changes a result decided without a parser
            decided = self.scorer is compute_score and quick_math_result(answer, payload.get("label"), kwargs)
            if not decided:
                kwargs.update(prompt_facts(rollout_state.message, answer, payload.get("label")))
        return payload

    def _dedup_key(self, payload: JudgerPayload) -> tuple[Any, ...]:
        # the common payload (a str label, no extra_info read, no option beyond "extracted") keyed
        # by its two strings; every other shape by the general key, which is never a pair
        label = payload.get("label")
        kwargs = payload.get("scorer_kwargs")
        if type(label) is str and self.extra_info_fields == () and kwargs == _EXTRACTED_ONLY:
            return (payload.get("response"), label)
        return super()._dedup_key(payload)

    def quick_result(self, payload: JudgerPayload) -> dict[str, Any] | None:
        # only for the answer this judger extracted and the scorer it ships (a subclass's own
        # scorer is always run)
        kwargs = payload.get("scorer_kwargs")
        if self.scorer is not compute_score or not kwargs or not kwargs.get("extracted"):
            return None
        if self.options.get("compat") is not None:
            return None
        return quick_math_result(payload.get("response"), payload.get("label"), kwargs)


class MathJudgerConfig(ScorerJudgerConfig):
    """MATH-style judging of the last ``\\boxed{}`` answer (see :mod:`judger.scorers.math.reward`).

    Output ``{"score": 1.0 | 0.0, "acc": bool, "pred": str | None}``.

    ``compat="verl"`` reproduces verl's ``math_reward`` exactly (Hendrycks ``strip_string`` then
    string equality; runs inline). The default mode differs from verl in that it judges
    *equivalence* with Math-Verify (``parse`` + ``verify``, gold first) instead of comparing
    normalised strings, so ``5.0`` vs ``5``, ``0.75`` vs ``\\frac34``, ``\\pi/2`` vs ``\\frac{\\pi}{2}``
    and ``2\\sqrt2`` vs ``\\sqrt8`` are correct; it reads the last box in any form (``\\fbox{}``,
    which verl scores 0) and ignores a period inside it (``\\boxed{72.}``); it rejects
    Math-Verify's tiny-number false positives (``1/2004!`` vs ``1/2006!``); and it runs on the
    process pool, where a hostile answer (``9^{9^{9^9}}``) is killed at ``timeout`` seconds and
    reported as a timeout failure instead of hanging the trainer. It also reads the forms
    Math-Verify misses (units, decimal approximations, clock times, option letters, matrices,
    power towers by value; docs/concepts/grading.md) and the prompt's request for an order.
    """

    # the scorer reads no extra_info: verl rows differing only there are scored once
    extra_info_fields: ClassVar[tuple[str, ...] | None] = ()
    judger_name: str = Field(
        "DigitalLearningGmbH/MATH-lighteval", description="the judger's name; verl's data_source for MATH"
    )
    timeout: float = Field(DEFAULT_MATH_TIMEOUT, gt=0, description="deadline of one sample, in seconds")
    unboxed: bool = Field(
        True,
        description="without a \\boxed{}, read a final answer the response states ('The answer is "
        "$X$', 'Final answer: X', the last math of its last line); False makes the box a format "
        "requirement (a strict format reward). Default mode only: compat='verl' always needs a box",
    )

    @model_validator(mode="before")
    @classmethod
    def _pick_execution(cls, data: Any) -> Any:
        return default_execution(data)

    @model_validator(mode="after")
    def _check_unboxed(self) -> MathJudgerConfig:
        if self.compat == "verl" and self.unboxed and "unboxed" in self.model_fields_set:
            raise ValueError(
                "MathJudgerConfig: unboxed=True reads answers without a box, which verl's math_reward "
                "never does: drop unboxed (or set it False) with compat='verl'"
            )
        return self

    def preset_floor(self) -> float:
        return 0.0

    def scorer(self) -> ScorerFn:
        return compute_score

    def scorer_options(self) -> dict[str, Any]:
        options = super().scorer_options()
        if not self.unboxed:
            options["unboxed"] = False  # only when off: the default keeps the options (and keys) as they were
        return options

    def judger_class(self) -> type[ScorerJudger]:
        return MathJudger
