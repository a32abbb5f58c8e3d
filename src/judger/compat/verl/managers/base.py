"""The base of judger's verl reward managers: one class serving verl's calling conventions.

Each convention reduces its batch to ``(data_source, response, ground_truth, extra_info)`` rows and
their valid lengths, judged together by :func:`~judger.compat.verl.batch.score_rows`, and is a file:

- :mod:`.reward_loop`: verl 0.9's reward loop, concurrent ``run_single`` calls of one chunk
  gathered into one batch;
- :mod:`.tensor_call`: verl's legacy ``DataProto`` call (``manager(data, return_dict=True)``, a
  torch reward tensor) and a torch-free
  :class:`~judger.compat.verl.reward_managers.RewardBatch` (a NumPy array);
- :mod:`.core`, what they share: options, judger, row hooks, judged rows made verl's results.

The managers verl names (:mod:`.naive`, :mod:`.batch`, :mod:`.dapo`) are this class with what makes
each one verl's: DAPO declares :attr:`RewardManager.overlong_penalty` and overrides the hooks
(``extra_info``, ``strip``, ``adjust``) it changes.
"""

from __future__ import annotations

from judger.compat.verl.managers.reward_loop import RewardLoop
from judger.compat.verl.managers.tensor_call import TensorCall


class RewardManager(RewardLoop, TensorCall):
    """A verl reward manager over a judger: verl's reward loop (``run_single``), verl's
    ``DataProto`` call, and torch-free batches (:class:`~judger.compat.verl.reward_managers.RewardBatch`)."""
