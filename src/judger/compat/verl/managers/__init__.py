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
``manager(data, return_dict=True)``) are served by the same classes, and so are batches without
torch: a :class:`~judger.compat.verl.reward_managers.RewardBatch` (or a mapping with its keys) gives
a NumPy array (``tensor="torch"``: a torch tensor). These three classes are judger's one verl
manager family, a file each as in verl (:mod:`.naive`, :mod:`.batch`, :mod:`.dapo`) over one base
(:mod:`.base`, a file per calling convention); :mod:`judger.compat.verl.reward_managers` is their
torch-free part.

Which judger: verl's or judger's ``default_compute_score`` (verl's default when no
``reward.custom_reward_function`` is set) becomes judger's router by ``data_source``
(:func:`~judger.compat.verl.router.default_judger_config`), with the options bound on it (verl's
``reward.sandbox_fusion`` settings, ``custom_reward_function.reward_kwargs``) applied or refused by
name (:mod:`judger.compat.verl.default_options`); any other ``compute_score`` is called as verl's
managers call it (``async def`` awaited, ``reward_router_address`` / ``reward_model_tokenizer``
passed when verl serves a reward model, ``extra_info`` with verl's ``num_turns``,
``rollout_reward_scores`` and ``tool_extra_fields``, a float result also recorded as ``acc``).
Options come from ``reward.reward_kwargs`` (verl's DAPO reads it too) and the
constructor's keyword arguments: ``compat`` (``"verl"``: verl's scores), ``failure_score`` (the
reward of a sample judger cannot score, logged with its reason: by default ``"lowest"``, the lowest
score its judger gives that sample -- DAPO's -1, a grader's B -- or 0.0 where the judger declares none;
:mod:`judger.core.failure_reward`), ``reward_extra_keys``
(the ``reward_extra_info`` keys; default ``score, acc, pred, judge_failure`` -- ``acc`` makes verl's
headline validation metric ``acc``; ``[]`` keeps it ``reward``), ``judger`` (an import string of a
judger config, judger, or function returning one, replacing the default).
"""

from __future__ import annotations

from judger.compat.verl.managers.batch import BatchRewardManager
from judger.compat.verl.managers.core import OPTION_NAMES
from judger.compat.verl.managers.dapo import DAPORewardManager
from judger.compat.verl.managers.naive import NaiveRewardManager

__all__ = ["OPTION_NAMES", "BatchRewardManager", "DAPORewardManager", "NaiveRewardManager"]
