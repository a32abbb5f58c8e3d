"""Reward managers that verl 0.9 loads through its own config, backed by a judger's ``batch_judge``.

verl's trainer builds its reward manager in each reward-loop worker with
``cls(config=config, tokenizer=tokenizer, compute_score=fn, reward_router_address=...,
reward_model_tokenizer=...)`` and calls ``await manager.run_single(one_sample_dataproto)`` for every
sample of a chunk at once; the driver then calls ``cls.assemble_rm_scores(data, scores)``. Point it
here with::

    reward.reward_manager.source=importlib
    reward.reward_manager.module.path=pkg://judger.compat.verl.managers
    reward.reward_manager.name=NaiveRewardManager      # or DAPORewardManager, BatchRewardManager

The concurrent ``run_single`` calls of one chunk are gathered into one ``batch_judge`` call (so
identical answers are graded once and heavy scorers share the process pool). verl's older
``DataProto`` managers (``NaiveRewardManager(tokenizer, num_examine, compute_score, ...)`` called as
``manager(data, return_dict=True)``) are served by the same classes.

Which judger: verl's or judger's ``default_compute_score`` (verl's default when no
``reward.custom_reward_function`` is set) becomes judger's router by ``data_source``
(:func:`~judger.compat.verl.router.default_judger_config`), with the options bound on it (verl's
``reward.sandbox_fusion`` settings, ``custom_reward_function.reward_kwargs``) applied or refused by
name (:mod:`.default_options`); any other ``compute_score`` is called as verl's managers call it
(``async def`` awaited, ``reward_router_address`` / ``reward_model_tokenizer`` passed when verl
serves a reward model, ``extra_info`` with verl's ``num_turns``, ``rollout_reward_scores`` and
``tool_extra_fields``, a float result also recorded as ``acc``).
Options come from ``reward.reward_kwargs`` (verl's DAPO reads it too) and the
constructor's keyword arguments: ``compat`` (``"verl"``: verl's scores), ``failure_score`` (the
reward of a sample judger cannot score, default 0.0, logged with its reason), ``reward_extra_keys``
(the ``reward_extra_info`` keys; default ``score, acc, pred, judge_failure`` -- ``acc`` makes verl's
headline validation metric ``acc``; ``[]`` keeps it ``reward``), ``judger`` (an import string of a
judger config, judger, or function returning one, replacing the default).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from judger.compat.verl.batch import (
    DEFAULT_EXTRA_KEYS,
    FailureLog,
    judge_rows,
    overlong_penalty,
    result_of,
    run_sync,
)
from judger.compat.verl.default_options import DefaultOptions
from judger.core.judger import BaseJudger
from judger.judgers.config import JudgerConfig
from judger.judgers.handlers import import_object

logger = logging.getLogger(__name__)

OPTION_NAMES = (
    "compat",
    "failure_score",
    "reward_extra_keys",
    "judger",
    "max_resp_len",
    "overlong_buffer_cfg",
)


def _get(obj: Any, key: str, default: Any = None) -> Any:
    if obj is None:
        return default
    if isinstance(obj, Mapping) or hasattr(obj, "get"):
        try:
            return obj.get(key, default)
        except Exception:
            pass
    return getattr(obj, key, default)


def _plain(value: Any) -> Any:
    """An OmegaConf node as plain Python (lists, dicts), anything else unchanged."""
    try:
        from omegaconf import DictConfig, ListConfig, OmegaConf

        if isinstance(value, (DictConfig, ListConfig)):
            return OmegaConf.to_container(value, resolve=True)
    except ImportError:
        pass
    return value


def _unwrap_verl_partial(fn: Any) -> tuple[Any, dict[str, Any]]:
    """verl wraps a custom reward function as ``partial(_call_with_kwargs, raw_fn, reward_kwargs)``."""
    if isinstance(fn, functools.partial) and getattr(fn.func, "__name__", "") in (
        "_call_with_kwargs",
        "_call_with_kwargs_async",
    ):
        raw, kwargs = fn.args[0], dict(fn.args[1]) if len(fn.args) > 1 else {}
        return raw, {**kwargs, **(fn.keywords or {})}
    return fn, {}


def _partial_keywords(fn: Any) -> dict[str, Any]:
    """The keywords bound on ``fn`` by ``functools.partial`` (verl binds its SandboxFusion settings so)."""
    keywords: dict[str, Any] = {}
    while isinstance(fn, functools.partial):
        keywords = {**(fn.keywords or {}), **keywords}
        fn = fn.func
    return keywords


def _is_default_compute_score(fn: Any) -> bool:
    """verl's own default scorer, or judger's (however verl loaded it: by package or file path)."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    if getattr(fn, "target", None) == "judger.compat.verl.compute_score:default_compute_score":
        return True
    module = getattr(fn, "__module__", "") or ""
    return getattr(fn, "__name__", "") == "default_compute_score" and module.startswith(
        "verl.utils.reward_score"
    )


