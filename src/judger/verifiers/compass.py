"""CompassVerifierV2: the seeds' LLM verifier preset, over any OpenAI-compatible server."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import Field

from judger.verifiers.llm import DEFAULT_VERDICT_NAMES, LLMJudger, LLMVerifierFields
from judger.verifiers.prompts import GRADER_PROMPT
from judger.verifiers.truncation import DEFAULT_FINISH_WORDS
from judger.verifiers.verdicts import parse_compass_verdict


class CompassVerifierV2Judger(LLMJudger):
    """CompassVerifier grading: A (correct) -> 1.0, B (incorrect) -> -1.0, C (invalid) -> ``invalid_score``.

    The response is cut before grading (the text after the thinking finish words, its last 10
    lines, its last 1000 characters) because CompassVerifier is served with a 2048-token context.
    """

    def __init__(
        self,
        judger_name: str = "compass_verifier_v2",
        *,
        hosts: list[str],
        invalid_score: float = -1.0,
        thinking_finish_words: Sequence[str] = DEFAULT_FINISH_WORDS,
        max_response_lines: int | None = 10,
        max_response_chars: int | None = 1000,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            judger_name,
            hosts=hosts,
            prompt_template=GRADER_PROMPT,
            verdict_parser=parse_compass_verdict,
            verdict_scores={"A": 1.0, "B": -1.0, "C": float(invalid_score)},
            verdict_names=dict(DEFAULT_VERDICT_NAMES),
            correct_verdicts=("A",),
            finish_words=thinking_finish_words,
            max_response_lines=max_response_lines,
            max_response_chars=max_response_chars,
            **kwargs,
        )


class CompassVerifierV2Config(LLMVerifierFields):
    """CompassVerifier-v2 behind vLLM / lmdeploy / sglang at ``hosts``.

    Verdict A -> score 1.0, B -> -1.0 (as XTuner). C (invalid: truncated, repetitive, refusing or
    off-topic responses) is recorded as ``verdict="invalid"`` and scores ``invalid_score``, -1.0 by
    default so that rewards match XTuner's; set it to e.g. 0.0 to treat invalid answers apart from
    wrong ones. A reply with no readable verdict is a judge failure (the sample is FAILED).
    ``max_tokens`` defaults to 1 (the verdict letter); raise it for a chain-of-thought grader.
    """

    judger_name: str = Field(
        "compass_verifier_v2", description="the judger's name (in failures, logs and reports)"
    )
    invalid_score: float = Field(
        -1.0,
        description=(
            "score of verdict C (invalid: truncated, repetitive, refusing or off-topic); -1.0 as XTuner, "
            "0.0 to set it apart from wrong answers"
        ),
    )
    thinking_finish_words: list[str] = Field(
        default_factory=lambda: list(DEFAULT_FINISH_WORDS),
        description=(
            "the response is cut to the text after the last of each of these (in order) before the grader"
            " sees it"
        ),
    )
    max_response_lines: int | None = Field(
        10, ge=1, description="then to its last this many lines (None: all)"
    )
    max_response_chars: int | None = Field(
        1000, ge=1, description="then to its last this many characters (None: all)"
    )
    max_tokens: int | None = Field(1, ge=1, description="tokens the grader may generate")

    def build_local(self) -> CompassVerifierV2Judger:
        return CompassVerifierV2Judger(
            self.judger_name,
            invalid_score=self.invalid_score,
            thinking_finish_words=self.thinking_finish_words,
            max_response_lines=self.max_response_lines,
            max_response_chars=self.max_response_chars,
            **self._common(),
        )
