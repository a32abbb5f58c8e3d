"""The contract: RolloutState, BaseJudger / Judger, failures, deadlines and the exception tree.

Nothing here imports any other part of judger."""