def verl_result(result: Any) -> Any:
    """What verl's managers make of a result: a dict as it is; a number is the score and also
    ``acc`` (verl records ``reward_extra_info["acc"] = score`` for a function returning a float)."""
    if isinstance(result, Mapping):
        return result
    if isinstance(result, tuple) and result:
        result = result[0]
    if hasattr(result, "item"):
        result = result.item()
    if isinstance(result, (bool, int, float)):
        return {"score": float(result), "acc": float(result)}
    return result


_TRANSFORMERS_FAST = ("transformers.tokenization_utils_tokenizers", "transformers.tokenization_utils_fast")


def _plain_fast_tokenizer(tokenizer: Any) -> Any:
    """The Rust tokenizer under a transformers fast tokenizer whose ``decode`` is exactly its Rust
    ``decode`` (no override, no clean-up pass), else None."""
    backend = getattr(tokenizer, "_tokenizer", None)
    if backend is None or not hasattr(backend, "decode_batch"):
        return None
    if getattr(tokenizer, "clean_up_tokenization_spaces", True) is not False:
        return None
    for name in ("decode", "batch_decode", "_decode"):
        owner = next((c for c in type(tokenizer).__mro__ if name in vars(c)), None)
        if owner is None or not owner.__module__.startswith(("transformers.tokenization_utils",)):
            return None
        if name == "_decode" and owner.__module__ not in _TRANSFORMERS_FAST:
            return None
    return backend


def decode_all(tokenizer: Any, ids: Sequence[Any]) -> list[str]:
    """``tokenizer.decode(row, skip_special_tokens=True)`` of every row: in one Rust call, on all
    cores, where that is the same thing (a plain fast tokenizer), else row by row."""
    backend = _plain_fast_tokenizer(tokenizer)
    if backend is not None:
        rows = [row.tolist() if hasattr(row, "tolist") else list(row) for row in ids]
        return list(backend.decode_batch(rows, skip_special_tokens=True))
    return [tokenizer.decode(row, skip_special_tokens=True) for row in ids]


class VerlCall:
    """A verl ``compute_score`` called as verl calls it (keywords), as a judger handler."""

    def __init__(self, fn: Callable[..., Any], kwargs: dict[str, Any]) -> None:
        self.fn = fn
        self.kwargs = kwargs

    def __call__(self, data_source: Any, solution_str: Any, ground_truth: Any, extra_info: Any = None) -> Any:
        return verl_result(
            self.fn(
                data_source=data_source,
                solution_str=solution_str,
                ground_truth=ground_truth,
                extra_info=extra_info,
                **self.kwargs,
            )
        )


class AsyncVerlCall(VerlCall):
    """:class:`VerlCall` over an ``async def`` function: awaited, as verl's managers await it."""

    async def __call__(
        self, data_source: Any, solution_str: Any, ground_truth: Any, extra_info: Any = None
    ) -> Any:
        return verl_result(
            await self.fn(
                data_source=data_source,
                solution_str=solution_str,
                ground_truth=ground_truth,
                extra_info=extra_info,
                **self.kwargs,
            )
        )


