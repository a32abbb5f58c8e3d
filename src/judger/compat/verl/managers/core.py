"""The part of judger's verl reward managers every calling convention shares: options, judger,
row hooks, and the judged rows made what verl records (a reward and its ``reward_extra_info``)."""

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
from judger.core.failure_reward import FailureReward

OPTION_NAMES = (
    "compat",
    "failure_score",
    "reward_extra_keys",
    "judger",
    "max_resp_len",
    "overlong_buffer_cfg",
)


def _check_tensor(tensor: str) -> None:
    if tensor not in ("numpy", "torch"):
        raise ValueError(f"tensor must be 'numpy' or 'torch', got {tensor!r}")
    if tensor == "torch":
        try:
            import torch  # noqa: F401
        except ImportError as exc:
            raise ImportError("tensor='torch' needs torch installed; use the default tensor='numpy'") from exc


class ManagerCore:
    """What every calling convention of a verl manager shares: its options (verl's constructor
    forms, ``reward_kwargs``), its judger, the rows' hooks verl's managers differ in (``extra_info``,
    ``strip``, ``adjust``) and the judged rows made (reward, ``reward_extra_info``) pairs."""

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
