"""``/judge`` for an inline preset scores the validated fields without building RolloutStates: the
answers and the metrics must be those of the state path (``?full=true``), sample for sample."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from judger import GSM8KJudgerConfig
from judger.presets.inline import InlineScorerJudger
from judger.server.app import create_app
from judger.testing import serve_asgi

pytestmark = pytest.mark.py310

LIGHT = ("reward", "status", "error_msg")


def picky(response: str | None, label: Any, extra_info: dict[str, Any] | None) -> dict[str, Any]:
    if response == "EXPLODE":
        raise ValueError("cannot score EXPLODE")
    if response == "NAN":
        return {"score": float("nan")}
    return {"score": float(response == label), "tag": (extra_info or {}).get("tag")}


def posted() -> list[dict[str, Any]]:
    return [
        {"response": "The answer is #### 42", "reward_model": {"ground_truth": "42"}},
        {"response": "#### 41", "reward_model": {"ground_truth": "42"}, "status": "completed"},
        {"response": None, "reward_model": {"ground_truth": "42"}},
        {"response": "#### 7"},  # no label
        {"response": "EXPLODE", "reward_model": {"ground_truth": "1"}},
        {"response": "NAN", "reward_model": {"ground_truth": "1"}},
        {"response": "1", "reward_model": {"ground_truth": "1"}, "extra_fields": {"extra_info": {"tag": 1}}},
        {"response": "#### 3", "reward_model": {"ground_truth": "3"}, "rollout_id": 9, "uid": 9},
    ]


def answers(url: str, body: Any) -> tuple[Any, Any]:
    light = httpx.post(url + "/judge", json=body)
    full = httpx.post(url + "/judge", params={"full": "true"}, json=body)
    assert light.status_code == full.status_code == 200
    return light.json(), full.json()


def metric_lines(url: str) -> list[str]:
    text = httpx.get(url + "/metrics").text
    return sorted(line for line in text.splitlines() if line.startswith("judger_samples_total"))


def test_an_inline_preset_scores_posted_fields_as_the_state_path_does(monkeypatch: Any) -> None:
    chunks: list[int] = []  # batch_judge's pass over RolloutStates, counted
    judge_chunk = InlineScorerJudger._judge_chunk
    monkeypatch.setattr(
        InlineScorerJudger,
        "_judge_chunk",
        lambda self, chunk: chunks.append(len(chunk)) or judge_chunk(self, chunk),
    )
    gsm8k = GSM8KJudgerConfig().build()
    generic = InlineScorerJudger("picky", picky)  # no batch scorer: the per-sample path
    for judger in (gsm8k, generic):
        assert isinstance(judger, InlineScorerJudger) and judger.judges_fields()
        with serve_asgi(create_app(judger)) as light_server, serve_asgi(create_app(judger)) as full_server:
            chunks.clear()
            light = httpx.post(light_server.url + "/judge", json=posted()).json()
            assert chunks == []  # scored from the validated fields: no state was built
            full = httpx.post(full_server.url + "/judge", params={"full": "true"}, json=posted()).json()
            assert chunks == [len(posted())]
            assert light == [{k: s[k] for k in LIGHT} for s in full]
            counted = metric_lines(light_server.url)
            assert any('outcome="error"' in line for line in counted) or judger is gsm8k
            assert counted and counted == metric_lines(full_server.url)
    # the last round served the per-sample scorer: its failures are the samples' own, by index
    assert [i for i, s in enumerate(light) if s["status"] == "failed"] == [2, 4, 5]
    assert light[2]["error_msg"] == "NoResponseError: nothing to judge: the response is null"
    assert light[4]["error_msg"] == "ValueError: cannot score EXPLODE"
    assert light[5]["error_msg"].startswith("JudgerOutputError: judger 'picky' returned score=nan")
    assert light[6]["reward"] == {"score": 1.0, "tag": 1}  # extra_info read from extra_fields


def test_a_preset_whose_batch_path_is_changed_goes_through_states() -> None:
    class Tagged(InlineScorerJudger):
        def postprocess(self, rollout_state: Any, output: dict[str, Any]) -> Any:
            rollout_state.reward = {**output, "tagged": True}
            return rollout_state

    judger = Tagged("tagged", picky)
    assert not judger.judges_fields()
    with serve_asgi(create_app(judger)) as server:
        light, full = answers(server.url, posted()[4:7])
    assert [s["reward"] and s["reward"]["tagged"] for s in light] == [None, None, True]
    assert light == [{k: s[k] for k in LIGHT} for s in full]
