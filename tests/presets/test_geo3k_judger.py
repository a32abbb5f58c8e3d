"""GEO3K: 0.9 accuracy + 0.1 format on ``<think>...</think> ... \\boxed{}`` responses."""

from __future__ import annotations

import importlib.util
import re
import sys
import time

import pytest
from pydantic import ValidationError

import judger
from judger import RolloutState
from judger.scorers.math import geo3k

pytestmark = [pytest.mark.py310, pytest.mark.clients_env]

VERL_FORMAT = re.compile(r"<think>.*</think>.*\\boxed\{.*\}.*", re.DOTALL)


@pytest.mark.parametrize(
    "text",
    [
        "<think>a</think> so \\boxed{5}",
        "<think></think>\\boxed{}",
        "<think>a</think>\n\\boxed{5} trailing",
        "<think>a</think></think>\\boxed{5}",
        "<think>a \\boxed{5}</think>",
        "<think>a</think> \\boxed{5",
        " <think>a</think> \\boxed{5}",
        "<think>a</think> \\boxed 5",
        "\\boxed{5}",
        "<think>\\boxed{1}</think> x } \\boxed{",
        "<think>x</think>}\\boxed{",
        "",
    ],
)
def test_format_check_accepts_exactly_what_verls_regex_accepts(text: str) -> None:
    assert geo3k.format_ok(text) is bool(VERL_FORMAT.fullmatch(text))


def test_format_check_is_linear_where_the_regex_is_not() -> None:
    text = "<think>" + "</think>" * 200_000
    started = time.monotonic()
    assert geo3k.format_ok(text) is False
    assert time.monotonic() - started < 0.5


# (response, label, our score)
GOLDEN = [
    ("<think>r</think> The answer is \\boxed{5}.", "5", 1.0),
    ("<think>r</think> The answer is \\boxed{4}.", "5", 0.1),
    ("The answer is \\boxed{5}.", "5", 0.9),
    ("no box", "5", 0.0),
    # equivalent forms (verl grades these with mathruler)
    ("<think>r</think> \\boxed{\\frac{\\sqrt{3}}{2}}", "\\frac{\\sqrt3}{2}", 1.0),
    ("<think>r</think> \\boxed{5.0}", "5", 1.0),
    ("<think>r</think> \\boxed{2\\sqrt{2}}", "\\sqrt{8}", 1.0),
]


@pytest.mark.parametrize(("response", "gt", "ours"), GOLDEN)
def test_geo3k_default_mode(response: str, gt: str, ours: float) -> None:
    out = geo3k.compute_score(response, gt)
    assert out["score"] == pytest.approx(ours)
    assert out["acc"] is (ours >= 0.9)
    assert out["format"] == (1.0 if response.startswith("<think>") else 0.0)


def test_geo3k_options() -> None:
    assert geo3k.compute_score("5", "5", use_boxed=False)["acc"] is True
    assert geo3k.compute_score("\\boxed{5}", "5", format_score=0.5)["score"] == pytest.approx(0.5)


@pytest.mark.skipif(
    importlib.util.find_spec("mathruler") is None, reason="compat='verl' grades with mathruler"
)
@pytest.mark.parametrize(("response", "gt", "ours"), GOLDEN)
def test_geo3k_verl_mode_with_mathruler(response: str, gt: str, ours: float) -> None:  # pragma: no cover
    # checked with mathruler 0.1.0: verl's grader agrees with ours on these
    assert geo3k.compute_score(response, gt, compat="verl")["score"] == pytest.approx(ours)


def test_geo3k_verl_mode_requires_mathruler(monkeypatch: pytest.MonkeyPatch) -> None:
    # a None entry in sys.modules makes the package unimportable, as in an environment without it
    monkeypatch.setitem(sys.modules, "mathruler", None)
    monkeypatch.setitem(sys.modules, "mathruler.grader", None)
    with pytest.raises(ValidationError, match="mathruler"):
        judger.GEO3KJudgerConfig(compat="verl")
    with pytest.raises(ImportError, match="pip install mathruler"):
        geo3k.compute_score("\\boxed{5}", "5", compat="verl")


async def test_geo3k_judger_on_the_pool() -> None:
    cfg = judger.GEO3KJudgerConfig()
    assert (cfg.judger_name, cfg.execution) == ("hiyouga/geometry3k", "process")
    j = cfg.build()
    states = [
        RolloutState(message=[{"role": "user", "content": "q"}], response=r, reward_model={"ground_truth": g})
        for r, g, _ in GOLDEN
    ]
    out = await j.batch_judge(states)
    assert [s.reward["score"] for s in out] == pytest.approx([o for _, _, o in GOLDEN])
