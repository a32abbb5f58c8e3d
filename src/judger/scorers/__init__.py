"""Pure scoring functions: ``compute_score(solution_str, ground_truth, extra_info=None, *, compat=None,
**options) -> dict`` with at least ``score``, ``acc`` and ``pred``. They know nothing of Ray, HTTP or
processes; the presets decide where they run."""
