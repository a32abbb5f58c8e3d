"""The core of judger's verl reward managers: one class serving verl's three calling conventions.

Each convention reduces its batch to ``(data_source, response, ground_truth, extra_info)`` rows and
their valid lengths, judged together by :func:`~judger.compat.verl.batch.score_rows`:

- verl 0.9's reward loop: concurrent ``run_single`` calls of one chunk, gathered into one batch;
- verl's legacy ``DataProto`` call (``manager(data, return_dict=True)``): a torch reward tensor;
- a torch-free :class:`~judger.compat.verl.reward_managers.RewardBatch`: a NumPy array.

The managers verl names (:mod:`.naive`, :mod:`.batch`, :mod:`.dapo`) are this class with what makes
each one verl's: DAPO declares :attr:`RewardManager.overlong_penalty` and overrides the hooks
(``extra_info``, ``strip``, ``adjust``) it changes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, ClassVar

import numpy as np

from judger.compat.verl.batch import (
    DEFAULT_EXTRA_KEYS,
    FAILURE_KEY,
    FailureLog,
    Failures,
    Row,
    run_sync,
    score_rows,
)
from judger.compat.verl.manager_judger import (
    default_function_options,
    get_option,
    is_judger_like,
    manager_judger,
    plain,
)
from judger.compat.verl.reward_managers import RewardBatch, decode_all, reward_array, union_extra_info
from judger.core.failure_reward import FailureReward

OPTION_NAMES = (
    "compat",
    "failure_score",
    "reward_extra_keys",
    "judger",
    "max_resp_len",
    "overlong_buffer_cfg",
)


def _valid_lengths(mask: Any) -> np.ndarray:
    """Each row's sum of the response part of the attention mask: in numpy for a mask in host
    memory (faster than torch's reduction of an int64 mask), on its device otherwise."""
    if mask.device.type == "cpu":
        return mask.numpy().sum(axis=1)
    return mask.sum(dim=-1).cpu().numpy()


def _check_tensor(tensor: str) -> None:
    if tensor not in ("numpy", "torch"):
        raise ValueError(f"tensor must be 'numpy' or 'torch', got {tensor!r}")
    if tensor == "torch":
        try:
            import torch  # noqa: F401
        except ImportError as exc:
            raise ImportError("tensor='torch' needs torch installed; use the default tensor='numpy'") from exc


class RewardManager:
    """A verl reward manager over a judger: verl's reward loop (``run_single``), verl's
    ``DataProto`` call, and torch-free batches (:class:`RewardBatch`)."""

    _class_initialized = False
    overlong_penalty: ClassVar[bool] = False
    """Whether :meth:`adjust` applies ``overlong_buffer_cfg`` (DAPO's); a manager without it refuses
    an enabled one rather than ignore it."""

    def __init__(
        self,
        tokenizer: Any = None,
        num_examine: int = 0,
        compute_score: Callable[..., Any] | None = None,
        reward_fn_key: str = "data_source",
        *,
        config: Any = None,
        reward_router_address: str | None = None,
        reward_model_tokenizer: Any = None,
        tensor: str = "numpy",
        printer: Callable[[str], None] = print,
        **reward_kwargs: Any,
    ) -> None:
        configured = plain(get_option(get_option(config, "reward"), "reward_kwargs", {})) or {}
        options = {**dict(configured), **reward_kwargs}
        _check_tensor(tensor)
        self.config = config
        self.tokenizer = tokenizer
        self.num_examine = num_examine
        self.reward_fn_key = reward_fn_key
        self.reward_router_address = reward_router_address
        self.reward_model_tokenizer = reward_model_tokenizer
        self.tensor = tensor
        self.printer = printer
        if is_judger_like(compute_score):
            if options.get("judger") is not None:
                raise ValueError(f"{type(self).__name__}: a judger as compute_score and reward_kwargs.judger")
            options["judger"], compute_score = compute_score, None
        who = type(self).__name__
        self.defaults = default_function_options(compute_score, who)
        self._read_options(options)
        genrm: dict[str, Any] = {}
        if reward_router_address is not None:  # what verl's managers add to every call (GenRM)
            genrm = {
                "reward_router_address": reward_router_address,
                "reward_model_tokenizer": reward_model_tokenizer,
            }
        self.judger = manager_judger(who, compute_score, self._judger_option, self.defaults, genrm)
        self.failure_reward = FailureReward(self._failure_setting, self.judger, "reward_kwargs.failure_score")
        self.failures = FailureLog(who)
        self._outcomes = Failures(self.failure_reward, self.failures, self.on_failure)
        self._pending: list[tuple[tuple[tuple[Any, np.ndarray, Any, Any], int], asyncio.Future[Any]]] = []
        self.check_options()

    def _read_options(self, options: dict[str, Any]) -> None:
        """The manager's own options (``OPTION_NAMES``); anything left is refused by check_options."""
        self.compat = options.pop("compat", self.defaults.compat)
        if self.compat not in (None, "verl"):
            raise ValueError(f"reward_kwargs.compat must be 'verl' or null, got {self.compat!r}")
        if self.compat != self.defaults.compat:
            self.defaults = replace(self.defaults, compat=self.compat)
        self._failure_setting = options.pop("failure_score", self.defaults.failure_reward())
        self.on_failure = self.defaults.on_failure
        explicit_keys = "reward_extra_keys" in options
        keys = plain(options.pop("reward_extra_keys", DEFAULT_EXTRA_KEYS))
        if self.defaults.as_float and explicit_keys:
            raise ValueError(
                f"{type(self).__name__}: as_float=True makes reward_extra_info {{'acc': score}} as verl "
                "records a float; drop reward_extra_keys or as_float"
            )
        # None: every key the scorer returns (the union over the batch)
        self.reward_extra_keys: tuple[str, ...] | None = None if keys is None else tuple(keys)
        self._judger_option = options.pop("judger", None)
        self.max_resp_len = options.pop("max_resp_len", None)
        self.overlong_buffer_cfg = plain(options.pop("overlong_buffer_cfg", None))
        self.options = options  # for subclasses; anything left is refused below

    def check_options(self) -> None:
        unknown = sorted(set(self.options))
        if get_option(self.overlong_buffer_cfg, "enable", False) and not self.overlong_penalty:
            raise TypeError(
                f"{type(self).__name__}: overlong_buffer_cfg is enabled but only DAPORewardManager applies "
                "the overlong penalty; set reward.reward_manager.name=DAPORewardManager or disable it"
            )
        if unknown:
            raise TypeError(
                f"{type(self).__name__}: unknown reward_kwargs {unknown}; judger's managers take "
                f"{sorted(OPTION_NAMES)}"
            )

    @classmethod
    def init_class(cls, config: Any, tokenizer: Any) -> None:
        cls._class_initialized = True

    # --- scoring ---------------------------------------------------------------------------------

    def _score(
        self, rows: Sequence[Row], lengths: Sequence[int] | np.ndarray
    ) -> list[tuple[float, dict[str, Any]]]:
        """Judge ``(data_source, response, ground_truth, extra_info)`` rows: (reward, extra info) each."""
        states = run_sync(score_rows(self.judger, rows)) if rows else []
        return self._finish(states, lengths)

    def _finish(
        self, states: Sequence[Any], lengths: Sequence[int] | np.ndarray
    ) -> list[tuple[float, dict[str, Any]]]:
        keys, as_float = self.reward_extra_keys, self.defaults.as_float
        adjust = self.adjust if self.overlong_penalty else None
        outcome = self._outcomes.outcome
        out = []
        for state, length in zip(states, lengths):
            score, reward, failed = outcome(state)
            info: dict[str, Any]
            if as_float:
                info = {"acc": score}
            elif keys is None:
                info = reward if failed else {**reward, FAILURE_KEY: None}
            else:
                info = {key: reward.get(key) for key in keys}
                if not failed and FAILURE_KEY in info:
                    info[FAILURE_KEY] = None  # a judged sample has no failure, whatever it returned
            out.append((score, info) if adjust is None else adjust(score, int(length), info))
        return out

    def adjust(self, reward: float, length: int, info: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        """The sample's reward from its score and valid length; called only where
        :attr:`overlong_penalty` is declared (DAPO adds the penalty)."""
        return reward, info

    # --- verl's reward loop ----------------------------------------------------------------------

    def _undecoded_row(self, item: Any) -> tuple[tuple[Any, np.ndarray, Any, Any], int]:
        """One sample of verl's reward loop, its response still token ids (decoded with the others
        of its chunk): ``(data_source, valid response ids, ground_truth, extra_info)`` and length."""
        response_ids = item.batch["responses"]
        width = response_ids.shape[-1]
        length = int(item.batch["attention_mask"][-width:].sum())
        ids = response_ids[:length]
        fields = item.non_tensor_batch
        rm = fields.get("reward_model") or {}
        host = ids.cpu().numpy() if hasattr(ids, "cpu") else np.asarray(ids)
        return (fields[self.reward_fn_key], host, rm.get("ground_truth"), self.extra_info(fields)), length

    def _rows(self, data: Any) -> tuple[list[Row], np.ndarray]:
        """Every row of a ``DataProto`` at once: valid lengths from the attention mask in one
        reduction, all responses in one ``batch_decode`` (slicing the batch row by row and decoding
        each was most of a step's time); the same rows verl's managers make one by one."""
        responses = data.batch["responses"]
        width = responses.shape[-1]
        lengths = _valid_lengths(data.batch["attention_mask"][:, -width:])
        # rows as arrays: transformers checks a list of Python ints element by element before
        # decoding it, which cost more than the decoding itself
        array = responses.detach().cpu().numpy()
        texts = decode_all(self.tokenizer, [array[i, :n] for i, n in enumerate(lengths.tolist())])
        columns = data.non_tensor_batch
        n = len(texts)
        sources = columns[self.reward_fn_key]
        models = columns.get("reward_model", [None] * n)
        extras = self.extra_infos(columns, n)
        strip = self.strip
        rows = [
            (sources[i], strip(texts[i]), (models[i] or {}).get("ground_truth"), extras[i]) for i in range(n)
        ]
        return rows, lengths

    def extra_info(self, fields: Mapping[str, Any]) -> dict[str, Any]:
        """The ``extra_info`` verl's naive manager hands the function: the row's, updated with the
        rollout's ``tool_extra_fields``, plus ``num_turns`` and ``rollout_reward_scores``."""
        extra = dict(fields.get("extra_info") or {})
        tools = fields.get("tool_extra_fields")
        if tools is not None:
            extra.update(tools.items())
        extra["num_turns"] = fields.get("__num_turns__")
        extra["rollout_reward_scores"] = fields.get("reward_scores", {})
        return extra

    def extra_infos(self, columns: Mapping[str, Any], n: int) -> list[dict[str, Any]]:
        """:meth:`extra_info` of every row of a ``non_tensor_batch``, read column by column."""
        infos, tools = columns.get("extra_info"), columns.get("tool_extra_fields")
        turns, scores = columns.get("__num_turns__"), columns.get("reward_scores")
        out = []
        for i in range(n):
            extra = dict((infos[i] if infos is not None else None) or {})
            if tools is not None and tools[i] is not None:
                extra.update(tools[i].items())
            extra["num_turns"] = turns[i] if turns is not None else None
            extra["rollout_reward_scores"] = scores[i] if scores is not None else {}
            out.append(extra)
        return out

    def strip(self, text: str) -> str:
        return text

    async def run_single(self, data: Any) -> dict[str, Any]:
        """verl's reward-loop call for one sample; concurrent calls are decoded and judged as one batch."""
        row, length = self._undecoded_row(data[-1:][0])
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._pending.append(((row, length), future))
        if len(self._pending) == 1:
            # the other run_single calls of verl's chunk are already scheduled: flush after them
            loop.call_soon(lambda: asyncio.ensure_future(self._flush()))
        reward, info = await future
        return {"reward_score": reward, "reward_extra_info": info}

    async def _flush(self) -> None:
        pending, self._pending = self._pending, []
        try:
            undecoded = [p[0][0] for p in pending]
            texts = decode_all(self.tokenizer, [ids for _, ids, _, _ in undecoded])
            rows = [(ds, self.strip(text), gt, extra) for (ds, _, gt, extra), text in zip(undecoded, texts)]
            states = await score_rows(self.judger, rows)
            results = self._finish(states, [p[0][1] for p in pending])
        except BaseException as exc:
            for _, future in pending:
                if not future.done():
                    future.set_exception(exc)
            return
        for (_, future), result in zip(pending, results):
            if not future.done():
                future.set_result(result)

    @classmethod
    def assemble_rm_scores(cls, data: Any, scores: list[float]) -> Any:
        """verl's ``RewardManagerBase.assemble_rm_scores``: each score at the last valid response token."""
        import torch

        prompt_length = data.batch["prompts"].size(1)
        valid = data.batch["attention_mask"][:, prompt_length:].sum(dim=1)
        rm_scores = torch.zeros_like(data.batch["responses"], dtype=torch.float32)
        rm_scores[torch.arange(rm_scores.size(0), device=rm_scores.device), valid - 1] = rm_scores.new_tensor(
            scores
        )
        return rm_scores

    # --- verl's DataProto managers, and batches without torch ------------------------------------

    def __call__(self, data: Any, return_dict: bool = False) -> Any:
        """verl's legacy manager call: a ``DataProto`` in, the reward tensor (and extra info) out; or
        a :class:`RewardBatch` (or mapping) in, a NumPy array out (torch with ``tensor="torch"``)."""
        if not hasattr(data, "non_tensor_batch"):
            batch = RewardBatch.coerce(data)
            lengths, width = batch.checked_lengths()
            rows = self._batch_rows(batch)
            return self._rewards(rows, lengths, width, batch.prompts, self._as_tensor, return_dict)
        if "rm_scores" in data.batch.keys():  # noqa: SIM118 - TensorDict refuses `in`
            scores = data.batch["rm_scores"]
            if not return_dict:
                return scores
            keys = data.meta_info.get("reward_extra_keys", [])
            return {"reward_tensor": scores, "reward_extra_info": {k: data.non_tensor_batch[k] for k in keys}}
        import torch

        rows, lengths = self._rows(data)
        responses = data.batch["responses"]

        def on_device(array: np.ndarray) -> Any:
            tensor = torch.from_numpy(array)
            return tensor if tensor.device == responses.device else tensor.to(responses.device)

        return self._rewards(rows, lengths, responses.shape[-1], None, on_device, return_dict)

    def _batch_rows(self, batch: RewardBatch) -> list[Row]:
        texts = batch.texts(self.tokenizer)
        infos = list(batch.extra_infos) if batch.extra_infos is not None else [None] * len(batch)
        strip = self.strip
        return [
            (ds, strip(text), gt, info)
            for ds, text, gt, info in zip(batch.data_sources, texts, batch.ground_truths, infos)
        ]

    def _as_tensor(self, array: np.ndarray) -> Any:
        if self.tensor == "torch":
            import torch

            return torch.from_numpy(array)
        return array

    def _rewards(
        self,
        rows: Sequence[Row],
        lengths: np.ndarray,
        width: int,
        prompts: Sequence[str] | None,
        tensor_of: Callable[[np.ndarray], Any],
        return_dict: bool,
    ) -> Any:
        """The rows scored: each reward at its last valid token of a ``width``-wide array (made a
        tensor by ``tensor_of``), with verl's ``reward_extra_info`` when ``return_dict``."""
        results = self._score(rows, lengths)
        rewards = [reward for reward, _ in results]
        tensor = tensor_of(reward_array(lengths, rewards, width))
        self._examine(rows, rewards, prompts)
        if not return_dict:
            return tensor
        return {"reward_tensor": tensor, "reward_extra_info": union_extra_info([info for _, info in results])}

    def _examine(self, rows: Sequence[Row], rewards: Sequence[float], prompts: Sequence[str] | None) -> None:
        """verl's ``num_examine``: the first samples of each data source, printed."""
        if self.num_examine <= 0:
            return
        printed: dict[str, int] = {}
        for i, (source, text, truth, _) in enumerate(rows):
            key = str(source)
            if printed.get(key, 0) >= self.num_examine:
                continue
            printed[key] = printed.get(key, 0) + 1
            if prompts is not None:
                self.printer(f"[prompt] {prompts[i]}")
            self.printer(f"[response] {text}")
            self.printer(f"[ground_truth] {truth}")
            self.printer(f"[score] {rewards[i]}")
