"""The QA answer extractor: the same answer as verl's regex, in linear time."""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from judger.scorers.qa import compute_score, extract_solution

pytestmark = pytest.mark.py310

VERL_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


def _verl_extract(text: str) -> str | None:
    matches = list(VERL_ANSWER.finditer(text))
    return matches[-1].group(1).strip() if matches else None


pieces = st.sampled_from(
    ["<answer>", "</answer>", "<answer", "answer>", "</", "<", ">", " x ", "\n", "42", "a"]
)


@settings(max_examples=2000, deadline=None)
@given(st.lists(pieces, max_size=30).map("".join))
def test_same_answer_as_verls_regex(text: str) -> None:
    assert extract_solution(text) == _verl_extract(text)


def test_open_tags_cost_linear_time() -> None:
    # 256 kB of opening tags and one closing tag at the start: the regex took 96 s on this shape
    hostile = "</answer>" + "<answer>" * 32_768
    started = time.perf_counter()
    assert extract_solution(hostile) is None
    result = compute_score(hostile + " <answer>x", {"target": ["x"]})
    assert time.perf_counter() - started < 1.0
    assert result == {"score": 0.0, "acc": False, "pred": None}
