"""OpenRLHF's own remote-reward client code, copied unchanged (OpenRLHF cannot install here: it needs
torch, deepspeed and vLLM on a GPU). Source: https://github.com/OpenRLHF/OpenRLHF, commit
3c3be6234e0cb353e76bb8019947db9dfe99fca7:

- ``_fetch_rewards_via_http``: openrlhf/utils/agent.py lines 322-356 (``SingleTurnAgentExecutor``):
  the HTTP request, its 5 tries, and OpenRLHF's retry on any client error (a 5xx included);
- ``reward_step``: openrlhf/utils/agent.py lines 280-299 (the reward step at the end of
  ``SingleTurnAgentExecutor.execute``): what OpenRLHF keeps from the reply;
- ``experience_info``: openrlhf/trainer/ppo_utils/samples_generator.py lines 254-255 and 284-297:
  the tensors OpenRLHF builds from it, ``torch.tensor([value])`` for the reward, the score and every
  ``extra_logs`` entry.

Only the enclosing ``class``/``def`` lines, their parameters and the imports were added; the copied
lines are verbatim. ``execute`` is entered at its reward step: ``hf_tokenizer.decode`` gives back
the query text, as it does in OpenRLHF. torch is not installed here: :class:`torch` is a stand-in
whose ``tensor`` accepts what ``torch.tensor`` accepts for these values (numbers, nested lists of
numbers) and refuses what it refuses (``None``, strings) with the same exception type.
"""
# ruff: noqa
# fmt: off

import asyncio
import logging
from numbers import Real

import aiohttp

logger = logging.getLogger("openrlhf.utils.agent")


class torch:
    class Tensor:  # nothing here is a tensor yet
        pass

    @staticmethod
    def tensor(value):
        if isinstance(value, (list, tuple)):
            return [torch.tensor(v) for v in value]
        if isinstance(value, Real):
            return float(value)
        raise TypeError(f"must be real number, not {type(value).__name__}")


class Tokenizer:
    def decode(self, tokens, skip_special_tokens=False):
        return tokens


class SingleTurnAgentExecutor:
    def __init__(self, remote_rm_url=None):
        reward_endpoints = [remote_rm_url] if isinstance(remote_rm_url, str) else remote_rm_url
        self.reward_endpoints = reward_endpoints or []
        self.reward_func = None

    async def _fetch_rewards_via_http(self, queries_list, prompts_list, labels_list):
        """HTTP fallback: shard requests across servers."""
        num_servers = len(self.reward_endpoints)
        batch_size = (len(queries_list) + num_servers - 1) // num_servers
        timeout = aiohttp.ClientTimeout(total=180)

        tasks = []
        for i, rm in enumerate(self.reward_endpoints):
            start_idx = i * batch_size
            end_idx = min((i + 1) * batch_size, len(queries_list))
            payload = {
                "query": queries_list[start_idx:end_idx],
                "prompts": prompts_list[start_idx:end_idx],
                "labels": labels_list[start_idx:end_idx],
            }

            async def _post_request(url, data, try_max_times=5):
                for _ in range(try_max_times):
                    try:
                        async with aiohttp.ClientSession(timeout=timeout) as session:
                            async with session.post(url, json=data) as response:
                                response.raise_for_status()
                                return await response.json()
                    except aiohttp.ClientError as e:
                        logger.info(f"Request error, please check: {e}")
                    except Exception as e:  # pragma: no cover - defensive
                        logger.info(f"Unexpected error, please check: {e}")
                    await asyncio.sleep(1)

                raise RuntimeError(
                    f"Request error for {try_max_times} times, returning None. Please check the API server."
                )

            tasks.append(asyncio.create_task(_post_request(rm, payload)))
        return await asyncio.gather(*tasks)

    async def reward_step(self, prompt, label, query, hf_tokenizer):
        output = {"observation_tokens": query, "reward": None, "scores": None, "extra_logs": {}}
        # Compute reward/score after generation.
        if self.reward_endpoints:
            try:
                query = hf_tokenizer.decode(output["observation_tokens"], skip_special_tokens=False)
                if self.reward_func:
                    rewards_info_list = await self._fetch_rewards_via_func([query], [prompt], [label])
                else:
                    rewards_info_list = await self._fetch_rewards_via_http([query], [prompt], [label])
                rewards_info = rewards_info_list[0] if rewards_info_list else None
                if rewards_info:
                    score_value = rewards_info.get("scores")
                    if score_value is None:
                        score_value = rewards_info.get("rewards")
                    output.update(
                        reward=rewards_info.get("rewards"),
                        scores=score_value,
                        extra_logs=rewards_info.get("extra_logs") or {},
                    )
            except Exception as e:
                logger.info(f"[SingleTurnExecutor] Failed to fetch reward from remote RM: {e}")
        return output


def experience_info(response, is_clipped=False):
        reward_val = response.get("reward", None)
        score_val = response.get("scores", None)

        info = {
            "response_clip_ratio": torch.tensor([is_clipped]),
        }
        if reward_val is not None:
            info["reward"] = torch.tensor([reward_val])
        if score_val is not None:
            info["score"] = torch.tensor([score_val])

        # Convert extra logs to tensors for downstream consumers.
        extra_logs = response.get("extra_logs", {})
        for key, value in extra_logs.items():
            if isinstance(value, torch.Tensor):
                value = value.flatten()[0].item()
            info[key] = torch.tensor([value])
        return info
