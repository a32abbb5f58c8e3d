"""judger under slime (624b824; not on the package registry): its custom reward and ``judger
serve``'s ``/reward`` for its ``remote_rm``, called exactly as slime's source calls them.

slime's ``Sample`` is a dataclass (``slime/utils/types.py`` 93-142); the stand-in below has the
fields a reward reads (``prompt``, ``response``, ``label``, ``metadata``, ``status``, ``reward``)
and nothing of slime's code."""

from __future__ import annotations

import asyncio
import importlib
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import aiohttp
import pytest

from judger.compat import slime
from judger.presets import DapoMathJudgerConfig, GSM8KJudgerConfig
from judger.server.app import create_app
from judger.testing import serve_asgi

pytestmark = [pytest.mark.py310, pytest.mark.clients_env]


@dataclass
class Sample:
    prompt: str | list[dict[str, str]] = ""
    response: str = ""
    label: str | None = None
    reward: float | dict[str, Any] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    status: str = "completed"

    def get_reward_value(self, args: Any) -> Any:
        """As slime reads a sample's reward (``slime/utils/types.py`` 246-247)."""
        return self.reward if not args.reward_key else self.reward[args.reward_key]


def load_function(path: str) -> Any:
    """slime's ``load_function`` (``slime/utils/misc.py`` 39-47): module path, last dot, attribute."""
    module_path, _, attr = path.rpartition(".")
    return getattr(importlib.import_module(module_path), attr)


async def async_rm(args: Any, sample: Sample, **kwargs: Any) -> Any:
    """``slime/rollout/rm_hub/__init__.py`` 61-63: ``await rm_function(args, sample, **kwargs)``."""
    return await load_function(args.custom_rm_path)(args, sample, **kwargs)


async def batched_async_rm(args: Any, samples: list[Sample], **kwargs: Any) -> Any:
    """``slime/rollout/rm_hub/__init__.py`` 104-107 (``--group-rm``): the whole list, one call."""
    return await load_function(args.custom_rm_path)(args, samples, **kwargs)


def args_for(reward_key: str | None = None) -> Any:
    return SimpleNamespace(custom_rm_path="judger.compat.slime.reward", reward_key=reward_key, group_rm=False)


def test_one_sample_gets_a_float_and_a_list_a_list_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUDGER_CONFIG", "dapomath")
    args = args_for()
    right = Sample(prompt="6 x 7?", response="Answer: 42", label="42")
    assert asyncio.run(async_rm(args, right)) == 1.0
    group = [
        Sample(prompt=[{"role": "user", "content": "6 x 7?"}], response=f"Answer: {n}", label="42")
        for n in (41, 42, 43, 42)
    ]
    assert asyncio.run(batched_async_rm(args, group)) == [-1.0, 1.0, -1.0, 1.0]


def test_reward_key_gets_the_reward_dict(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUDGER_CONFIG", "dapomath")
    args = args_for("score")
    sample = Sample(prompt="6 x 7?", response="Answer: 42", label="42")
    sample.reward = asyncio.run(async_rm(args, sample))
    assert sample.get_reward_value(args) == 1.0
    assert sample.reward["judge_failed"] == 0.0 and sample.reward["acc"] is True
    with pytest.raises(ValueError, match="--reward-key 'nope'.*use --reward-key score"):
        asyncio.run(async_rm(args_for("nope"), sample))


def test_a_failed_sample_gets_the_lowest_score_never_an_exception(monkeypatch: pytest.MonkeyPatch) -> None:
    """slime ends the rollout on an exception from the reward: a sample the judger fails on (here:
    no label) gets DAPO's lowest score, -1 (never the 0 that would pay more than a wrong answer),
    and with a reward key its reason."""
    monkeypatch.setenv("JUDGER_CONFIG", "dapomath")
    broken = Sample(prompt="Q", response="Answer: 42", label=None)
    assert asyncio.run(async_rm(args_for(), broken)) == -1.0
    broken.reward = asyncio.run(async_rm(args_for("score"), broken))
    assert broken.get_reward_value(args_for("score")) == -1.0
    assert broken.reward["judge_failed"] == 1.0 and "ground truth is None" in broken.reward["judge_failure"]
    group = [broken, Sample(prompt="Q", response="Answer: 42", label="42")]
    assert asyncio.run(batched_async_rm(args_for(), group)) == [-1.0, 1.0]


def test_make_reward_and_the_metadata(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JUDGER_CONFIG", raising=False)
    with pytest.raises(ValueError, match="unknown preset 'dapo'"):
        slime.make_reward("dapo")  # refused when made, not at the first sample
    reward = slime.make_reward(GSM8KJudgerConfig())
    sample = Sample(prompt="Q", response="#### 7", label="7", metadata={"data_source": "openai/gsm8k"})
    state = slime.sample_state(sample.prompt, sample.response, sample.label, sample.metadata)
    assert (
        state.data_source == "openai/gsm8k"
        and state.extra_fields["extra_info"]["data_source"] == "openai/gsm8k"
    )
    assert asyncio.run(reward(args_for(), sample)) == 1.0


async def remote_rm(url: str, sample: Sample) -> Any:
    """slime's ``remote_rm`` (``slime/rollout/rm_hub/__init__.py`` 34-45): POST ``{prompt, response,
    label}``, ``raise_for_status()`` (slime retries any non-200 ten times, then ends the rollout),
    and the JSON reply is the reward."""
    payload = {"prompt": sample.prompt, "response": sample.response, "label": sample.label}
    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(timeout=timeout) as session, session.post(url, json=payload) as resp:
        resp.raise_for_status()
        return await resp.json()


def test_remote_rm_body_on_judger_serve() -> None:
    with serve_asgi(create_app(DapoMathJudgerConfig())) as srv:
        url = srv.url + "/reward"
        right = asyncio.run(remote_rm(url, Sample(prompt="6 x 7?", response="Answer: 42", label="42")))
        assert right["score"] == 1.0 and right["judge_failed"] == 0.0
        chat = Sample(prompt=[{"role": "user", "content": "6 x 7?"}], response="Answer: 41", label="42")
        assert asyncio.run(remote_rm(url, chat))["score"] == -1.0
        # a sample the judger fails on: 200 (slime would retry anything else, then end the rollout)
        failed = asyncio.run(remote_rm(url, Sample(prompt="Q", response="Answer: 42", label=None)))
        assert failed["score"] == -1.0 and failed["judge_failed"] == 1.0
        assert "ground truth is None" in failed["judge_failure"]["message"]
        # the seeds' body keeps its protocol: a failed sample is 422 there
        import httpx

        seeds = httpx.post(url, json={"response": "Answer: 42", "label": None})
        assert seeds.status_code == 422
        wrong_field = httpx.post(url, json={"prompt": "Q", "response": "x", "labels": "42"})
        assert wrong_field.status_code == 422 and "'labels'" in wrong_field.json()["detail"]