def _build_judger(option: Any) -> BaseJudger:

    obj = import_object(option) if isinstance(option, str) else option
    if isinstance(obj, BaseJudger):
        return obj
    if hasattr(obj, "build") and not isinstance(obj, type):
        return obj.build()
    if callable(obj):
        return _build_judger(obj())
    raise TypeError(f"reward_kwargs.judger={option!r} is not a judger, a judger config or a factory of one")


class NaiveRewardManager:
    """verl's naive reward manager (reward loop and ``DataProto`` forms) over a judger."""

    _class_initialized = False

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
        **reward_kwargs: Any,
    ) -> None:
        self.config = config
        self.tokenizer = tokenizer
        self.num_examine = num_examine
        self.reward_fn_key = reward_fn_key
        self.reward_router_address = reward_router_address
        self.reward_model_tokenizer = reward_model_tokenizer
        configured = _plain(_get(_get(config, "reward"), "reward_kwargs", {})) or {}
        options = {**dict(configured), **reward_kwargs}
        raw_fn, fn_kwargs = _unwrap_verl_partial(compute_score)
        custom_fn = raw_fn is not None and not _is_default_compute_score(raw_fn)
        # the default function's own options: bound by verl (its SandboxFusion partial) or given in
        # custom_reward_function.reward_kwargs; each is used below or refused by name
        default_kwargs = {} if custom_fn else {**_partial_keywords(raw_fn), **fn_kwargs}
        self.defaults = DefaultOptions.parse(default_kwargs, type(self).__name__)
        self.compat = options.pop("compat", self.defaults.compat)
        if self.compat not in (None, "verl"):
            raise ValueError(f"reward_kwargs.compat must be 'verl' or null, got {self.compat!r}")
        if self.compat != self.defaults.compat:
            self.defaults = replace(self.defaults, compat=self.compat)
        self.failure_score = float(options.pop("failure_score", 0.0))
        self.on_failure = self.defaults.on_failure
        explicit_keys = "reward_extra_keys" in options
        keys = options.pop("reward_extra_keys", DEFAULT_EXTRA_KEYS)
        if self.defaults.as_float and explicit_keys:
            raise ValueError(
                f"{type(self).__name__}: as_float=True makes reward_extra_info {{'acc': score}} as verl "
                "records a float; drop reward_extra_keys or as_float"
            )
        self.reward_extra_keys: tuple[str, ...] = tuple(_plain(keys) or ())
        judger_option = options.pop("judger", None)
        self.max_resp_len = options.pop("max_resp_len", None)
        self.overlong_buffer_cfg = _plain(options.pop("overlong_buffer_cfg", None))
        self.options = options  # for subclasses; anything left is refused below
        if judger_option is not None and (custom_fn or default_kwargs):
            # one of the two would be silently ignored: refuse rather than pick
            what = (
                f"a custom compute_score ({getattr(raw_fn, '__name__', raw_fn)!r})"
                if custom_fn
                else f"default_compute_score options {sorted(default_kwargs)}"
            )
            raise ValueError(
                f"{type(self).__name__}: both reward_kwargs.judger and {what} are set; keep one: drop "
                "custom_reward_function.path (or reward.sandbox_fusion.url), or drop reward_kwargs.judger"
            )
        if judger_option is not None:
            self.judger = _build_judger(judger_option)
        elif not custom_fn:
            self.judger = self.defaults.judger_config().build()
        else:
            # what verl's managers add to every call when a reward model serves (GenRM)
            genrm: dict[str, Any] = {}
            if reward_router_address is not None:
                genrm = {
                    "reward_router_address": reward_router_address,
                    "reward_model_tokenizer": reward_model_tokenizer,
                }
            call_kwargs = {**genrm, **fn_kwargs}  # reward_kwargs win, as in verl's _call_with_kwargs
            handler: Any = raw_fn
            if "solution_strs" not in inspect.signature(raw_fn).parameters:
                is_async = inspect.iscoroutinefunction(raw_fn) or inspect.iscoroutinefunction(
                    getattr(raw_fn, "__call__", None)  # noqa: B004 - an object with an async __call__
                )
                handler = (AsyncVerlCall if is_async else VerlCall)(raw_fn, call_kwargs)
            kwargs = call_kwargs if handler is raw_fn else {}
            self.judger = JudgerConfig(
                judger_name=getattr(raw_fn, "__name__", "compute_score"),
                reward_handler=handler,
                handler_kwargs=kwargs,
            ).build()
        self.failures = FailureLog(type(self).__name__)
        self._pending: list[tuple[tuple[Any, ...], asyncio.Future[Any]]] = []
        self.check_options()

    def check_options(self) -> None:
        unknown = sorted(set(self.options))
        if _get(self.overlong_buffer_cfg, "enable", False) and not isinstance(self, DAPORewardManager):
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
        self, rows: Sequence[tuple[Any, ...]], lengths: Sequence[int]
    ) -> list[tuple[float, dict[str, Any]]]:
        """Judge ``(data_source, response, ground_truth, extra_info)`` rows: (reward, extra info) each."""
        states = run_sync(judge_rows(self.judger, *zip(*rows))) if rows else []
        return self._finish(states, lengths)

    def _finish(self, states: Sequence[Any], lengths: Sequence[int]) -> list[tuple[float, dict[str, Any]]]:
        out = []
        for state, length in zip(states, lengths):
            if state.reward is None:
                if self.on_failure == "raise":
                    raise ValueError(
                        f"{type(self).__name__}: a sample of data_source={state.data_source!r} could not "
                        f"be scored (on_failure='raise'): {state.error_msg}"
                    )
                self.failures.record(state, self.failure_score)
            full = result_of(state, self.failure_score, None)
            info: dict[str, Any]
            if self.defaults.as_float:
                info = {"acc": float(full["score"])}
            else:
                info = {key: full.get(key) for key in self.reward_extra_keys}
            out.append(self.adjust(float(full["score"]), int(length), info))
        return out

    def adjust(self, reward: float, length: int, info: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        """The sample's reward from its score (DAPO adds the overlong penalty)."""
        return reward, info

    # --- verl's reward loop ----------------------------------------------------------------------

    def _row(self, item: Any) -> tuple[tuple[Any, ...], int]:
        response_ids = item.batch["responses"]
        width = response_ids.shape[-1]
        length = int(item.batch["attention_mask"][-width:].sum())
        text = self.tokenizer.decode(response_ids[:length], skip_special_tokens=True)
        rm = item.non_tensor_batch.get("reward_model") or {}
        extra = self.extra_info(item.non_tensor_batch)
        data_source = item.non_tensor_batch[self.reward_fn_key]
        return (data_source, self.strip(text), rm.get("ground_truth"), extra), length

    def _rows(self, data: Any) -> tuple[list[tuple[Any, ...]], list[int]]:
        """Every row of a ``DataProto`` at once: valid lengths from the attention mask in one
        reduction, all responses in one ``batch_decode`` (slicing the batch row by row and decoding
        each was most of a step's time); the same rows as :meth:`_row` gives one by one."""
        responses = data.batch["responses"]
        width = responses.shape[-1]
        lengths = [int(n) for n in data.batch["attention_mask"][:, -width:].sum(dim=-1).tolist()]
        # rows as arrays: transformers checks a list of Python ints element by element before
        # decoding it, which cost more than the decoding itself
        array = responses.detach().cpu().numpy()
        ids = [array[i, :n] for i, n in enumerate(lengths)]
        texts = decode_all(self.tokenizer, ids)
        columns = data.non_tensor_batch
        rows = []
        for i, text in enumerate(texts):
            fields = {key: values[i] for key, values in columns.items()}
            rm = fields.get("reward_model") or {}
            extra = self.extra_info(fields)
            rows.append((fields[self.reward_fn_key], self.strip(text), rm.get("ground_truth"), extra))
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

    def strip(self, text: str) -> str:
        return text

    async def run_single(self, data: Any) -> dict[str, Any]:
        """verl's reward-loop call for one sample; concurrent calls are judged as one batch."""
        row, length = self._row(data[-1:][0])
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
        rows = [p[0][0] for p in pending]
        try:
            states = await judge_rows(self.judger, *zip(*rows))
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

    # --- verl's DataProto managers ---------------------------------------------------------------

    def __call__(self, data: Any, return_dict: bool = False) -> Any:
        """verl's legacy manager call: a ``DataProto`` in, the reward tensor (and extra info) out."""
        import torch

        if "rm_scores" in data.batch.keys():  # noqa: SIM118 - TensorDict refuses `in`
            scores = data.batch["rm_scores"]
            if not return_dict:
                return scores
            keys = data.meta_info.get("reward_extra_keys", [])
            return {"reward_tensor": scores, "reward_extra_info": {k: data.non_tensor_batch[k] for k in keys}}
        rows, lengths = self._rows(data)
        results = self._score(rows, lengths)
        tensor = torch.zeros_like(data.batch["responses"], dtype=torch.float32)
        printed: dict[Any, int] = {}
        for i, ((reward, _), length) in enumerate(zip(results, lengths)):
            if length > 0:
                tensor[i, length - 1] = reward
            source = rows[i][0]
            if printed.get(source, 0) < self.num_examine:
                printed[source] = printed.get(source, 0) + 1
                print(f"[response] {rows[i][1]}\n[ground_truth] {rows[i][2]}\n[score] {reward}")
        if not return_dict:
            return tensor
        extra: dict[str, list[Any]] = {key: [] for key in (results[0][1] if results else {})}
        for _, info in results:
            for key in extra:
                extra[key].append(info.get(key))
        return {"reward_tensor": tensor, "reward_extra_info": extra}


class BatchRewardManager(NaiveRewardManager):
    """verl's batch manager: the whole batch in one judger call (a batch ``compute_score`` included)."""


class DAPORewardManager(NaiveRewardManager):
    """verl's DAPO manager: a trailing eos stripped, and the overlong penalty of ``overlong_buffer_cfg``.

    ``overlong_buffer_cfg`` (``enable``, ``len``, ``penalty_factor``, ``log``) and ``max_resp_len`` come
    from ``reward.reward_kwargs`` (verl's reward loop) or the constructor (verl's legacy form).
    """

    def check_options(self) -> None:
        super().check_options()
        cfg = self.overlong_buffer_cfg
        if cfg is not None and _get(cfg, "enable", False):
            if self.max_resp_len is None:
                raise ValueError("DAPORewardManager: overlong_buffer_cfg.enable needs max_resp_len")
            if not 0 < int(_get(cfg, "len", 0)) <= int(self.max_resp_len):
                raise ValueError("DAPORewardManager: overlong_buffer_cfg.len must be in (0, max_resp_len]")

    def extra_info(self, fields: Mapping[str, Any]) -> dict[str, Any]:
        """verl's DAPO manager hands the row's ``extra_info`` as it is."""
        return dict(fields.get("extra_info") or {})

    def strip(self, text: str) -> str:
        eos = getattr(self.tokenizer, "eos_token", None)
        return text[: -len(eos)] if eos and text.endswith(eos) else text

    def adjust(self, reward: float, length: int, info: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        cfg = self.overlong_buffer_cfg
        if cfg is None or not _get(cfg, "enable", False):
            return reward, info
        penalty = overlong_penalty(
            length, int(self.max_resp_len), int(_get(cfg, "len")), float(_get(cfg, "penalty_factor", 1.0))
        )
        if _get(cfg, "log", False):
            info = {**info, "overlong_reward": penalty, "overlong": penalty < 0}
        return reward + penalty, info
