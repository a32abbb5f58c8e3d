"""judger inside verl 0.9.1's own code: its hydra config, its reward loop worker and managers.

Each test composes verl's trainer config with the keys the verl guide shows, lets verl load what
they point at, and compares token-level rewards with verl's own scorer in ``compat="verl"`` mode.
"""

from __future__ import annotations

import asyncio
import json
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import judger.compat.verl as judger_verl

SAMPLES = [
    ("openai/gsm8k", "so 3 + 4 = 7.\n#### 7", "7"),
    ("openai/gsm8k", "I think #### 8", "7"),
    ("openai/gsm8k", "no answer here", "7"),
    ("lighteval/MATH", "The answer is $\\boxed{\\frac{1}{2}}$.", "\\frac12"),
    ("lighteval/MATH", "The answer is $\\boxed{0.5}$.", "\\frac{1}{2}"),
    ("lighteval/MATH", "so \\boxed{50}", "50\\%"),
    ("math_dapo", "work...\nAnswer: 42", "42"),
    ("math_dapo", "work...\nAnswer: 41", "42"),
    ("aime2024", "Answer: 5.0", "5"),
    ("lighteval/MATH", "so \\boxed{0.50}", "\\frac{1}{2}"),
    ("openai/gsm8k", "#### 7", None),
]
RESPONSE_WIDTH = 64
VERL_CONFIG_DIR = str(Path(__import__("verl").__file__).parent / "trainer" / "config")
# each test composes verl's hydra config and builds a reward-loop worker: seconds, not milliseconds
pytestmark = pytest.mark.slow


def make_data(
    tokenizer: Any, samples: list[tuple[str, str, Any]] = SAMPLES, width: int = RESPONSE_WIDTH
) -> Any:
    """verl's ``DataProto`` of ``(data_source, response, ground_truth)`` rows, responses cut or
    padded to ``width`` tokens (bench/bench_verl_step.py builds its step with it too)."""
    from verl import DataProto

    prompt = tokenizer.encode("Q: solve it\n")
    prompts, responses, masks = [], [], []
    for _, text, _ in samples:
        ids = tokenizer.encode(text)[:width]
        pad = width - len(ids)
        prompts.append(prompt)
        responses.append(ids + [tokenizer.pad_token_id] * pad)
        masks.append([1] * len(prompt) + [1] * len(ids) + [0] * pad)
    prompts_t = torch.tensor(prompts)
    responses_t = torch.tensor(responses)
    return DataProto.from_dict(
        tensors={
            "prompts": prompts_t,
            "responses": responses_t,
            "input_ids": torch.cat([prompts_t, responses_t], dim=1),
            "attention_mask": torch.tensor(masks),
        },
        non_tensors={
            "data_source": np.array([s[0] for s in samples], dtype=object),
            "reward_model": np.array([{"ground_truth": s[2]} for s in samples], dtype=object),
            "extra_info": np.array([{"index": i} for i in range(len(samples))], dtype=object),
        },
    )


def compose(overrides: list[str], model_dir: Path) -> Any:
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    with initialize_config_dir(config_dir=VERL_CONFIG_DIR, version_base=None):
        return hydra_compose(
            config_name="ppo_trainer",
            overrides=[f"actor_rollout_ref.model.path={model_dir}", *overrides],
        )


def reward_loop_scores(
    config: Any,
    samples: list[tuple[str, str, Any]] = SAMPLES,
    fields: dict[str, list[Any]] | None = None,
    reward_router_address: str | None = None,
) -> tuple[torch.Tensor, list[dict[str, Any]]]:
    """What verl's trainer does per step: its RewardLoopWorker scores a chunk, the manager class assembles.

    ``fields`` are more ``non_tensor_batch`` columns (what verl's agent loop adds to a rollout);
    ``reward_router_address`` is what verl hands the worker when a reward model serves."""
    from verl.experimental.reward_loop import RewardLoopWorker
    from verl.trainer.ppo.reward import resolve_reward_manager_cls

    # a fresh actor process: its own event loop (verl's prime manager closes the loop it leaves set)
    asyncio.set_event_loop(asyncio.new_event_loop())
    worker = RewardLoopWorker(config, reward_router_address)
    data = make_data(worker.input_tokenizer, samples)
    for key, values in (fields or {}).items():
        data.non_tensor_batch[key] = np.array([*values, None], dtype=object)[:-1]  # one object per row
    # a Ray actor runs every call on the loop its managers captured at construction
    outputs = worker.loop.run_until_complete(worker.compute_score_batch(data))
    scores = [out["reward_score"] for out in outputs]
    return resolve_reward_manager_cls(config).assemble_rm_scores(data, scores), outputs


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory, byte_tokenizer_factory: Any) -> Path:
    path = tmp_path_factory.mktemp("tiny_model")
    byte_tokenizer_factory(path)
    return path


