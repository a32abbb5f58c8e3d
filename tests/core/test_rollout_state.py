from __future__ import annotations

import pytest
from pydantic import ValidationError

from judger import RolloutState, Status


def test_status_has_the_seven_xtuner_values() -> None:
    assert {s.value for s in Status} == {
        "init",
        "completed",
        "aborted",
        "expired",
        "failed",
        "filtered",
        "archived",
    }
    assert Status("completed") is Status.COMPLETED


@pytest.mark.parametrize(
    ("reason", "status"),
    [
        ("stop", Status.COMPLETED),
        ("length", Status.COMPLETED),
        ("tool_calls", Status.COMPLETED),
        ("abort", Status.ABORTED),
        ("error", Status.FAILED),
        (None, Status.FAILED),
    ],
)
def test_finish_reason_maps_to_status(reason: str | None, status: Status) -> None:
    assert Status.from_finish_reason(reason) is status


def test_defaults_and_fields() -> None:
    state = RolloutState(
        message=[{"role": "user", "content": "1+1?"}],
        response="2",
        reward_model={"ground_truth": "2"},
        data_source={"openai/gsm8k": 1.0},
    )
    assert state.status is Status.INIT
    assert state.reward is None and state.error_msg is None
    assert state.extra_fields == {} and state.seq_staleness == 0
    assert state.ground_truth == "2"
    assert RolloutState().ground_truth is None


def test_mutable_defaults_are_not_shared() -> None:
    a, b = RolloutState(), RolloutState()
    a.extra_fields["x"] = 1
    a.message.append({"role": "user", "content": "hi"})
    assert b.extra_fields == {} and b.message == []


def test_unknown_field_is_rejected_with_a_hint() -> None:
    with pytest.raises(ValidationError) as info:
        RolloutState(respons="42")
    text = str(info.value)
    assert "'respons'" in text and "did you mean 'response'" in text and "extra_fields" in text


def test_wrong_type_names_the_field() -> None:
    with pytest.raises(ValidationError) as info:
        RolloutState(response_ids=["a", "b"])
    assert "response_ids" in str(info.value)


def test_json_round_trip_keeps_status() -> None:
    state = RolloutState(response="x", status=Status.COMPLETED, reward={"score": 1.0})
    again = RolloutState.model_validate_json(state.model_dump_json())
    assert again == state and again.status is Status.COMPLETED


def test_token_sequences_accept_lists_tuples_and_arrays() -> None:
    np = pytest.importorskip("numpy")
    ids = list(range(32768))
    state = RolloutState(response_ids=ids, logprobs=np.full(3, -0.5), response_mask=(1, 1, 0))
    assert state.response_ids is ids  # kept as given: no per-token copy or validation pass
    assert state.logprobs == [-0.5, -0.5, -0.5] and state.response_mask == [1, 1, 0]
    assert RolloutState(prompt_ids=np.arange(3, dtype=np.int64)).prompt_ids == [0, 1, 2]


@pytest.mark.parametrize(
    ("field", "value", "text"),
    [
        ("response_ids", "1 2 3", "must be a list of ints, got str"),
        ("response_ids", [1, 2, "3"], "found '3'"),
        ("prompt_ids", [[1, 2]], "found [1, 2]"),
        ("response_mask", [True, False], "found True"),
        ("logprobs", [None], "must be a list of numbers, found None"),
    ],
)
def test_token_sequences_reject_the_usual_mix_ups(field: str, value: object, text: str) -> None:
    with pytest.raises(ValidationError) as info:
        RolloutState(**{field: value})
    assert field in str(info.value) and text in str(info.value)
