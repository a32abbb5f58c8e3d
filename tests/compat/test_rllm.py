"""judger as an rLLM evaluator (9beb6e0; not on the package registry), loaded and called exactly as
rLLM's source does it. ``Task``, ``Episode``, ``Trajectory`` and ``Step`` are pydantic models and a
dataclass there (``rllm/types.py``); the stand-ins below carry the attributes an evaluator reads."""

from __future__ import annotations

import asyncio
import importlib
import inspect
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace
from typing import Any

import pytest

from judger.compat import rllm

pytestmark = [pytest.mark.py310, pytest.mark.clients_env]


def load_evaluator(import_path: str) -> Any:
    """``rllm/eval/evaluator_loader.py`` 131-151 (``_load_and_instantiate``): import ``module:attr``, a
    class is instantiated with no arguments; then ``_validate_evaluator`` (77-79) and the engine's
    ``_adapt_legacy_evaluator`` (``rllm/eval/_resolution.py`` 401-419): an ``evaluate`` whose first
    parameter is annotated ``dict`` or named ``task_data`` / ``task_info`` would get the metadata dict."""
    module_path, attr = import_path.rsplit(":", 1)
    obj = getattr(importlib.import_module(module_path), attr)
    if isinstance(obj, type):
        obj = obj()
    assert hasattr(obj, "evaluate") and callable(obj.evaluate)
    first = next(iter(inspect.signature(obj.evaluate).parameters.values()))
    assert first.annotation not in (dict, "dict") and first.name not in ("task_data", "task_info")
    return obj


def run_evaluator(evaluator: Any, task: Any, episode: Any) -> Any:
    """``rllm/engine/agentflow_engine.py`` 677-701: ``evaluate(task, episode)`` in the engine's thread
    pool from its event loop, then the result's ``reward``, ``signals``, ``is_correct`` and
    ``metadata`` written onto the episode."""

    async def engine() -> Any:
        with ThreadPoolExecutor(4) as executor:
            out = await asyncio.get_event_loop().run_in_executor(executor, evaluator.evaluate, task, episode)
        for traj in episode.trajectories:
            if traj.reward is None:
                traj.reward = out.reward
            if not traj.signals:
                traj.signals = {s.name: s.value for s in out.signals}
        episode.is_correct = out.is_correct
        episode.metrics.update(out.metadata)
        for signal in out.signals:
            episode.metrics[signal.name] = signal.value
        return out

    return asyncio.run(engine())


def task(**metadata: Any) -> Any:
    return SimpleNamespace(id="t1", instruction="What is 6 x 7?", metadata=metadata)


def episode(answer: str | None = None, output: Any = None, steps: list[Any] | None = None) -> Any:
    traj = SimpleNamespace(output=output, steps=steps or [], reward=None, signals={})
    return SimpleNamespace(
        artifacts={"answer": answer} if answer is not None else {},
        trajectories=[traj],
        is_correct=False,
        metrics={},
    )


def step(output: Any = None, model_response: Any = None) -> Any:
    return SimpleNamespace(output=output, model_response=model_response)


def test_loaded_by_import_path_and_scored_on_the_engines_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUDGER_CONFIG", "math")
    evaluator = load_evaluator("judger.compat.rllm:JudgerEvaluator")
    ep = episode(answer="so \\boxed{42}")
    out = run_evaluator(evaluator, task(ground_truth="42"), ep)
    assert out.reward == 1.0 and out.is_correct
    assert ep.trajectories[0].reward == 1.0 and ep.metrics == {"accuracy": 1.0, "judge_failed": 0.0}
    assert run_evaluator(evaluator, task(ground_truth="41"), episode(answer="\\boxed{42}")).reward == 0.0


@pytest.mark.parametrize(
    "ep",
    [
        episode(output="\\boxed{42}"),
        episode(steps=[step(output="thinking"), step(output="\\boxed{42}")]),
        episode(steps=[step(model_response="\\boxed{42}"), step(model_response="")]),
    ],
    ids=["trajectory output", "last step output", "last model response"],
)
def test_the_answer_is_found_where_rllm_looks(ep: Any) -> None:
    """rLLM's own evaluators read the answer in this order (``rllm/eval/reward_fns/_helpers.py`` 8-43)."""
    evaluator = rllm.make_evaluator("math")
    assert run_evaluator(evaluator, task(ground_truth="42"), ep).reward == 1.0


def test_a_failed_sample_is_the_lowest_score_never_an_exception() -> None:
    """An exception re-runs the whole episode, generation included (``agentflow_engine.py`` 458-520):
    a failure is a number (DAPO's lowest, -1), ``is_correct`` False and its reason in the metadata."""
    evaluator = rllm.make_evaluator("dapomath")
    ep = episode(answer="Answer: 42")
    out = run_evaluator(evaluator, task(question="no label here"), ep)
    assert out.reward == -1.0 and not out.is_correct
    assert "'ground_truth'" in ep.metrics["judge_failure"] and ep.metrics["judge_failed"] == 1.0
    out = run_evaluator(evaluator, task(ground_truth=None), episode(answer="Answer: 42"))
    assert out.reward == -1.0 and "ground truth is None" in out.metadata["judge_failure"]
    labelled = rllm.make_evaluator("dapomath", label_key="meta.answer")
    assert run_evaluator(labelled, task(meta={"answer": "42"}), episode(answer="Answer: 42")).reward == 1.0


def test_a_dict_task_reads_as_its_metadata() -> None:
    """Legacy callers hand the metadata dict itself (``evaluator_loader.py`` 166-173)."""
    evaluator = rllm.make_evaluator("math")
    assert run_evaluator(evaluator, {"ground_truth": "42"}, episode(answer="\\boxed{42}")).reward == 1.0