@pytest.fixture(scope="module")
def verl_reference(model_dir: Path) -> torch.Tensor:
    """verl's own naive manager with verl's own default_compute_score."""
    return reward_loop_scores(compose([], model_dir))[0]


MANAGER = [
    "reward.reward_manager.source=importlib",
    "reward.reward_manager.module.path=pkg://judger.compat.verl.managers",
]


@pytest.mark.parametrize("name", ["NaiveRewardManager", "BatchRewardManager", "DAPORewardManager"])
def test_reward_loop_with_judger_managers_equals_verl(
    model_dir: Path, verl_reference: torch.Tensor, name: str
) -> None:
    config = compose(
        [*MANAGER, f"reward.reward_manager.name={name}", "+reward.reward_kwargs.compat=verl"], model_dir
    )
    scores, outputs = reward_loop_scores(config)
    assert torch.equal(scores, verl_reference)
    keys = {tuple(out["reward_extra_info"]) for out in outputs}
    assert keys == {("score", "acc", "pred", "judge_failure")}  # one key set: verl takes the first sample's
    assert outputs[-1]["reward_score"] == 0.0  # the None label, scored as verl does


def test_reward_loop_default_mode_fixes_verl_false_negatives(
    model_dir: Path, verl_reference: torch.Tensor
) -> None:
    scores, _ = reward_loop_scores(
        compose([*MANAGER, "reward.reward_manager.name=NaiveRewardManager"], model_dir)
    )
    rows = scores.sum(dim=1)
    ref = verl_reference.sum(dim=1)
    assert rows[9] == 1.0 and ref[9] == 0.0  # \boxed{0.50} vs \frac{1}{2}
    assert rows[8] == 1.0 and ref[8] == -1.0  # Answer: 5.0 vs 5


def test_reward_extra_keys_are_selectable(model_dir: Path) -> None:
    config = compose(
        [
            *MANAGER,
            "reward.reward_manager.name=NaiveRewardManager",
            "+reward.reward_kwargs.reward_extra_keys=[]",
        ],
        model_dir,
    )
    _, outputs = reward_loop_scores(config)
    assert all(out["reward_extra_info"] == {} for out in outputs)


@pytest.mark.parametrize("path", ["pkg://judger.compat.verl", "FILE"])
def test_custom_reward_function_keys_equal_verl(
    model_dir: Path, verl_reference: torch.Tensor, path: str
) -> None:
    if path == "FILE":
        path = judger_verl.__file__
    config = compose(
        [
            f"reward.custom_reward_function.path={path}",
            "reward.custom_reward_function.name=default_compute_score",
            "+reward.custom_reward_function.reward_kwargs.compat=verl",
        ],
        model_dir,
    )
    scores, _ = reward_loop_scores(config)
    assert torch.equal(scores, verl_reference)
    from verl.trainer.ppo.reward import get_custom_reward_fn

    fn = get_custom_reward_fn(config)
    assert (
        pickle.loads(pickle.dumps(fn))(data_source="openai/gsm8k", solution_str="#### 7", ground_truth="7")[
            "score"
        ]
        == 1.0
    )


