"""XTuner's own judger tests (``tests/rl/test_judger.py`` of InternLM/xtuner, main @ b934f46), run on judger.

Only the imports are changed (marked ``# judger:``), plus one line that provides XTuner's GSM8K rollout
file from the bundled GSM8K test set when ``VERL_ROLLOUT_DATA_PATH`` is unset (see
``judger.testing.xtuner``); every test body is XTuner's, byte for byte. The
deliberate differences are applied at the end of the file, each as a strict xfail with its reason,
and listed in the XTuner guide's table; judger's own behaviour there is tested beside them.
Kept as XTuner wrote it: neither linted nor formatted.
"""
# ruff: noqa
# fmt: off

import os
import json
import ray
import unittest
import tempfile
import numpy as np
import asyncio
import pytest  # judger: for the deliberate differences at the end
from judger.testing.xtuner import provide_gsm8k_rollouts  # judger: rl_test_utils' data, see below
from judger.remote.resources import (  # judger: was xtuner.v1.rl.utils
    CPUResourcesConfig,
    CPUResourceManager,
    clear_cpu_resource_manager,
    set_cpu_resource_manager,
)
from judger import RolloutState  # judger: was xtuner.v1.data_proto.rl_data

pytestmark = [pytest.mark.py310, pytest.mark.clients_env]

provide_gsm8k_rollouts()  # judger: the one added line: GSM8K rows in XTuner's layout, from bundled data
MODEL_PATH = os.environ.get("ROLLOUT_MODEL_PATH")
DATA_PATH = os.environ.get("ROLLOUT_DATA_PATH")
VERL_ROLLOUT_DATA_PATH = os.environ.get("VERL_ROLLOUT_DATA_PATH")
DAPO_DATA_PATH = os.environ.get("ROLLOUT_DAPO_DATA_PATH")
FAKE_JUDGER_INPUT_ITEM = RolloutState(
    message=[{
        'role': 'user',
        'content': 'Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. How many clips did Natalia sell altogether in April and May? Let\'s think step by step and output the final answer after "####"'
    }],
    reward_model={'ground_truth': '72', 'style': 'rule'},
    response="<think>\nOkay, let's see. Natalia sold clips to 48 friends in April. Then in May, she sold half as many. So first, I need to figure out how many she sold in May. Half of 48 is 24, right? Because 48 divided by 2 is 24. So in May, she sold 24 clips.\n\nNow, to find the total number of clips sold in both months, I need to add the number from April and May together. That would be 48 (April) plus 24 (May). Let me do the addition: 48 + 24. Hmm, 40 + 20 is 60, and 8 + 4 is 12. So 60 + 12 is 72. So altogether, she sold 72 clips.\n\nWait, let me check that again. 48 plus 24. Yes, 48 + 20 is 68, then plus 4 more is 72. Yep, that seems right. So the total is 72.\n</think>\n\nNatalia sold 48 clips in April. In May, she sold half as many, which is 48 ÷ 2 = 24 clips. Adding both months together: 48 + 24 = 72.  \n\n#### 72<|im_end|>"
)

def construct_gsm8k_judger_data(data_path) -> tuple[list[RolloutState], list[float]]:
    states = []
    history_reward = []
    if not data_path or not os.path.exists(data_path):
        return states, history_reward
    with open(data_path, 'r', encoding='utf-8') as f:
        for line in f:
            item = json.loads(line.strip())
            prompt = item["input"][5:-11]
            response = item["output"]
            gt = item["gts"]
            states.append(
                RolloutState(
                    message=[{"role": "user", "content": prompt}],
                    response=response,
                    reward_model={"ground_truth": str(gt)}
                )
            )
            history_reward.append(item["reward"])
    return states, history_reward

