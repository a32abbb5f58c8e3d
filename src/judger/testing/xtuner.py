"""What XTuner's ``tests/rl/test_judger.py`` imports from ``xtuner.v1.utils.rl_test_utils``, on judger.

Used by ``tests/compat/test_xtuner_judger.py`` (XTuner's test file with only its imports changed).


- ``JudgerServer``: as XTuner's, a FastAPI app whose ``POST /judge`` takes the URL-handler protocol
  (``{"response", "label", "extra_info"}``) and answers GSM8K's reward, here judger's GSM8K preset
  with XTuner's ``extra_info`` (``score``, ``format_score``); bound to 127.0.0.1 on a free port
  (XTuner's fixed port may be taken on a shared machine).
- ``GSM8KRemoteJudgerConfig``: XTuner's JudgerConfig subclass with a URL ``reward_handler``.
- ``get_eos_token``: the ``eos_token_id`` of a checkpoint's ``generation_config.json``.

:func:`provide_gsm8k_rollouts` provides the data XTuner's GSM8K tests read from
``VERL_ROLLOUT_DATA_PATH`` when that variable is unset: rows in XTuner's layout (``input``,
``output``, ``gts``, ``reward``) built from the bundled GSM8K test set. Each reference solution
ends in ``#### <answer>``; a row is that solution (reward 1), the solution with its final answer
changed (reward 0), or the solution with the ``####`` line cut off (reward 0): the rewards follow
from GSM8K's answer rule, not from any scorer.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from typing import Any

from pydantic import Field

from judger.core.rollout import RolloutState
from judger.judgers.config import JudgerConfig
from judger.presets.gsm8k import GSM8KJudgerConfig
from judger.testing.servers import LoopbackServer

ROWS = 48


def gsm8k_app() -> Any:
    """XTuner's test server: ``POST /judge`` with the URL-handler protocol, GSM8K's reward back."""
    from fastapi import FastAPI

    app = FastAPI()

    @app.post("/judge")
    async def judge(request: dict[str, Any]) -> dict[str, Any]:
        config = GSM8KJudgerConfig.model_validate({"extra_info": dict(request.get("extra_info") or {})})
        judger = config.build()
        state = RolloutState(response=request["response"], reward_model={"ground_truth": request["label"]})
        judged = await judger.judge(state)
        return {"score": judged.reward["score"]} if judged.reward else {"error": judged.error_msg}

    return app


class JudgerServer:
    def __init__(self, host: str = "127.0.0.1", port: int = 8000) -> None:
        self._server = LoopbackServer(gsm8k_app())
        self.host = "127.0.0.1"
        self.port = self._server.port
        self.url = f"http://{self.host}:{self.port}/judge"

    def start(self) -> None:
        self._server.start()

    def stop(self) -> None:
        self._server.stop()


class GSM8KRemoteJudgerConfig(JudgerConfig):
    judger_name: str
    reward_handler: str
    extra_info: dict = Field(default_factory=lambda: {"score": 1, "format_score": 0})


def get_eos_token(model_path: str) -> int | list[int]:
    path = os.path.join(model_path, "generation_config.json")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return json.load(f).get("eos_token_id")


def _write_gsm8k_rows(path: str, rows: int = ROWS) -> None:
    from importlib.resources import files

    with (files("judger") / "data" / "gsm8k_test.jsonl").open(encoding="utf-8") as f:
        items = [json.loads(line) for _, line in zip(range(rows), f)]
    with open(path, "w", encoding="utf-8") as out:
        for i, item in enumerate(items):
            solution: str = item["answer"]
            gold = solution.rsplit("####", 1)[1].strip().replace(",", "")
            kind = i % 3
            if kind == 0:
                response, reward = solution, 1.0
            elif kind == 1:
                wrong = str(int(float(gold)) + 1)
                response, reward = re.sub(r"####.*$", f"#### {wrong}", solution), 0.0
            else:
                response, reward = solution.rsplit("####", 1)[0], 0.0
            # XTuner's reader takes the prompt as input[5:-11]
            row: dict[str, Any] = {
                "input": "user\n" + item["question"] + "\nassistant\n",
                "output": response,
                "gts": gold,
                "reward": reward,
            }
            out.write(json.dumps(row) + "\n")


def provide_gsm8k_rollouts(rows: int = ROWS) -> str:
    """``VERL_ROLLOUT_DATA_PATH``, set to a file of :func:`_write_gsm8k_rows` when it is unset."""
    path = os.environ.get("VERL_ROLLOUT_DATA_PATH")
    if not path:
        path = os.path.join(tempfile.mkdtemp(prefix="judger-xtuner-"), "gsm8k_rollouts.jsonl")
        _write_gsm8k_rows(path, rows)
        os.environ["VERL_ROLLOUT_DATA_PATH"] = path
    return path


class XTunerJudgerActor:
    """XTuner's ``JudgerActor``: builds the config's local judger, offers only ``judge_payload``.

    Wrapped with ``ray.remote`` in tests, it is an actor of XTuner's protocol for
    ``RemoteJudger(actor, judger_name=..., preprocess_judger=...)``.
    """

    def __init__(self, judger_config: JudgerConfig) -> None:
        self.judger = judger_config.build_local()

    async def judge_payload(self, payload: Any) -> Any:
        return await self.judger.judge_payload(payload)