def test_legacy_dataproto_managers_equal_verl(tokenizer: Any) -> None:
    from verl.workers import reward_manager as verl_rm

    from judger.compat.verl import managers

    # rows repeated word for word (decoded once) among the others
    data = make_data(tokenizer, SAMPLES + SAMPLES[::2])
    theirs = verl_rm.NaiveRewardManager(tokenizer, 0)(data, return_dict=True)
    naive = managers.NaiveRewardManager(tokenizer, 0, compat="verl")
    ours = naive(data, return_dict=True)
    # the whole batch decoded at once gives the rows verl's item-by-item slicing gives
    rows, lengths = naive._rows(data)
    width = data.batch["responses"].shape[-1]
    one_by_one = []
    for i in range(len(data)):
        item = data[i]
        n = int(item.batch["attention_mask"][-width:].sum())
        text = tokenizer.decode(item.batch["responses"][:n], skip_special_tokens=True)
        fields = item.non_tensor_batch
        one_by_one.append((fields["data_source"], text, fields["reward_model"]["ground_truth"], n))
    assert [(r[0], r[1], r[2], n) for r, n in zip(rows, lengths)] == one_by_one
    assert torch.equal(ours["reward_tensor"], theirs["reward_tensor"])
    batch_theirs = verl_rm.BatchRewardManager(
        tokenizer, 0, judger_verl.default_compute_score_batch, compat="verl"
    )
    assert torch.equal(batch_theirs(data), theirs["reward_tensor"])

    class Overlong:
        enable, len, penalty_factor, log = True, 8, 1.0, True

    dapo_theirs = verl_rm.DAPORewardManager(tokenizer, 0, max_resp_len=16, overlong_buffer_cfg=Overlong())
    dapo_ours = managers.DAPORewardManager(
        tokenizer, 0, max_resp_len=16, overlong_buffer_cfg=Overlong(), compat="verl"
    )
    assert torch.allclose(dapo_ours(data), dapo_theirs(data))


def test_reward_loop_chunk_is_decoded_in_one_call(tokenizer: Any) -> None:
    """verl's reward loop hands the manager one sample per run_single call: the chunk's responses
    are decoded together (one Rust call), and score as the DataProto call scores them."""
    from judger.compat.verl import managers

    class Counting:
        def __init__(self, inner: Any) -> None:
            self.inner, self.calls = inner, 0

        def decode_batch(self, rows: Any, skip_special_tokens: bool = True) -> Any:
            self.calls += 1
            return self.inner.decode_batch(rows, skip_special_tokens=skip_special_tokens)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

    data = make_data(tokenizer)
    expected = managers.NaiveRewardManager(tokenizer, 0, compat="verl")(data).sum(dim=1).tolist()
    counting = Counting(tokenizer._tokenizer)
    tokenizer._tokenizer = counting
    manager = managers.NaiveRewardManager(tokenizer, 0, compat="verl")

    async def chunk() -> list[dict[str, Any]]:
        return await asyncio.gather(*(manager.run_single(data[i : i + 1]) for i in range(len(data))))

    outputs = asyncio.run(chunk())
    assert counting.calls == 1
    assert [out["reward_score"] for out in outputs] == expected


def test_prime_process_pool_manager_gets_real_scores(tokenizer: Any) -> None:
    """verl's prime manager ships compute_score to worker processes and reads float(result[0]):
    a function loaded by file path must pickle, and a dict result must answer [0]."""
    from verl.utils.import_utils import load_extern_object
    from verl.workers.reward_manager import PrimeRewardManager

    samples = SAMPLES[:9]
    data = make_data(tokenizer, samples)
    expected = [judger_verl.default_compute_score(ds, r, gt, as_float=True) for ds, r, gt in samples]
    assert sum(expected) > 0
    for path in (judger_verl.__file__.replace("__init__.py", "compute_score.py"), "pkg://judger.compat.verl"):
        fn = load_extern_object(path, "default_compute_score")
        assert pickle.loads(pickle.dumps(fn)) is judger_verl.default_compute_score
        ours = PrimeRewardManager(tokenizer, 0, compute_score=fn)(data)
        assert ours.sum(dim=1).tolist() == expected


def test_validation_metrics_equal_verl_with_expected_counts() -> None:
    from verl.trainer.ppo.metric_utils import process_validation_metrics as verl_metrics

    from judger.trainer.metrics import process_validation_metrics

    rng = np.random.default_rng(0)
    n = 48
    data_sources = [f"ds{i % 2}" for i in range(n)]
    uids = [f"u{i % 8}" for i in range(n)]
    infos = {
        "score": rng.integers(0, 2, n).astype(float).tolist(),
        "acc": rng.integers(0, 2, n).astype(bool).tolist(),
        "pred": [str(v) for v in rng.integers(0, 3, n)],
    }
    expected = {(f"ds{u % 2}", f"u{u}"): 8 for u in range(8)}
    theirs = verl_metrics(data_sources, uids, infos, expected_acc_counts=expected)
    ours = process_validation_metrics(data_sources, uids, infos, expected_acc_counts=expected, pass_k=False)
    assert json_ready(ours) == json_ready(theirs)


def json_ready(metrics: Any) -> dict[str, dict[str, dict[str, float]]]:
    return {ds: {var: dict(m) for var, m in v.items()} for ds, v in metrics.items()}


