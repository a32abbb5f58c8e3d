"""OpenRLHF's own remote-reward client (copied unchanged in openrlhf_client.py) against a real
``judger serve`` on 127.0.0.1: every reward is a number OpenRLHF can
make a tensor of, a missing label is what OpenRLHF sends (``""``), a 5xx runs OpenRLHF's own
retry, and ``data_sources`` routes samples on a routing server."""

from __future__ import annotations

import importlib.util
import math
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest

from judger.compat.verl import VerlDefaultJudgerConfig
from judger.presets import GSM8KJudgerConfig
from judger.server.app import create_app
from judger.testing import serve_asgi
from judger.testing.servers import free_port

pytestmark = [pytest.mark.py310, pytest.mark.clients_env]


def _openrlhf() -> ModuleType:
    path = Path(__file__).with_name("openrlhf_client.py")
    spec = importlib.util.spec_from_file_location("openrlhf_client", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


openrlhf = _openrlhf()


@pytest.fixture(scope="module")
def gsm8k_server() -> Iterator[str]:
    """``judger serve --preset GSM8KJudgerConfig`` as a real process."""
    port = free_port()
    cmd = [
        sys.executable, "-m", "judger.cli.main", "serve", "--preset", "GSM8KJudgerConfig",
        "--port", str(port), "--log-level", "warning",
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "JUDGER_SERVER_TOKEN"}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None and time.monotonic() < deadline, (
                proc.stderr.read() if proc.stderr else ""
            )
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(30)


async def _step(url: str, samples: list[tuple[str, str, Any]]) -> list[dict[str, Any]]:
    """What OpenRLHF does per sample: one request through its client, then its tensors."""
    executor = openrlhf.SingleTurnAgentExecutor(url + "/get_reward")
    infos = []
    for prompt, response, label in samples:
        output = await executor.reward_step(prompt, label, prompt + response, openrlhf.Tokenizer())
        assert output["reward"] is not None, "OpenRLHF got no reward: the request failed"
        infos.append(openrlhf.experience_info(output))
    return infos


def _floats(value: Any) -> list[float]:
    flat: list[float] = []
    for item in value if isinstance(value, list) else [value]:
        flat.extend(_floats(item) if isinstance(item, list) else [item])
    return flat


async def test_every_reward_is_a_number_openrlhf_can_use(gsm8k_server: str) -> None:
    prompt = "Q: what is 6 * 7?\nA:"
    samples = [
        (prompt, " no label here #### 42", ""),  # OpenRLHF's label for a prompt without one
        (prompt, " 6 * 7 = 42. #### 42", "42"),
        (prompt, " #### 41", "42"),
        (prompt, " I do not know", "42"),
    ]
    infos = await _step(gsm8k_server, samples)
    for info in infos:
        for key, value in info.items():
            assert all(isinstance(v, float) and math.isfinite(v) for v in _floats(value)), (key, value)
    assert [info["reward"] for info in infos] == [[[0.0]], [[1.0]], [[0.0]], [[0.0]]]
    assert [info["judge_failed"] for info in infos] == [[[1.0]], [[0.0]], [[0.0]], [[0.0]]]
    assert [info["acc"] for info in infos] == [[[0.0]], [[1.0]], [[0.0]], [[0.0]]]
    # OpenRLHF merges the info dicts of a step and splits them back per sample: every sample needs
    # the same keys, whichever failed first
    assert len({tuple(sorted(info)) for info in infos}) == 1


async def test_missing_label_failure_is_reported(gsm8k_server: str) -> None:
    reply = httpx.post(
        gsm8k_server + "/get_reward", json={"query": ["x #### 1"], "prompts": ["x"], "labels": [""]}
    )
    body = reply.json()
    assert reply.status_code == 200 and body["rewards"] == [0.0]
    assert "ground truth is None" in body["failures"][0]["message"]


@pytest.mark.slow
async def test_failure_as_5xx_runs_openrlhfs_retry() -> None:
    """``failure_reward=None``: a request whose sample failed answers 500, OpenRLHF's client retries
    it (5 tries, 1 s apart) and then gives up loudly; it never trains on a made-up value."""
    app = create_app(GSM8KJudgerConfig(), failure_reward=None)
    with serve_asgi(app) as srv:
        executor = openrlhf.SingleTurnAgentExecutor(srv.url + "/get_reward")
        with pytest.raises(RuntimeError, match="Request error for 5 times"):
            await executor._fetch_rewards_via_http(["Q #### 1"], ["Q"], [""])
        ok = await executor._fetch_rewards_via_http(["Q #### 1"], ["Q"], ["1"])
        assert ok[0]["rewards"] == [1.0]
        metrics = httpx.get(srv.url + "/metrics").text
    assert 'judger_http_requests_total{endpoint="/get_reward",code="500"} 5' in metrics


def test_data_sources_route_on_a_routing_server() -> None:
    app = create_app(VerlDefaultJudgerConfig())
    with serve_asgi(app) as srv:
        body = {
            "query": ["Q1 #### 42", "Q2 the answer is \\boxed{\\frac{1}{2}}"],
            "prompts": ["Q1", "Q2"],
            "labels": ["42", "\\frac{1}{2}"],
            "data_sources": ["openai/gsm8k", "lighteval/MATH"],
        }
        routed = httpx.post(srv.url + "/get_reward", json=body, timeout=60).json()
        assert routed["rewards"] == [1.0, 1.0] and routed["failures"] == [None, None]
        # without data_sources the router cannot pick a scorer: never a 200 with nulls
        unrouted = httpx.post(
            srv.url + "/get_reward", json={k: v for k, v in body.items() if k != "data_sources"}
        )
        assert unrouted.status_code in (200, 500)
        if unrouted.status_code == 200:
            assert unrouted.json()["rewards"] == [0.0, 0.0]
            assert all(f and "data_source" in f["message"] for f in unrouted.json()["failures"])
        else:
            assert "data_source" in unrouted.json()["detail"]
