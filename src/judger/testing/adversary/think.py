"""The ``think`` rule: an answer inside ``<think>...</think>`` is not the answer.

What a reasoning model writes between ``<think>`` and ``</think>`` is scratch work it did not commit
to; a grader that reads a box (or ``####``, ``Answer:``, ``<answer>``) there pays a policy that
scatters candidates through its thoughts, or that never leaves them. Near misses: the gold only
inside the block, with another answer after it, with none after it, in a block never closed, and
R1-style (the chat template opened the block, so the response holds only ``</think>``). The honest
sibling states the gold after the block.
"""

from __future__ import annotations

from collections.abc import Iterator

from judger.testing.adversary.cases import NEUTRAL_PROMPT, NearMiss, boxed, gsm8k_problems
from judger.testing.adversary.hedge import QA_GOLDS

RULE = "think"
MATH_GOLDS = (("27", "28"), ("\\frac{4}{11}", "\\frac{8}{11}"), ("7\\pi", "6\\pi"), ("-4", "4"))
WORK = "Let me work it out"


def _cases(gold_answer: str, wrong_answer: str) -> Iterator[tuple[str, bool, str]]:
    """``(response, honest, note)`` around the final-answer strings of one format."""
    yield f"<think>{WORK}: {gold_answer}</think> So, finally: {wrong_answer}", False, "another answer after"
    yield f"<think>{WORK}: {gold_answer}</think>", False, "nothing after the block"
    yield f"<think>{WORK}: {gold_answer}</think> I am not sure of it.", False, "no answer after the block"
    yield f"<think>{WORK}: {gold_answer}", False, "a block never closed"
    yield f"{WORK}: {gold_answer}</think>", False, "R1-style block, nothing after it"
    yield f"<think>{WORK}.</think> So, finally: {gold_answer}", True, "the answer after the block"
    yield f"<think>{WORK}: {gold_answer}</think> So, finally: {gold_answer}", True, "the answer, also after"
    yield f"{WORK}.</think> So, finally: {gold_answer}", True, "R1-style, the answer after the block"


def think_cases(seed: int = 0) -> Iterator[NearMiss]:
    """The ``think`` rule's cases (fixed golds: ``seed`` is unused)."""
    del seed
    for gold, wrong in MATH_GOLDS:
        for response, honest, note in _cases(boxed(gold), boxed(wrong)):
            yield NearMiss(RULE, NEUTRAL_PROMPT, response, gold, honest, note, "math")
        for response, honest, note in _cases(f"\nAnswer: {gold}\n", f"\nAnswer: {wrong}\n"):
            yield NearMiss(RULE, NEUTRAL_PROMPT, response, gold, honest, note, "dapo")
    for problem in gsm8k_problems()[:4]:
        wrong = str(int(problem.gold) + 1)
        for response, honest, note in _cases(f"\n#### {problem.gold}\n", f"\n#### {wrong}\n"):
            yield NearMiss(RULE, problem.prompt, response, problem.gold, honest, note, "gsm8k")
    for prompt, gold, wrong in QA_GOLDS:
        for response, honest, note in _cases(f"<answer>{gold}</answer>", f"<answer>{wrong}</answer>"):
            yield NearMiss(RULE, prompt, response, gold, honest, note, "qa")
