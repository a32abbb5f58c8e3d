"""What verl gets back for one sample: a dict that also serves verl's tuple convention."""

from __future__ import annotations

from typing import Any

RESULT_KEYS = ("score", "acc", "pred")
"""What every route returns by default: verl's managers collect ``reward_extra_info`` across data
sources, and its reward loop takes the keys of the first sample for the whole batch."""


class VerlScore(dict):
    """A result dict that also answers ``[0]`` with its score and converts with ``float()``.

    verl's naive / DAPO / batch managers and its reward loop read the dict; verl's prime manager
    reads ``float(result[0])`` (a tuple convention), which on a plain dict raises and makes verl score
    the whole batch 0. This dict serves both.
    """

    def __getitem__(self, key: Any) -> Any:
        if key == 0 and not isinstance(key, bool) and 0 not in self:
            return dict.__getitem__(self, "score")
        return dict.__getitem__(self, key)

    def __float__(self) -> float:
        return float(self["score"])

    def __reduce__(self) -> tuple[Any, ...]:
        return (VerlScore, (dict(self),))
