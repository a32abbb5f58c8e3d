"""``default_compute_score``'s own options, as judger's verl managers receive them (bound by verl's
SandboxFusion partial or given in ``reward_kwargs``): each is applied to the router or refused."""

from __future__ import annotations

import functools

import pytest

from judger.compat.verl import default_compute_score
from judger.compat.verl.default_options import DefaultOptions
from judger.compat.verl.managers import NaiveRewardManager
from judger.presets import CodeJudgerConfig

pytestmark = [pytest.mark.py310, pytest.mark.clients_env]


def test_options_reach_the_routes() -> None:
    options = DefaultOptions.parse(
        {"sandbox_fusion_url": "http://127.0.0.1:1/run_code", "memory_limit_mb": 512, "timeout": 7},
        "test",
    )
    router = options.judger_config().build()
    code = router.branch("code")
    assert code.sandbox_fusion_url == "http://127.0.0.1:1"  # verl's endpoint form, as a base URL
    assert code.limits.memory_mb == 512
    assert {router.branch(name).timeout for name in ("gsm8k", "math", "code")} == {7.0}


def test_refused_and_unknown_options_are_named() -> None:
    with pytest.raises(TypeError, match="full_output"):
        DefaultOptions.parse({"full_output": True}, "test")
    with pytest.raises(TypeError, match="sandbox_url"):
        DefaultOptions.parse({"sandbox_url": "http://x"}, "test")
    with pytest.raises(ValueError, match="on_failure"):
        DefaultOptions.parse({"on_failure": "ignore"}, "test")


def test_verls_sandbox_partial_reaches_the_manager_router() -> None:
    """What verl builds from ``reward.sandbox_fusion``: the default scorer with three keywords bound."""
    fn = functools.partial(
        default_compute_score,
        sandbox_fusion_url="http://127.0.0.1:1/run_code",
        concurrent_semaphore=object(),
        memory_limit_mb=256,
    )
    manager = NaiveRewardManager(None, 0, compute_score=fn)
    code = manager.judger.branch("code")  # type: ignore[attr-defined]
    assert code.sandbox_fusion_url == "http://127.0.0.1:1" and code.limits.memory_mb == 256


def test_code_config_takes_either_url_form() -> None:
    for url in ("http://h:8080/run_code", "http://h:8080/run_code/", "http://h:8080/", "http://h:8080"):
        config = CodeJudgerConfig(backend="sandbox_fusion", sandbox_fusion_url=url)
        assert config.sandbox_fusion_url == "http://h:8080"


def test_batch_function_honours_or_refuses_every_keyword() -> None:
    from judger.compat.verl import default_compute_score_batch
    from judger.testing import serve_asgi
    from judger.testing.fake_sandbox_fusion import FakeSandboxFusion

    fake = FakeSandboxFusion()
    tests = {"inputs": ["1 2"], "outputs": ["3"]}
    code = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
    with serve_asgi(fake.app) as server:
        out = default_compute_score_batch(
            ["codecontests"],
            [code],
            [tests],
            sandbox_fusion_url=server.url + "/run_code",
            memory_limit_mb=300,
        )
    assert out[0]["score"] == 1.0 and [r["memory_limit_MB"] for r in fake.requests] == [300]
    with pytest.raises(TypeError, match="sandbox_url"):
        default_compute_score_batch(["openai/gsm8k"], ["#### 1"], ["1"], sandbox_url="http://x")
    with pytest.raises(ValueError, match="no_such_source"):
        default_compute_score_batch(["no_such_source"], ["#### 1"], ["1"], on_failure="raise")
    assert default_compute_score_batch(["openai/gsm8k"], ["#### 1"], ["1"], as_float=True) == [1.0]
