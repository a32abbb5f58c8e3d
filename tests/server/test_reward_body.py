"""``/reward``'s body is declared once, by :class:`RewardRequest`: the model the OpenAPI docs show is
the parser. A field declared there is documented and taken, an undeclared one is refused by name
with the declared ones listed; each refusal names its field and why, as it always has."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from pydantic import Field, PlainValidator

from judger.core.rollout import RolloutState, Status
from judger.server.body import BodyError
from judger.server.models import RewardRequest
from judger.server.requests import reward_request

pytestmark = pytest.mark.py310

ALLOWED = "allowed: response, label, extra_info, data_source"
MISSING = "response: Field required (the model's response text, or null)"
WEIGHTS = "data_source: expected a string, an object of weights, or null"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ([], "body: expected a JSON object, got list"),
        ("x", "body: expected a JSON object, got str"),
        (None, "body: expected a JSON object, got NoneType"),
        ({}, MISSING),
        ({"extra_info": 3}, MISSING),  # the missing response first, as declared
        ({"lable": 1, "response": "a"}, f"body: unknown field(s) 'lable'; {ALLOWED}"),
        ({"zz": 1, "aa": 2}, f"body: unknown field(s) 'aa', 'zz'; {ALLOWED}"),  # before the missing one
        ({"response": 3}, "response: expected a string or null, got int"),
        ({"response": 1, "data_source": 3}, "response: expected a string or null, got int"),
        ({"response": "a", "extra_info": [1]}, "extra_info: expected a JSON object, got list"),
        ({"response": "a", "extra_info": "s"}, "extra_info: expected a JSON object, got str"),
        ({"response": "a", "data_source": 3}, WEIGHTS),
        ({"response": "a", "data_source": {"a": "b"}}, WEIGHTS),
    ],
)
def test_each_refusal_names_the_field_and_why(body: Any, message: str) -> None:
    with pytest.raises(BodyError) as caught:
        reward_request(body)
    assert str(caught.value) == message and caught.value.status == 422


def test_the_values_reach_the_state_as_posted() -> None:
    weights = {"a": 1, "b": True}
    extra = {"question": "q", "k": [1]}
    state, slime = reward_request({"response": "r", "label": 5, "extra_info": extra, "data_source": weights})
    assert not slime and state.status == Status.COMPLETED
    assert state.data_source == weights and state.extra_fields == {"extra_info": extra}
    assert [type(v) for v in state.data_source.values()] == [int, bool]  # not coerced to floats
    assert state.message == [{"role": "user", "content": "q"}] and state.reward_model == {"ground_truth": 5}
    for falsy in (None, "", 0, []):  # no extra_info
        state, _ = reward_request({"response": None, "extra_info": falsy})
        assert state.extra_fields == {} and state.message == [] and state.response is None


def test_the_documented_fields_are_the_parsed_ones() -> None:
    schema = RewardRequest.model_json_schema()
    documented = list(schema["properties"])
    with pytest.raises(BodyError, match=f"allowed: {', '.join(documented)}$"):
        RewardRequest.parse({"response": "a", "nope": 1})
    assert schema["required"] == ["response"]
    RewardRequest.parse(dict.fromkeys(documented))  # every documented field is taken (null allowed)


class _WithWeight(RewardRequest):
    """A new /reward field: its declaration (type, check, description) and where it goes."""

    weight: Annotated[float, PlainValidator(float, json_schema_input_type=float)] = Field(
        1.0, description="how much this sample counts"
    )

    def state(self) -> RolloutState:
        state = super().state()
        state.extra_fields["weight"] = self.weight
        return state


def test_a_new_field_is_one_declaration_documented_and_parsed() -> None:
    assert (
        _WithWeight.model_json_schema()["properties"]["weight"]["description"]
        == "how much this sample counts"
    )
    assert _WithWeight.parse({"response": "a", "weight": "2"}).extra_fields["weight"] == 2.0
    with pytest.raises(BodyError, match=f"unknown field\\(s\\) 'wieght'; {ALLOWED}, weight$"):
        _WithWeight.parse({"response": "a", "wieght": 2})
    with pytest.raises(BodyError, match="^weight: "):
        _WithWeight.parse({"response": "a", "weight": "heavy"})
