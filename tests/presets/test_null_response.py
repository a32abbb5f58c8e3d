"""A sample with nothing to judge (a null or missing response) FAILS with one reason on every path
-- ``judge``, ``batch_judge``, the server's fields path, ``judger score`` -- and is never scored."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

import judger.presets as presets
from judger import RolloutState, Status
from judger.cli.main import main
from judger.presets.inline import InlineScorerJudger
from judger.server.app import create_app
from judger.testing import serve_asgi

pytestmark = [pytest.mark.py310, pytest.mark.clients_env]

REASON = "NoResponseError: nothing to judge: the response is null"
CONFIGS = [(name, {}) for name in presets.preset_names()] + [
    (name, {"compat": "verl"})
    for name in ("MathJudgerConfig", "GSM8KJudgerConfig", "QAExactMatchJudgerConfig")
]


def _state(response: str | None, label: str = "42") -> RolloutState:
    return RolloutState(
        message=[{"role": "user", "content": "What is 6 * 7?"}],
        response=response,
        reward_model={"ground_truth": label},
    )


def _ids(case: tuple[str, dict[str, Any]]) -> str:
    name, options = case
    return name + "".join(f"-{k}={v}" for k, v in options.items())


@pytest.mark.parametrize("case", CONFIGS, ids=_ids)
def test_judge_fails_a_null_response_with_its_reason(case: tuple[str, dict[str, Any]]) -> None:
    name, options = case
    judger = getattr(presets, name)(**options).build()
    try:
        judged = asyncio.run(judger.judge(_state(None)))
    finally:
        judger.close()
    assert (judged.status, judged.reward, judged.error_msg) == (Status.FAILED, None, REASON)
    assert judged.extra_fields["judge_failure"] == {"judger": judger.judger_name, "kind": "error"}


@pytest.mark.parametrize("case", CONFIGS, ids=_ids)
def test_batch_judge_fails_only_the_null_responses(case: tuple[str, dict[str, Any]]) -> None:
    name, options = case
    judger = getattr(presets, name)(**options).build()
    states = [_state(None), _state("The answer is \\boxed{42}. #### 42 Answer: 42"), _state(None)]
    try:
        asyncio.run(judger.batch_judge(states))
    finally:
        judger.close()
    assert [s.error_msg for s in states[::2]] == [REASON, REASON]
    assert all(s.status is Status.FAILED and s.reward is None for s in states[::2])
    assert states[1].error_msg != REASON  # judged (or failed) on its own merits


def test_on_error_raise_raises_the_reason() -> None:
    judger = presets.GSM8KJudgerConfig(on_error="raise").build()
    with pytest.raises(ValueError, match="nothing to judge: the response is null"):
        asyncio.run(judger.batch_judge([_state("#### 42"), _state(None)]))


@pytest.mark.parametrize("name", ["GSM8KJudgerConfig", "QAExactMatchJudgerConfig"])
def test_the_servers_fields_path_agrees_with_the_state_path(name: str) -> None:
    judger = getattr(presets, name)().build()
    assert isinstance(judger, InlineScorerJudger) and judger.judges_fields()
    posted: list[dict[str, Any]] = [
        {"response": None, "reward_model": {"ground_truth": "42"}},
        {"response": "#### 42", "reward_model": {"ground_truth": "42"}},
        {"reward_model": {"ground_truth": "42"}},  # missing: null by default
    ]
    with serve_asgi(create_app(judger)) as server:
        light = httpx.post(server.url + "/judge", json=posted).json()  # the fields path
        full = httpx.post(server.url + "/judge", params={"full": "true"}, json=posted).json()
    for answers in (light, full):
        assert [(a["status"], a["error_msg"]) for a in answers[::2]] == [("failed", REASON)] * 2
        assert answers[1]["status"] == "completed"
        assert all(a["reward"] is None for a in answers[::2])


def test_judger_score_gives_the_librarys_reason(
    write_jsonl: Any, row: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [row("#### 42", "42", uid="a"), row(None, "42", uid="b")]
    out_path = tmp_path / "scored.jsonl"
    args = ["--no-progress", "--format", "json", "--preset", "gsm8k", "-o", str(out_path)]
    code = main(["score", *args, str(write_jsonl(rows))])
    summary = json.loads(capsys.readouterr().out)
    assert code == 3 and summary["failed"] == 1 and summary["judged"] == 1
    written = [json.loads(line) for line in out_path.read_text().splitlines()]
    assert [(r["status"], r["error_msg"]) for r in written] == [("completed", None), ("failed", REASON)]
    library = asyncio.run(presets.GSM8KJudgerConfig().build().judge(_state(None)))
    assert written[1]["error_msg"] == library.error_msg


def test_verls_routing_fails_null_responses_in_each_branch() -> None:
    from judger.compat.verl import default_judger_config

    judger = default_judger_config().build()
    states = [_state(None), _state("#### 42"), _state(None)]
    for state, source in zip(states, ["openai/gsm8k", "openai/gsm8k", "DigitalLearningGmbH/MATH-lighteval"]):
        state.data_source = source
    try:
        asyncio.run(judger.batch_judge(states))
    finally:
        judger.close()
    assert [(s.status, s.error_msg) for s in states[::2]] == [(Status.FAILED, REASON)] * 2
    assert states[1].reward is not None and states[1].reward["score"] == 1.0
