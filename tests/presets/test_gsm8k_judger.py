"""GSM8K scorer and judger: verl's exact behaviour in compat mode, its false negatives fixed by default.

``data/gsm8k_verl_golden.jsonl`` holds verl's own scores (verl 0.9.1 wheel,
``verl/utils/reward_score/gsm8k.py`` loaded by file path) for 40 edge cases and 150 responses built
from GSM8K test solutions, in strict and flexible mode, with format_score 0 and 0.1.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import MappingProxyType

import pytest

from judger import ComposedJudgerConfig, GSM8KJudgerConfig, RolloutState, Status
from judger.core.errors import NoResponseError
from judger.presets.inline import responses_and_labels
from judger.scorers.math.gsm8k import canonical_number, compute_score, make_batch_scorer

pytestmark = [pytest.mark.py310, pytest.mark.clients_env]

GOLDEN = [json.loads(line) for line in (Path(__file__).parent / "data" / "gsm8k_verl_golden.jsonl").open()]


def state(response: object, label: object = "72", **fields: object) -> RolloutState:
    return RolloutState(response=response, reward_model={"ground_truth": label}, **fields)  # type: ignore[arg-type]


# --- compat="verl": verl's values on every golden case --------------------------------------------


@pytest.mark.parametrize("method", ["strict", "flexible"])
def test_compat_verl_equals_verl_on_golden_cases(method: str) -> None:
    for row in GOLDEN:
        out = compute_score(row["response"], row["ground_truth"], compat="verl", method=method)
        assert out["score"] == row[f"verl_{method}"], row
        assert out["pred"] == row[f"verl_{method}_pred"], row
        with_format = compute_score(
            row["response"], row["ground_truth"], compat="verl", method=method, format_score=0.1
        )
        assert with_format["score"] == row[f"verl_{method}_fs"], row


@pytest.mark.parametrize("compat", ["verl", None])
@pytest.mark.parametrize("method", ["strict", "flexible"])
def test_batch_scorer_equals_single_scorer(compat: str | None, method: str) -> None:
    responses = [row["response"] for row in GOLDEN]
    labels = [row["ground_truth"] for row in GOLDEN]
    batch = make_batch_scorer(compat, method, 0.1, 1.0)(responses, labels)
    single = [
        compute_score(r, g, compat=compat, method=method, format_score=0.1) for r, g in zip(responses, labels)
    ]
    assert batch == single


class _Text(str):
    """A str subclass: a str to both scorers."""


@pytest.mark.parametrize("compat", ["verl", None])
def test_batch_scorer_equals_single_scorer_on_odd_inputs(compat: str | None) -> None:
    """Whatever the batch path skips for speed (type checks, the spacing after ``####``, leading
    zeros), it gives each sample what the single scorer gives, or fails it with the same error."""
    cases: list[tuple[object, object]] = [
        ("#### 72", "72"),
        ("####   72", "72"),
        ("#### \t72", "72"),
        ("#### 0072", "72"),
        ("#### 000", "0"),
        ("#### \u0667\u0662", "72"),  # Arabic-Indic digits: not ASCII, left to the regex
        ("#### 72 ", "72"),
        ("#### 72\n#### 71", "72"),
        (_Text("#### 72"), "72"),
        ("#### 72", 72),
        ("#### 72", [72]),
        ("#### 72", None),
        (None, None),
        (None, "72"),
        (b"#### 72", "72"),
        (["#### 72"], "72"),
        (72, "72"),
        # the window is the last 300 characters: a "####" starting at its first one is read, one a
        # character before it is not
        ("x" * 400 + "#### 72" + "." * 293, "72"),
        ("x" * 400 + "#### 72" + "." * 294, "72"),
        ("x" * 400 + "#### " + "7" * 295, "7" * 295),
        ("x" * 400 + "#### " + "7" * 296, "7" * 296),
        ("#### 72" + "." * 293, "72"),
    ]
    responses = [r for r, _ in cases]
    labels = [g for _, g in cases]
    batch = make_batch_scorer(compat)(responses, labels)

    def single(response: object, label: object) -> object:
        try:
            return compute_score(response, label, compat=compat)  # type: ignore[arg-type]
        except Exception as exc:
            return exc

    for case, got in zip(cases, batch):
        want = single(*case)
        if isinstance(want, Exception) and case[0] is None:
            assert type(got).__name__ == "NoResponseError", case
        elif isinstance(want, Exception):
            assert (type(got), str(got)) == (type(want), str(want)), case
        else:
            assert got == want, case


def test_fields_are_read_alike_whatever_mapping_holds_them() -> None:
    """The batch path reads responses and labels with ``dict.get`` where it can; a field mapping or
    ``reward_model`` that is not a dict is read as the comprehensions read it, not refused."""
    plain = [
        {"response": "#### 72", "reward_model": {"ground_truth": "72"}},
        {"response": None, "reward_model": {"ground_truth": 3}},
        {"response": "x", "reward_model": {}},
        {"reward_model": {"ground_truth": "1"}},
    ]
    want = (["#### 72", None, "x", None], ["72", 3, None, "1"])
    assert responses_and_labels(plain) == want
    assert responses_and_labels([MappingProxyType(f) for f in plain]) == want
    odd = [*plain, {"response": "y", "reward_model": None}, {"response": "z", "reward_model": "72"}]
    assert responses_and_labels(odd) == (want[0] + ["y", "z"], want[1] + [None, None])


# --- the known verl false negatives ----------------------------------------------------------------


@pytest.mark.parametrize(
    "response",
    ["#### 1234.", "#### 1234.00", "#### $1,234", "#### $1234", "####1234", "####  1234"],
)
def test_default_mode_fixes_verl_false_negatives(response: str) -> None:
    ours = compute_score("Work...\n" + response, "1234")
    verl = compute_score("Work...\n" + response, "1234", compat="verl")
    assert ours == {"score": 1.0, "acc": True, "pred": "1234"}
    assert verl["score"] == 0.0 and verl["acc"] is False


def test_default_mode_keeps_the_format_requirement() -> None:
    # strict still needs '####': a bare final number is no answer at all
    assert compute_score("so the answer is 1234.", "1234") == {"score": 0.0, "acc": False, "pred": None}
    # flexible takes the last number, and a sentence-final period no longer breaks it
    assert compute_score("so the answer is 1234.", "1234", method="flexible")["acc"] is True
    assert compute_score("so the answer is 1234.", "1234", compat="verl", method="flexible")["acc"] is False


def test_default_mode_compares_numbers_not_strings() -> None:
    assert compute_score("#### 0.50", "0.5")["acc"] is True
    assert compute_score("#### 72", 72)["acc"] is True  # an int label: verl compares str to int, never equal
    assert compute_score("#### 72", 72, compat="verl")["acc"] is False
    assert compute_score("#### 72", 72.0)["acc"] is True
    assert compute_score("#### 73", "72") == {"score": 0.0, "acc": False, "pred": "73"}
    assert compute_score("#### 73", "72", format_score=0.1)["score"] == 0.1
    assert compute_score("#### -5", "5")["acc"] is False
    assert compute_score("#### 1.2.3", "123")["acc"] is False  # not a number: kept as written


def test_last_300_characters_only_in_both_modes() -> None:
    tail = " filler" * 50
    for compat in (None, "verl"):
        assert compute_score("#### 72" + tail, "72", compat=compat)["pred"] is None
        assert compute_score("x" * 1000 + "#### 72", "72", compat=compat)["acc"] is True


def test_the_last_answer_counts() -> None:
    assert compute_score("#### 7\n...\n#### 72", "72")["acc"] is True
    assert compute_score("#### 72\n...\n#### 7", "72")["acc"] is False


def test_canonical_number() -> None:
    assert canonical_number("1,234.00") == "1234"
    assert canonical_number("$1,234.") == "1234"
    assert canonical_number("-0.50") == "-0.5"
    assert canonical_number("007") == "7"
    assert canonical_number("1e999999999") is None  # never expand an exponent in a label
    assert canonical_number("abc") is None
    assert canonical_number(True) is None


def test_invalid_options_and_inputs() -> None:
    with pytest.raises(ValueError, match="method"):
        compute_score("#### 1", "1", method="loose")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="compat"):
        compute_score("#### 1", "1", compat="xtuner")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="str"):
        compute_score(None, "1")  # type: ignore[arg-type]


# --- the judger ------------------------------------------------------------------------------------


def test_config_defaults_and_fields() -> None:
    config = GSM8KJudgerConfig()
    assert config.judger_name == "openai/gsm8k"
    assert (config.method, config.format_score, config.score, config.compat) == ("strict", 0.0, 1.0, None)
    assert config.execution == "inline"


async def test_batch_judge_matches_single_judge_and_fails_per_sample() -> None:
    judger = GSM8KJudgerConfig(format_score=0.1).build()
    responses = ["#### 72.", "#### $72", "#### 71", "no answer", None, "#### 72"]
    states = [state(r) for r in responses] + [RolloutState(response="no answer")]  # no reward_model
    singles = [await judger.judge(s.model_copy(deep=True)) for s in states]
    batched = await judger.batch_judge(states)
    assert [s.reward for s in batched] == [s.reward for s in singles]
    assert [s.reward["score"] if s.reward else None for s in batched] == [1.0, 1.0, 0.1, 0.0, None, 1.0, None]
    failed = batched[4]
    assert failed.status == Status.FAILED and failed.error_msg == (
        "NoResponseError: nothing to judge: the response is null"
    )
    assert failed.extra_fields["judge_failure"] == {"judger": "openai/gsm8k", "kind": "error"}
    # a missing label is a failure, not a wrong answer
    assert batched[6].status == Status.FAILED and "ground truth is None" in (batched[6].error_msg or "")
    # every sample owns its reward dict
    batched[0].reward["extra"] = 1  # type: ignore[index]
    assert "extra" not in batched[1].reward  # type: ignore[operator]


async def test_batch_judge_on_error_raise() -> None:
    judger = GSM8KJudgerConfig(on_error="raise").build()
    with pytest.raises(NoResponseError):
        await judger.batch_judge([state("#### 72"), state(None)])


async def test_compat_and_flexible_through_the_judger() -> None:
    verl = GSM8KJudgerConfig(compat="verl").build()
    flexible = GSM8KJudgerConfig(method="flexible").build()
    (a, b) = await verl.batch_judge([state("#### 72."), state("#### 72")])
    assert (a.reward["score"], b.reward["score"]) == (0.0, 1.0)  # type: ignore[index]
    (c,) = await flexible.batch_judge([state("it is 72.")])
    assert c.reward == {"score": 1.0, "acc": True, "pred": "72"}


async def test_large_batch_yields_to_the_event_loop() -> None:
    judger = GSM8KJudgerConfig().build()
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    task = asyncio.ensure_future(ticker())
    await asyncio.sleep(0)
    states = [state(f"#### {i}", str(i)) for i in range(10_000)]
    await judger.batch_judge(states)
    task.cancel()
    assert all(s.reward["acc"] for s in states)  # type: ignore[index]
    assert ticks >= 4  # the 10k batch was scored in chunks, with the loop running between them


async def test_as_a_composed_branch() -> None:
    composed = ComposedJudgerConfig(branches={"openai/gsm8k": GSM8KJudgerConfig()}).build()
    states = await composed.batch_judge([state("#### 72", data_source="openai/gsm8k")])
    assert states[0].reward == {"score": 1.0, "acc": True, "pred": "72"}
    # an unknown data_source is a configuration error: it raises, it is not a FAILED sample
    with pytest.raises(KeyError, match="Unknown judger branch from data_source: 'x'"):
        await composed.batch_judge([state("#### 1", data_source="x")])


def test_config_round_trips_through_json() -> None:
    config = GSM8KJudgerConfig(method="flexible", format_score=0.1, compat="verl")
    again = GSM8KJudgerConfig.model_validate_json(config.model_dump_json())
    assert again == config


@pytest.mark.parametrize("method", ["strict", "flexible"])
async def test_payload_carries_only_the_scoring_window(method: str) -> None:
    # Ray actors and worker processes receive the payload: the last 300 characters are all it needs
    long = "reasoning " * 5000 + "so the answer is\n#### 72"
    judger = GSM8KJudgerConfig(method=method).build()
    payload = judger.preprocess(state(long))
    assert payload["response"] == long[-300:]
    single = await judger.run_payload(payload)
    assert single == compute_score(long, "72", method=method)
    assert single["acc"] is True
