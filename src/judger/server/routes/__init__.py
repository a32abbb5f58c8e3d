"""The server's routes, one module per protocol: :mod:`.reward` (``/reward``), :mod:`.judge`
(``/judge``), :mod:`.get_reward` (``/get_reward``, OpenRLHF) and :mod:`.ops` (``/health``,
``/metrics``). Each judging protocol is a :class:`~.base.JudgeRoute`; ``JUDGE_ROUTES`` lists them."""

from __future__ import annotations

from judger.server.routes import get_reward, judge, ops, reward
from judger.server.routes.base import JudgeRoute

JUDGE_ROUTES: tuple[JudgeRoute, ...] = (reward.ROUTE, judge.ROUTE, get_reward.ROUTE)

__all__ = ["JUDGE_ROUTES", "JudgeRoute", "get_reward", "judge", "ops", "reward"]
