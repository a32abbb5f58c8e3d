from __future__ import annotations

import sys

import pytest
from pydantic import ValidationError

from judger import RolloutState, Status

pytestmark = pytest.mark.py310


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


# --- from_checked: trusted construction without a second validation -------------------


def _checked_values() -> dict[str, object]:
    return {
        "message": [{"role": "user", "content": "q"}],
        "data_source": "gsm8k",
        "reward_model": {"ground_truth": "7"},
        "group_id": "g",
        "response": "7",
        "status": Status.COMPLETED,
        "extra_fields": {"extra_info": {"index": 1}},
    }


def test_from_checked_equals_a_validated_state() -> None:
    fast = RolloutState.from_checked(_checked_values())
    slow = RolloutState(**_checked_values())
    assert type(fast) is RolloutState
    assert fast == slow
    assert fast.model_dump() == slow.model_dump()
    assert list(fast.__dict__) == list(slow.__dict__)
    assert fast.model_fields_set == slow.model_fields_set
    assert fast.model_dump_json() == slow.model_dump_json()
    fast.reward = {"score": 1.0}
    assert "reward" in fast.model_fields_set
    assert fast.model_copy(update={"response": "8"}).response == "8"


def test_a_fields_builder_builds_what_from_checked_builds_and_checks_its_keys_once() -> None:
    """A reader's builder for one fixed set of fields (the verl row reader's) skips the per-call
    checks of from_checked: the keys are checked when it is made, and refused there by name."""
    from judger.core.rollout import fields_builder

    values = _checked_values()
    build = fields_builder(values)
    fast, checked = build(_checked_values()), RolloutState.from_checked(_checked_values())
    assert type(fast) is RolloutState and fast == checked == RolloutState(**_checked_values())
    assert list(fast.__dict__) == list(checked.__dict__)
    assert fast.model_fields_set == checked.model_fields_set
    assert sys.getsizeof(fast.__pydantic_fields_set__) == sys.getsizeof(checked.__pydantic_fields_set__)
    for keys in ({"response", "message"}, {*values, "uid"}, {*values, "respons"}):
        with pytest.raises(ValueError, match="extra_fields"):
            fields_builder(keys)  # a field made per state missing, uid, a name that is no field


def test_from_checked_gives_each_state_its_own_default_containers() -> None:
    a = RolloutState.from_checked({"response": "x"})
    b = RolloutState.from_checked({"response": "y"})
    a.extra_fields["judge_failure"] = {"kind": "error"}
    a.message.append({"role": "user", "content": "q"})
    assert b.extra_fields == {} and b.message == []
    assert a.model_fields_set == {"response"}


def test_from_checked_keeps_the_rules_it_cannot_skip() -> None:
    with pytest.raises(ValidationError, match="did you mean 'response'"):
        RolloutState.from_checked({"respons": "x"})
    # uid and rollout_id fill each other, as with validation
    assert RolloutState.from_checked({"uid": 3}).rollout_id == 3

    class Strict(RolloutState):
        response: int | None = None  # type: ignore[assignment]

    with pytest.raises(ValidationError):
        Strict.from_checked({"response": "not a number"})


def test_from_checked_state_is_smaller_than_a_validated_one() -> None:
    import sys

    fast = RolloutState.from_checked(_checked_values())
    slow = RolloutState(**_checked_values())
    # the set of given fields is sized once (472 bytes for seven names) instead of grown (728)
    assert sys.getsizeof(fast.__pydantic_fields_set__) < sys.getsizeof(slow.__pydantic_fields_set__)