def guide_keys(after_marker: Callable[[str], str], block: str) -> list[str]:
    """The override lines of the verl guide's ``<!-- verl-keys: block -->`` fenced block."""
    body = after_marker(f"<!-- verl-keys: {block} -->").split("```", 2)[1]
    return [line.strip() for line in body.splitlines()[1:] if line.strip()]


@pytest.mark.parametrize("block", ["custom_reward_function", "reward_manager"])
def test_guide_keys_run_in_verl_and_equal_verl(
    model_dir: Path, verl_reference: torch.Tensor, block: str, after_marker: Callable[[str], str]
) -> None:
    keys = guide_keys(after_marker, block)
    assert keys and all(k.lstrip("+").startswith("reward.") for k in keys)
    scores, _ = reward_loop_scores(compose(keys, model_dir))
    assert torch.equal(scores, verl_reference)


def test_top_level_custom_reward_function_is_ignored_by_verl(
    model_dir: Path, verl_reference: torch.Tensor
) -> None:
    """Why the verl guide says ``reward.``: verl 0.9.1's trainer does not read the top-level keys."""
    config = compose(
        [
            "custom_reward_function.path=pkg://judger.compat.verl",
            "custom_reward_function.name=default_compute_score",
        ],
        model_dir,
    )
    assert config.reward.custom_reward_function.path is None


DAPO_OVERLONG = [
    "+reward.reward_kwargs.max_resp_len=16",
    "+reward.reward_kwargs.overlong_buffer_cfg.enable=true",
    "+reward.reward_kwargs.overlong_buffer_cfg.len=8",
    "+reward.reward_kwargs.overlong_buffer_cfg.penalty_factor=1.0",
    "+reward.reward_kwargs.overlong_buffer_cfg.log=true",
]


def test_dapo_overlong_penalty_equals_verl_dapo(model_dir: Path) -> None:
    theirs, their_out = reward_loop_scores(
        compose(["reward.reward_manager.name=dapo", *DAPO_OVERLONG], model_dir)
    )
    ours, our_out = reward_loop_scores(
        compose(
            [
                *MANAGER,
                "reward.reward_manager.name=DAPORewardManager",
                "+reward.reward_kwargs.compat=verl",
                *DAPO_OVERLONG,
            ],
            model_dir,
        )
    )
    assert torch.allclose(ours, theirs)
    assert [o["reward_extra_info"]["overlong"] for o in our_out] == [
        bool(o["reward_extra_info"]["overlong"]) for o in their_out
    ]


@pytest.mark.slow
def test_ray_reward_loop_manager_equals_verl(
    model_dir: Path, verl_reference: torch.Tensor, after_marker: Callable[[str], str]
) -> None:
    """verl's RewardLoopManager: reward-loop workers as Ray actors, judger's manager inside them."""
    import ray
    from verl.experimental.reward_loop import RewardLoopManager

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        config = compose(
            [*guide_keys(after_marker, "reward_manager"), "reward.num_workers=2"],
            model_dir,
        )
        manager = RewardLoopManager(config)
        tokenizer = byte_tokenizer_for(model_dir)
        out = manager.compute_rm_score(make_data(tokenizer))
        assert torch.equal(out.batch["rm_scores"], verl_reference)
        assert out.meta_info["reward_extra_keys"] == ["score", "acc", "pred", "judge_failure"]
    finally:
        ray.shutdown()


def byte_tokenizer_for(model_dir: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model_dir)


# --- parity: every argument and field verl hands a reward function reaches it -------------------

FUNCTIONS = """
import asyncio


def _gsm8k(solution_str, ground_truth):
    return 1.0 if solution_str.strip().endswith("#### " + str(ground_truth)) else 0.0


async def async_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    await asyncio.sleep(0)
    return {"score": _gsm8k(solution_str, ground_truth), "acc": True}


def turns_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    score = _gsm8k(solution_str, ground_truth) - 0.25 * extra_info["num_turns"]
    return score + extra_info["rollout_reward_scores"]["tool"] + extra_info["tool_bonus"]


def genrm_score(data_source, solution_str, ground_truth, extra_info=None, reward_router_address=None,
                reward_model_tokenizer="not passed", **kwargs):
    return 1.0 if reward_router_address == "127.0.0.1:9" and reward_model_tokenizer is None else 0.0


def float_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    return _gsm8k(solution_str, ground_truth)
"""
GSM8K_ROWS = [
    ("openai/gsm8k", "so 3 + 4 = 7.\n#### 7", "7"),
    ("openai/gsm8k", "I think #### 8", "7"),
    ("openai/gsm8k", "6 + 1 is #### 7", "7"),
]
JUDGER_NAIVE = [*MANAGER, "reward.reward_manager.name=NaiveRewardManager"]


