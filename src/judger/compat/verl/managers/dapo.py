"""verl's DAPO reward manager (``verl.workers.reward_manager.dapo``) over a judger."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from judger.compat.verl.manager_judger import get_option
from judger.compat.verl.managers.naive import NaiveRewardManager


def overlong_penalty(length: int, max_resp_len: int, buffer_len: int, factor: float) -> float:
    """verl's DAPO overlong penalty (<= 0) for a response of ``length`` valid tokens: linear over the
    last ``buffer_len`` tokens before ``max_resp_len``, ``-factor`` at the limit."""
    exceed = length - (max_resp_len - buffer_len)
    return min(-exceed / buffer_len * factor, 0.0)


class DAPORewardManager(NaiveRewardManager):
    """verl's DAPO manager: a trailing eos stripped, and the overlong penalty of ``overlong_buffer_cfg``.

    ``overlong_buffer_cfg`` (``enable``, ``len``, ``penalty_factor``, ``log``) and ``max_resp_len`` come
    from ``reward.reward_kwargs`` (verl's reward loop) or the constructor (verl's legacy form). The
    eos stripped is the tokenizer's ``eos_token``.
    """

    overlong_penalty: ClassVar[bool] = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.eos_token = getattr(self.tokenizer, "eos_token", None)

    def check_options(self) -> None:
        super().check_options()
        cfg = self.overlong_buffer_cfg
        if cfg is not None and get_option(cfg, "enable", False):
            if self.max_resp_len is None:
                raise ValueError("DAPORewardManager: overlong_buffer_cfg.enable needs max_resp_len")
            if not 0 < int(get_option(cfg, "len", 0)) <= int(self.max_resp_len):
                raise ValueError("DAPORewardManager: overlong_buffer_cfg.len must be in (0, max_resp_len]")

    def extra_info(self, fields: Mapping[str, Any]) -> dict[str, Any]:
        """verl's DAPO manager hands the row's ``extra_info`` as it is."""
        return dict(fields.get("extra_info") or {})

    def extra_infos(self, columns: Mapping[str, Any], n: int) -> list[dict[str, Any]]:
        infos = columns.get("extra_info")
        return [dict((infos[i] if infos is not None else None) or {}) for i in range(n)]

    def strip(self, text: str) -> str:
        eos = self.eos_token
        return text[: -len(eos)] if eos and text.endswith(eos) else text

    def adjust(self, reward: float, length: int, info: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        cfg = self.overlong_buffer_cfg
        if cfg is None or not get_option(cfg, "enable", False):
            return reward, info
        penalty = overlong_penalty(
            length,
            int(self.max_resp_len),
            int(get_option(cfg, "len")),
            float(get_option(cfg, "penalty_factor", 1.0)),
        )
        if get_option(cfg, "log", False):
            info = {**info, "overlong_reward": penalty, "overlong": penalty < 0}
        return reward + penalty, info
