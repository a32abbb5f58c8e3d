"""XTuner's options on a preset config: ``extra_info`` and ``reward_handler``, honoured or refused.

In XTuner a preset is a ``JudgerConfig`` whose ``reward_handler`` reads its options from
``extra_info`` (GSM8K ``{"score", "format_score"}``, GEO3K ``{"format_score", "use_boxed"}``, DAPO
its eos token and overlong settings). judger's presets are typed fields instead, so a ported config
would otherwise have its ``extra_info`` (and a ``reward_handler`` of its own) silently ignored:

- ``extra_info`` keys a preset's XTuner handler reads set the field of that name, with XTuner's
  meaning (given both ways with different values: refused). judger merges them over the preset's
  defaults, where XTuner replaces the whole dict (so a partial dict raises KeyError there).
- ``reward_handler=f`` (a function, import string or URL) is used as XTuner uses it: ``f`` is
  called by keyword with ``extra_info`` = the preset's XTuner options plus any other keys given.
- Anything the built judger would not read is refused when the config is made, by name: other
  ``extra_info`` keys without a handler, handler-only options (``batched``, ``handler_kwargs``,
  ``num_threads``) without one, and scorer-only options (``compat``, ``method``, ...) with one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from judger.judgers.config import JudgerConfig
from judger.judgers.execution import Execution
from judger.judgers.native import NativeJudger

if TYPE_CHECKING:
    from judger.core.judger import Judger

# Options of a NativeJudger's handler: meaningless for a built-in scorer.
_HANDLER_ONLY: dict[str, Any] = {"batched": None, "handler_kwargs": {}, "num_threads": None}


def fold_extra_info(name: str, keys: tuple[str, ...], data: Any) -> Any:
    """Move ``extra_info`` keys that name one of preset ``name``'s XTuner options (``keys``) into
    those fields."""
    if not isinstance(data, dict) or not isinstance(data.get("extra_info"), dict):
        return data
    extra: dict[str, Any] = data["extra_info"]
    moved = {k: v for k, v in extra.items() if k in keys}
    for key, value in moved.items():
        if key in data and data[key] != value:
            raise ValueError(
                f"{name}: {key!r} is given both as a field ({data[key]!r}) and in extra_info "
                f"({value!r}); give it once"
            )
    return {**data, **moved, "extra_info": {k: v for k, v in extra.items() if k not in keys}}


def check_options(cfg: JudgerConfig, keys: tuple[str, ...], compat: str | None) -> None:
    """Refuse every option the judger built from preset config ``cfg`` would not honour, naming it;
    ``keys``: its XTuner ``extra_info`` options, ``compat``: its scorer's mode."""
    name = type(cfg).__name__
    if cfg.reward_handler is None:
        if cfg.extra_info:
            known = ", ".join(keys) if keys else "none"
            raise ValueError(
                f"{name}: extra_info keys {sorted(cfg.extra_info)} are not read by its built-in scorer "
                f"(its XTuner extra_info options: {known}); set them as fields, or pass "
                "reward_handler=... to hand extra_info to a handler of your own"
            )
        for option, default in _HANDLER_ONLY.items():
            if getattr(cfg, option) != default:
                raise ValueError(
                    f"{name}: {option} is an option of a reward_handler, and this config has none; "
                    "remove it or pass reward_handler=..."
                )
        return
    if not keys:
        raise ValueError(
            f"{name} always scores with its own scorer (XTuner has no such preset to take a "
            "reward_handler); use JudgerConfig(judger_name=..., reward_handler=...) for a handler"
        )

    unused = sorted(
        field
        for field in cfg.model_fields_set
        if field not in JudgerConfig.model_fields and field not in keys and field != "execution"
    )
    if compat is not None and "compat" not in unused:
        unused.append("compat")
    if unused:
        raise ValueError(
            f"{name}: {unused} configure the built-in scorer, which reward_handler replaces; a "
            f"handler receives only extra_info ({', '.join(keys)} and your own keys). Remove them, "
            "or drop reward_handler"
        )


def build_with_handler(cfg: JudgerConfig, handler_extra_info: dict[str, Any]) -> Judger:
    """XTuner's preset with a ``reward_handler`` of its own: a NativeJudger over that handler, whose
    ``extra_info`` is the preset's options as XTuner packs them (``handler_extra_info``) under the
    config's own."""

    return NativeJudger(
        judger_name=cfg.judger_name,
        reward_handler=cfg.reward_handler,
        extra_info={**handler_extra_info, **cfg.extra_info},
        request_timeout=cfg.request_timeout,
        on_error=cfg.on_error,
        timeout=cfg.timeout,
        max_concurrency=cfg.max_concurrency,
        batched=cfg.batched,
        handler_kwargs=cfg.handler_kwargs,
        num_threads=cfg.num_threads,
        execution=_handler_execution(cfg),
    )


def _handler_execution(cfg: JudgerConfig) -> Execution:
    """A preset's ``execution`` for the handler that replaces its scorer: "process" as asked; an
    "inline" the user set declares the handler bounded (threads); left alone, judger decides."""
    if cfg.execution == "process":
        return "process"
    return "thread" if "execution" in cfg.model_fields_set else "auto"