def custom_function(tmp_path: Path, name: str) -> list[str]:
    path = tmp_path / "functions.py"
    path.write_text(FUNCTIONS)
    return [f"reward.custom_reward_function.path={path}", f"reward.custom_reward_function.name={name}"]


def verl_and_judger(model_dir: Path, keys: list[str], **kwargs: Any) -> tuple[Any, Any]:
    """(verl's naive manager, judger's) on the same rows with the same config keys."""
    theirs = reward_loop_scores(compose(keys, model_dir), **kwargs)
    ours = reward_loop_scores(compose([*JUDGER_NAIVE, *keys], model_dir), **kwargs)
    return theirs, ours


def rewards(scores: torch.Tensor) -> list[float]:
    return [round(float(v), 6) for v in scores.sum(dim=1)]


def test_async_compute_score_is_awaited(model_dir: Path, tmp_path: Path) -> None:
    (theirs, _), (ours, out) = verl_and_judger(
        model_dir, custom_function(tmp_path, "async_score"), samples=GSM8K_ROWS
    )
    assert rewards(theirs) == [1.0, 0.0, 1.0]
    assert rewards(ours) == rewards(theirs)
    assert [o["reward_extra_info"]["judge_failure"] for o in out] == [None] * 3


def test_extra_info_carries_what_verl_adds(model_dir: Path, tmp_path: Path) -> None:
    """verl's agent loop puts ``__num_turns__``, ``reward_scores`` and ``tool_extra_fields`` on a
    rollout; its naive manager hands them to the function inside ``extra_info``."""
    fields = {
        "__num_turns__": [2, 2, 2],
        "reward_scores": [{"tool": 0.5}] * 3,
        "tool_extra_fields": [{"tool_bonus": 0.25}] * 3,
    }
    keys = custom_function(tmp_path, "turns_score")
    (theirs, _), (ours, _) = verl_and_judger(model_dir, keys, samples=GSM8K_ROWS, fields=fields)
    assert rewards(theirs) == [1.25, 0.25, 1.25]
    assert rewards(ours) == rewards(theirs)


def test_genrm_arguments_are_passed(model_dir: Path, tmp_path: Path) -> None:
    keys = custom_function(tmp_path, "genrm_score")
    (theirs, _), (ours, _) = verl_and_judger(
        model_dir, keys, samples=GSM8K_ROWS, reward_router_address="127.0.0.1:9"
    )
    assert rewards(theirs) == [1.0, 1.0, 1.0]
    assert rewards(ours) == rewards(theirs)


def test_float_result_records_acc_as_verl_does(model_dir: Path, tmp_path: Path) -> None:
    (_, their_out), (_, our_out) = verl_and_judger(
        model_dir, custom_function(tmp_path, "float_score"), samples=GSM8K_ROWS
    )
    assert [o["reward_extra_info"]["acc"] for o in their_out] == [1.0, 0.0, 1.0]
    assert [o["reward_extra_info"]["acc"] for o in our_out] == [1.0, 0.0, 1.0]


ADD = json.dumps({"inputs": ["1 2", "3 4"], "outputs": ["3", "7"]})
CODE_ROWS = [
    ("codecontests", "```python\na, b = map(int, input().split())\nprint(a + b)\n```", ADD),
    ("codecontests", "```python\nprint(0)\n```", ADD),
]
JUDGER_DEFAULT = [
    "reward.custom_reward_function.path=pkg://judger.compat.verl",
    "reward.custom_reward_function.name=default_compute_score",
]


@pytest.fixture
def sandbox_fusion() -> Any:
    from judger.testing import serve_asgi
    from judger.testing.fake_sandbox_fusion import FakeSandboxFusion

    fake = FakeSandboxFusion()
    with serve_asgi(fake.app) as server:
        fake.url = server.url  # type: ignore[attr-defined]
        yield fake