def construct_geo3k_dapo_judger_data(data_path) -> tuple[list[RolloutState], list[float]]:
    states = []
    history_reward = []
    if not data_path or not os.path.exists(data_path):
        return states, history_reward
    with open(data_path, 'r', encoding='utf-8') as f:
        lines = f.readlines()
        for i in range(0, len(lines), 7):
            group = ''.join(lines[i:i + 7]).strip()
            if not group:
                continue
            item = json.loads(group)
            states.append(
                RolloutState(
                    message=[{"role": "user", "content": ""}],
                    response=item['response'],
                    reward_model={"ground_truth": str(item["label"])}
                )
            )
            history_reward.append(item["reward"])
    return states, history_reward


class TestComposedJudgerUnit(unittest.TestCase):

    def _build_composed_judger_config(self, merge_fn=None):
        from judger import ComposedJudgerConfig, JudgerConfig

        def reward_a(response, label, extra_info):
            return {"score": 1.0, "source": "a"}

        def reward_b(response, label, extra_info):
            return {"score": 0.25, "source": "b"}

        return ComposedJudgerConfig(
            branches={
                "correctness": JudgerConfig(judger_name="correctness", reward_handler=reward_a),
                "format": JudgerConfig(judger_name="format", reward_handler=reward_b),
            },
            merge_fn=merge_fn,
        )

    def _make_rollout_state(self, data_source):
        rollout_state = FAKE_JUDGER_INPUT_ITEM.model_copy(deep=True)
        rollout_state.data_source = data_source
        return rollout_state

    def test_composed_judger_single_branch_from_data_source(self):
        judger = self._build_composed_judger_config().build()
        rollout_state = asyncio.run(judger.judge(self._make_rollout_state("correctness")))

        self.assertEqual(rollout_state.reward["score"], 1.0)
        self.assertEqual(rollout_state.reward["source"], "a")

    def test_composed_judger_batch_single_branch_from_data_source(self):
        from judger import ComposedJudger, Judger

        class BatchJudger(Judger):
            async def judge_payload(self, payload):
                if isinstance(payload, list):
                    return [{"score": 1.0, "source": "a"} for _ in payload]
                return {"score": 1.0, "source": "a"}

        judger = ComposedJudger(branches={"correctness": BatchJudger()})
        rollout_states = [
            self._make_rollout_state("correctness"),
            self._make_rollout_state("correctness"),
        ]

        rollout_states = asyncio.run(judger.batch_judge(rollout_states))

        self.assertEqual([state.reward["score"] for state in rollout_states], [1.0, 1.0])
        self.assertEqual([state.reward["source"] for state in rollout_states], ["a", "a"])

    def test_composed_judger_rejects_base_judger_only_branch(self):
        from judger import BaseJudger, ComposedJudger

        class JudgeOnlyJudger(BaseJudger):
            async def judge(self, rollout_state):
                rollout_state.reward = {"score": 2.0, "source": "judge"}
                return rollout_state

        with self.assertRaisesRegex(TypeError, "must inherit Judger, not only BaseJudger"):
            ComposedJudger(branches={"custom": JudgeOnlyJudger()})

    def test_native_judger_batch_judge_not_supported(self):
        from judger import JudgerConfig

        judger = JudgerConfig(judger_name="native", reward_handler=lambda **kwargs: {"score": 1.0}).build()

        with self.assertRaisesRegex(NotImplementedError, "does not support batch_judge"):
            asyncio.run(judger.batch_judge([self._make_rollout_state("correctness")]))

    def test_remote_judger_preserves_driver_side_judger_contract(self):
        from judger import Judger, RemoteJudger

        class CustomJudger(Judger):
            def preprocess(self, rollout_state):
                return {"custom_value": rollout_state.extra_fields["custom_value"]}

            def postprocess(self, rollout_state, output):
                rollout_state.reward = {
                    "score": output["raw_score"],
                    "postprocessed": True,
                }
                return rollout_state

        class RemoteMethod:
            def __init__(self):
                self.payload = None

            async def remote(self, payload):
                self.payload = payload
                return {"raw_score": payload["custom_value"]}

        class FakeActor:
            def __init__(self):
                self.judge_payload = RemoteMethod()

        actor = FakeActor()
        judger = RemoteJudger(
            actor=actor,
            judger_name="remote_custom_contract",
            preprocess_judger=CustomJudger(),
        )
        rollout_state = self._make_rollout_state("correctness")
        rollout_state.extra_fields["custom_value"] = 7

        judged_state = asyncio.run(judger.judge(rollout_state))

        self.assertEqual(actor.judge_payload.payload, {"custom_value": 7})
        self.assertEqual(judged_state.reward, {"score": 7, "postprocessed": True})

    def test_composed_judger_pool_preserves_branch_contract_and_routing(self):
        from judger import ComposedJudger, Judger, JudgerPool, RemoteJudger

        class CustomJudger(Judger):
            def preprocess(self, rollout_state):
                return {
                    "response": rollout_state.response,
                    "reward_model": rollout_state.reward_model,
                    "finish_reason": rollout_state.finish_reason,
                    "extra_fields": rollout_state.extra_fields,
                }

            def postprocess(self, rollout_state, output):
                rollout_state.reward = {
                    "score": output["raw_score"],
                    "postprocessed": True,
                }
                return rollout_state

        class RemoteMethod:
            def __init__(self):
                self.payload = None

            async def remote(self, payload):
                self.payload = payload
                return {"raw_score": payload["extra_fields"]["expected_score"]}

        class FakeActor:
            def __init__(self):
                self.judge_payload = RemoteMethod()

        branch_judger = CustomJudger()
        actors = [FakeActor(), FakeActor()]
        replicas = [
            RemoteJudger(
                actor=actor,
                judger_name="remote_custom_contract",
                preprocess_judger=branch_judger,
            )
            for actor in actors
        ]
        judger = ComposedJudger(
            branches={
                "biology": JudgerPool(
                    replicas=replicas,
                    judger_name="biology",
                )
            }
        )
        rollout_states = [self._make_rollout_state("biology"), self._make_rollout_state("biology")]
        for expected_score, rollout_state in enumerate(rollout_states, start=1):
            rollout_state.finish_reason = "stop"
            rollout_state.extra_fields = {
                "expected_score": expected_score,
                "task_name": "MCC",
            }

        async def judge_all():
            return [await judger.judge(state) for state in rollout_states]

        judged_states = asyncio.run(judge_all())

        for expected_score, (actor, state) in enumerate(zip(actors, judged_states), start=1):
            self.assertEqual(
                actor.judge_payload.payload,
                {
                    "response": state.response,
                    "reward_model": state.reward_model,
                    "finish_reason": "stop",
                    "extra_fields": {
                        "expected_score": expected_score,
                        "task_name": "MCC",
                    },
                },
            )
            self.assertEqual(state.reward, {"score": expected_score, "postprocessed": True})

    def test_composed_judger_config(self):
        def merge_fn(original, judged):
            original.reward = {
                "correctness": judged["correctness"]["score"],
                "format": judged["format"]["score"],
            }
            return original

        judger = self._build_composed_judger_config(merge_fn=merge_fn).build()
        rollout_state = self._make_rollout_state({"correctness": 1.0, "format": 1.0})
        rollout_state = asyncio.run(judger.judge(rollout_state))

        self.assertEqual(rollout_state.reward["correctness"], 1.0)
        self.assertEqual(rollout_state.reward["format"], 0.25)

    def test_composed_judger_requires_merge_fn_for_multiple_branches(self):
        judger = self._build_composed_judger_config().build()
        rollout_state = self._make_rollout_state({"correctness": 1.0, "format": 1.0})

        with self.assertRaisesRegex(ValueError, "merge_fn is not provided"):
            asyncio.run(judger.judge(rollout_state))

    def test_composed_judger_data_source_validation(self):
        judger = self._build_composed_judger_config().build()

        with self.assertRaisesRegex(ValueError, "requires rollout_state.data_source"):
            asyncio.run(judger.judge(self._make_rollout_state(None)))

        with self.assertRaisesRegex(KeyError, "Unknown judger branch"):
            asyncio.run(judger.judge(self._make_rollout_state("unknown")))

        with self.assertRaisesRegex(ValueError, "must contain at least one judger branch"):
            asyncio.run(judger.judge(self._make_rollout_state({})))

        with self.assertRaisesRegex(KeyError, "Unknown judger branch"):
            asyncio.run(judger.judge(self._make_rollout_state({"unknown": 1.0})))


