"""judger inside verl 0.9.1's own code: its hydra config, its reward loop worker and managers.

Each test composes verl's trainer config with the YAML keys the README shows, lets verl load what
they point at, and compares token-level rewards with verl's own scorer in ``compat="verl"`` mode.
"""

from __future__ import annotations

import asyncio
import pickle
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


def make_data(tokenizer: Any, samples: list[tuple[str, str, Any]] = SAMPLES) -> Any:
    from verl import DataProto

    prompt = tokenizer.encode("Q: solve it\n")
    prompts, responses, masks = [], [], []
    for _, text, _ in samples:
        ids = tokenizer.encode(text)[:RESPONSE_WIDTH]
        pad = RESPONSE_WIDTH - len(ids)
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


def reward_loop_scores(config: Any) -> tuple[torch.Tensor, list[dict[str, Any]]]:
    """What verl's trainer does per step: its RewardLoopWorker scores a chunk, the manager class assembles."""
    from verl.experimental.reward_loop import RewardLoopWorker
    from verl.trainer.ppo.reward import resolve_reward_manager_cls

    # a fresh actor process: its own event loop (verl's prime manager closes the loop it leaves set)
    asyncio.set_event_loop(asyncio.new_event_loop())
    worker = RewardLoopWorker(config)
    data = make_data(worker.input_tokenizer)
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

    data = make_data(tokenizer)
    theirs = verl_rm.NaiveRewardManager(tokenizer, 0)(data, return_dict=True)
    ours = managers.NaiveRewardManager(tokenizer, 0, compat="verl")(data, return_dict=True)
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


def readme_keys(block: str) -> list[str]:
    """The override lines of the README's ``<!-- verl-keys: block -->`` fenced block."""
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    start = readme.index(f"<!-- verl-keys: {block} -->")
    body = readme[start:].split("```", 2)[1]
    return [line.strip() for line in body.splitlines() if line.strip()]


@pytest.mark.parametrize("block", ["custom_reward_function", "reward_manager"])
def test_readme_keys_run_in_verl_and_equal_verl(
    model_dir: Path, verl_reference: torch.Tensor, block: str
) -> None:
    keys = readme_keys(block)
    assert keys and all(k.lstrip("+").startswith("reward.") for k in keys)
    scores, _ = reward_loop_scores(compose(keys, model_dir))
    assert torch.equal(scores, verl_reference)


def test_top_level_custom_reward_function_is_ignored_by_verl(
    model_dir: Path, verl_reference: torch.Tensor
) -> None:
    """Why the README says ``reward.``: verl 0.9.1's trainer does not read the top-level keys."""
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
def test_ray_reward_loop_manager_equals_verl(model_dir: Path, verl_reference: torch.Tensor) -> None:
    """verl's RewardLoopManager: reward-loop workers as Ray actors, judger's manager inside them."""
    import ray
    from verl.experimental.reward_loop import RewardLoopManager

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        config = compose(
            [*readme_keys("reward_manager"), "reward.num_workers=2"],
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