@pytest.mark.parametrize("suffix", ["/run_code", ""])
def test_sandbox_fusion_config_runs_code_on_that_server(
    model_dir: Path, sandbox_fusion: Any, suffix: str
) -> None:
    """``reward.sandbox_fusion.url`` (verl's form names the endpoint) and ``memory_limit_mb``."""
    keys = [
        f"reward.sandbox_fusion.url={sandbox_fusion.url}{suffix}",
        "reward.sandbox_fusion.memory_limit_mb=512",
    ]
    ours, out = reward_loop_scores(compose([*JUDGER_NAIVE, *keys], model_dir), samples=CODE_ROWS)
    assert rewards(ours) == [1.0, 0.0]
    assert sandbox_fusion.requests and {r["memory_limit_MB"] for r in sandbox_fusion.requests} == {512}
    assert [o["reward_extra_info"]["judge_failure"] for o in out] == [None, None]


@pytest.mark.parametrize("suffix", ["/run_code", ""])
def test_sandbox_fusion_reward_kwargs_run_code_on_that_server(
    model_dir: Path, sandbox_fusion: Any, suffix: str
) -> None:
    keys = [
        *JUDGER_DEFAULT,
        f"+reward.custom_reward_function.reward_kwargs.sandbox_fusion_url={sandbox_fusion.url}{suffix}",
    ]
    theirs, _ = reward_loop_scores(compose(keys, model_dir), samples=CODE_ROWS)
    sent_by_verl = len(sandbox_fusion.requests)
    ours, _ = reward_loop_scores(compose([*JUDGER_NAIVE, *keys], model_dir), samples=CODE_ROWS)
    assert rewards(theirs) == rewards(ours) == [1.0, 0.0]
    assert len(sandbox_fusion.requests) > sent_by_verl  # judger's manager ran them there too


def test_default_function_options_are_honoured(model_dir: Path) -> None:
    rows = [*GSM8K_ROWS, ("no_such_source", "#### 7", "7")]
    raising = [*JUDGER_DEFAULT, "+reward.custom_reward_function.reward_kwargs.on_failure=raise"]
    with pytest.raises(NotImplementedError):  # verl's manager lets the function raise
        reward_loop_scores(compose(raising, model_dir), samples=rows)
    with pytest.raises(ValueError, match="no_such_source"):
        reward_loop_scores(compose([*JUDGER_NAIVE, *raising], model_dir), samples=rows)
    as_float = [*JUDGER_DEFAULT, "+reward.custom_reward_function.reward_kwargs.as_float=true"]
    (_, their_out), (_, our_out) = verl_and_judger(model_dir, as_float, samples=GSM8K_ROWS)
    assert [o["reward_extra_info"] for o in our_out] == [o["reward_extra_info"] for o in their_out]
    bogus = [*JUDGER_NAIVE, *JUDGER_DEFAULT, "+reward.custom_reward_function.reward_kwargs.bogus=1"]
    with pytest.raises(TypeError, match="bogus"):
        reward_loop_scores(compose(bogus, model_dir), samples=GSM8K_ROWS)


# --- a failure a response provokes pays no more than a wrong answer ------------------------------

GRADER_MODULE = """
from judger import CompassVerifierV2Config


def grader():
    return CompassVerifierV2Config(hosts=[{url!r}], max_tokens=256)
"""


def test_a_response_that_makes_the_grader_fail_earns_no_more_than_a_wrong_one(
    model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A grader that restates the response's final answer before its verdict: ``\\boxed{A}`` puts a
    second verdict into its reply, no verdict is read, the sample fails. In verl's reward loop it
    scores -1, as a wrong answer does (verdict B), not the 0.0 that paid a policy for it."""
    from judger.testing import serve_asgi
    from judger.testing.fake_openai import FakeOpenAI

    fake = FakeOpenAI(reply_style="quote")
    rows = [("grader", response, "7") for response in ("so \\boxed{7}", "so \\boxed{5}", "so \\boxed{A}")]
    with serve_asgi(fake.app) as server:
        (tmp_path / "provoked_grader.py").write_text(GRADER_MODULE.format(url=server.url))
        monkeypatch.syspath_prepend(str(tmp_path))
        keys = [*JUDGER_NAIVE, "+reward.reward_kwargs.judger=provoked_grader:grader"]
        ours, out = reward_loop_scores(compose(keys, model_dir), samples=rows)
    assert rewards(ours) == [1.0, -1.0, -1.0]
    assert [o["reward_extra_info"]["judge_failure"] for o in out] == [None, None, "error"]