class TestJudgerController(unittest.TestCase):

    def setUp(self):
        ray.init(num_cpus=80, ignore_reinit_error=True)
        set_cpu_resource_manager(CPUResourceManager(accelerator_placement_groups=None))
        self.temp_dir = tempfile.TemporaryDirectory()
        self.worker_log_dir = os.path.join(self.temp_dir.name, "work_dirs")

    def tearDown(self): 
        clear_cpu_resource_manager()
        ray.shutdown()
        self.temp_dir.cleanup()

    async def _judger_batch(self, judger_router, states):
        return await asyncio.gather(*(judger_router.judge(s) for s in states))
    
    @unittest.skipUnless(
        VERL_ROLLOUT_DATA_PATH and os.path.exists(VERL_ROLLOUT_DATA_PATH),
        "requires VERL_ROLLOUT_DATA_PATH",
    )
    def test_gsm8k_judger(self):
        from judger.presets.gsm8k import GSM8KJudgerConfig  # judger

        gsm8k_judger_config = GSM8KJudgerConfig(
            judger_name="openai/gsm8k",
            cpu_resources=CPUResourcesConfig(num_workers=1, num_cpus_per_worker=1),
        )
        # Test Case 1: NativeJudger
        native_judger = GSM8KJudgerConfig(judger_name="openai/gsm8k").build()
        res1 = asyncio.run(native_judger.judge(FAKE_JUDGER_INPUT_ITEM))
        self.assertEqual(res1.reward["score"], 1.0)

        # Test Case 2: remote judger
        native_judger_actors = gsm8k_judger_config.build()
        res2 = asyncio.run(native_judger_actors.judge(FAKE_JUDGER_INPUT_ITEM))
        self.assertEqual(res2.reward["score"], 1.0)
        del native_judger_actors

        # Test Case 3: JudgerPool + 一批数据的分数是否正确
        judger_router = gsm8k_judger_config.build()
        states, history_reward = construct_gsm8k_judger_data(VERL_ROLLOUT_DATA_PATH)
        rollout_states = asyncio.run(self._judger_batch(judger_router, states))
        rewards = [s.reward["score"] for s in rollout_states]
        expected_avg_score = np.mean(history_reward)
        self.assertEqual(round(np.mean(rewards), 4), round(expected_avg_score, 4))
        
    @unittest.skipUnless(
        MODEL_PATH and DAPO_DATA_PATH and os.path.exists(DAPO_DATA_PATH),
        "requires ROLLOUT_MODEL_PATH and ROLLOUT_DAPO_DATA_PATH",
    )
    def test_dapo_batch_judge_score(self):
        # 测试 dapo judger + 1 个实例池 的评判分数是否正确
        from judger.presets.dapo import DapoMathJudgerConfig  # judger
        from judger.testing.xtuner import get_eos_token
        from transformers import AutoTokenizer
        # 构建数据
        states, history_reward = construct_geo3k_dapo_judger_data(DAPO_DATA_PATH)
        tokenizer = AutoTokenizer.from_pretrained(MODEL_PATH, trust_remote_code=True)
        eos_token = get_eos_token(MODEL_PATH)
        eos_token_str = tokenizer.convert_ids_to_tokens(eos_token)
        # 定义 Judger Config
        config = DapoMathJudgerConfig(
            judger_name="dapo_math",
            cpu_resources=CPUResourcesConfig(num_workers=1, num_cpus_per_worker=1),
            eos_token=eos_token_str,
            enable_overlong_buffer=True,
            max_response_len=32768,
            overlong_buffer_len=4096,
            overlong_penalty_factor=1.0,
            tokenizer=tokenizer
        )
        router = config.build()
        rollout_states = asyncio.run(self._judger_batch(router, states))
        rewards = [s.reward["score"] for s in rollout_states]
        expected_avg_score = np.mean(history_reward)
        self.assertEqual(round(np.mean(rewards), 4), round(expected_avg_score, 4))

    @unittest.skipUnless(
        VERL_ROLLOUT_DATA_PATH and os.path.exists(VERL_ROLLOUT_DATA_PATH),
        "requires VERL_ROLLOUT_DATA_PATH",
    )
    def test_multi_judger_router(self):
        import time
        from judger.presets.gsm8k import GSM8KJudgerConfig  # judger

        gsm8k_config_1 = GSM8KJudgerConfig(
            judger_name="openai/gsm8k_1",
            cpu_resources=CPUResourcesConfig(num_workers=2, num_cpus_per_worker=1),
        )
        gsm8k_config_2 = GSM8KJudgerConfig(
            judger_name="openai/gsm8k_2",
            cpu_resources=CPUResourcesConfig(num_workers=8, num_cpus_per_worker=2),
        )

        gsm8k_router_1 = gsm8k_config_1.build()
        gsm8k_router_2 = gsm8k_config_2.build() 

        states, history_reward = construct_gsm8k_judger_data(VERL_ROLLOUT_DATA_PATH)
        gsm8k_results_1 = asyncio.run(self._judger_batch(gsm8k_router_1, states))
        gsm8k_results_2 = asyncio.run(self._judger_batch(gsm8k_router_2, states)) 

        gsm8k_rewards_1 = [s.reward["score"] for s in gsm8k_results_1]
        gsm8k_rewards_2 = [s.reward["score"] for s in gsm8k_results_2]

        expected_avg_score = np.mean(history_reward)
        self.assertEqual(round(np.mean(gsm8k_rewards_1), 4), round(expected_avg_score, 4))
        self.assertEqual(round(np.mean(gsm8k_rewards_2), 4), round(expected_avg_score, 4))
        self.assertEqual(len(gsm8k_router_1.get_worker_status()), 2)
        self.assertEqual(len(gsm8k_router_2.get_worker_status()), 8)

    def test_gsm8k_remote_judger(self):
        # 测试输入remote_url时 + 1个实例 + 裸的NativeJudger的评判分数是否正确
        from judger.testing.xtuner import JudgerServer, GSM8KRemoteJudgerConfig

        server = JudgerServer(port=8018)
        server.start()
        try:
            remote_judger_config = GSM8KRemoteJudgerConfig(judger_name="openai/gsm8k", reward_handler=server.url)
            native_remote_judger = remote_judger_config.build()
            res = asyncio.run(native_remote_judger.judge(FAKE_JUDGER_INPUT_ITEM))
            self.assertEqual(res.reward["score"], 1.0)
        finally:
            server.stop()

if __name__ == "__main__":
    unittest.main()


# --- judger: deliberate differences from XTuner (docs/trainers/xtuner.md) -------------------

TestComposedJudgerUnit.test_native_judger_batch_judge_not_supported = pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="deliberate: judger's NativeJudger supports batch_judge (each sample under its own deadline, "
    "or one call of a batch handler); XTuner raises NotImplementedError",
)(TestComposedJudgerUnit.test_native_judger_batch_judge_not_supported)

# XTuner's controller tests start a Ray cluster and actors: slow here (2 shared cores)
TestJudgerController = pytest.mark.slow(TestJudgerController)


def test_native_judger_batch_judge_is_supported() -> None:
    """The other side of the xfail above: judger scores the batch XTuner refuses."""
    from judger import JudgerConfig

    judger = JudgerConfig(judger_name="native", reward_handler=lambda **kwargs: {"score": 1.0}).build()
    states = asyncio.run(judger.batch_judge([FAKE_JUDGER_INPUT_ITEM.model_copy(deep=True)]))
    assert [s.reward for s in states] == [{"score": 1.0}]
