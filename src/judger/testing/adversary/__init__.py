"""Play an RL policy against a reward's lenient rules: near misses it must not pay.

An RL policy is an optimiser. A reward that pays an answer the policy can write without solving the
problem (a rounded decimal of an exact value, the right number with another unit, a swapped order,
the question's own expression, two guesses at once, an answer left inside ``<think>``) is a target
it will find and farm. Each rule below generates such *near misses* beside *honest siblings*
(right answers in the same form, which a fair reward pays, so that one paying nothing cannot
pass) and :func:`run` counts what a grader pays of each::

    from judger.testing.adversary import all_cases, report, run

    def my_reward(prompt: str, response: str, gold: str) -> bool:
        ...

    print(report(run(my_reward, all_cases(formats=("math",)))))

    # a judger preset: built once, every case through one batch_judge
    from judger.testing.adversary import preset_grader
    grader = preset_grader("math")            # or preset_grader("gsm8k", compat="verl")
    print(report(run(grader, all_cases(formats=grader.formats))))

Rules (the keys of :data:`RULES`; each module's docstring says what it tries):

- ``decimal``: decimals of exact golds (``3.1`` for ``\\pi``) at 1-6 significant digits, rounded
  and truncated (:mod:`.decimals`);
- ``unit``: the gold's number with a unit of another dimension or an unconverted one (:mod:`.units`);
- ``order``: ordered answers permuted, interval ends swapped, a ``50,\\!625`` label read as a list
  (:mod:`.order`);
- ``sign``: the gold negated or given with both signs (:mod:`.sign`);
- ``restated``: the prompt's own math boxed, or the question as the response (:mod:`.restated`);
- ``hedge``: two guesses in one answer (:mod:`.hedge`);
- ``think``: the answer only inside ``<think>...</think>`` (:mod:`.think`).

A case (:class:`NearMiss`) is written in one answer format (``fmt``): ``math`` (``\\boxed{}``),
``gsm8k`` (``####``), ``dapo`` (``Answer:``) or ``qa`` (``<answer>``). A grader is any callable
``grader(prompt, response, gold) -> bool``, or an object with ``grade_many(cases) -> list[bool]``.
Generation is deterministic: ``seed`` picks permutations and wrong guesses where a rule chooses.
Rules that read the bundled MATH labels parse them with ``latex2sympy2_extended`` (judger's
``math`` extra).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Iterator, Sequence

from judger.testing.adversary.cases import FORMATS, Format, NearMiss
from judger.testing.adversary.decimals import decimal_cases
from judger.testing.adversary.hedge import hedge_cases
from judger.testing.adversary.order import order_cases
from judger.testing.adversary.presets import PRESET_FORMATS, PresetGrader, formats_read
from judger.testing.adversary.restated import restated_cases
from judger.testing.adversary.sign import sign_cases
from judger.testing.adversary.tally import BatchGrader, Grader, Tally, grade, report, run, tally
from judger.testing.adversary.think import think_cases
from judger.testing.adversary.units import unit_cases

RULES: dict[str, Callable[[int], Iterator[NearMiss]]] = {
    "decimal": decimal_cases,
    "unit": unit_cases,
    "order": order_cases,
    "sign": sign_cases,
    "restated": restated_cases,
    "hedge": hedge_cases,
    "think": think_cases,
}
"""Each rule's generator: ``RULES[name](seed)`` yields its cases."""


def all_cases(
    rules: Iterable[str] | None = None, formats: Iterable[Format] | None = None, seed: int = 0
) -> list[NearMiss]:
    """The cases of ``rules`` (default: all) written in ``formats`` (default: all)."""
    wanted_rules = list(RULES) if rules is None else list(rules)
    unknown = [r for r in wanted_rules if r not in RULES]
    if unknown:
        raise KeyError(f"unknown adversary rules {unknown}; known: {sorted(RULES)}")
    wanted_formats = set(FORMATS if formats is None else formats)
    return [case for rule in wanted_rules for case in RULES[rule](seed) if case.fmt in wanted_formats]


def sample(cases: Sequence[NearMiss], per_rule: int, seed: int = 0) -> list[NearMiss]:
    """At most ``per_rule`` near misses and ``per_rule`` honest cases of each rule, chosen with
    ``seed``, in their original order: a quick check of a slow grader."""
    rng = random.Random(seed)
    groups: dict[tuple[str, bool], list[int]] = {}
    for i, case in enumerate(cases):
        groups.setdefault((case.rule, case.paid_if_honest), []).append(i)
    kept = sorted(i for idx in groups.values() for i in rng.sample(idx, min(per_rule, len(idx))))
    return [cases[i] for i in kept]


def preset_grader(name: str, compat: str | None = None, **options: object) -> PresetGrader:
    """The built-in preset ``name`` (``"math"``, ``"gsm8k"``, ``"MathVerifyJudgerConfig"``...) as a
    grader, in its default mode or ``compat="verl"``; ``.formats`` are the answer formats it reads."""
    from judger.presets import lookup

    return PresetGrader(lookup(name)(compat=compat, **options))


__all__ = [
    "FORMATS",
    "PRESET_FORMATS",
    "RULES",
    "BatchGrader",
    "Format",
    "Grader",
    "NearMiss",
    "PresetGrader",
    "Tally",
    "all_cases",
    "formats_read",
    "grade",
    "preset_grader",
    "report",
    "run",
    "sample",
    "tally",
]
