"""InlineScorerJudger: the batch fast path for cheap, bounded scorers (GSM8K, QA exact match).

For a regex over a few hundred characters the scorer costs about a microsecond, so the generic
``preprocess -> run_payloads -> finish`` pipeline (a payload dict, a dedup key, a kwargs merge, an
output check and an awaitable check per sample) would cost several times the scoring itself.
Its :meth:`~InlineScorerJudger.judge_states` (the pass ``batch_judge`` takes: it declares
``judges_states``) does the same work in a few passes over the states: read the responses and
labels, score them, store each output; a sample whose scorer fails fails alone (per ``on_error``).
There is no batch dedup on this path: hashing a response costs about as much as scoring it. A
subclass or an instance given its own ``preprocess`` or ``postprocess`` takes the generic path.

``batch_scorer(responses, labels)`` is the scorer with its options bound, for scorers that do not
read ``extra_info`` and always return valid outputs (judger's own), failing a null response with
``NoResponseError`` themselves; without one, the generic
``scorer(response, label, extra_info, **options)`` is called per sample and its output checked.
Single-sample ``judge`` and the payload methods (used by composed and remote judging) are the
generic ones, and give the same results.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from itertools import repeat
from typing import Any, ClassVar

from judger.core.errors import NoResponseError
from judger.core.outputs import check_output
from judger.core.rollout import RolloutState, direct_writes, write_reward
from judger.presets.base import ScorerJudger

_CHUNK = 256
_YIELD_EVERY = 8 * _CHUNK

BatchScorer = Callable[[Sequence[Any], Sequence[Any]], list[Any]]
"""``batch(responses, labels) -> list`` of output dicts, or the exception of each failed sample."""


def responses_and_labels(fields: Sequence[Mapping[str, Any]]) -> tuple[list[Any], list[Any]]:
    """Each state's response, and its ``reward_model["ground_truth"]`` (None where ``reward_model``
    is not a dict). ``map`` over ``dict.get`` reads them without a Python-level step per state, a
    large share of the work beside a scorer this cheap. A dict subclass is read as a dict; any
    other mapping takes the comprehensions."""
    get: Callable[[Any, str], Any] = dict.get  # fields of any other type raise TypeError here
    try:
        responses = list(map(get, fields, repeat("response")))
        label_of = list(map(get, fields, repeat("reward_model")))
        return responses, list(map(get, label_of, repeat("ground_truth")))
    except TypeError:  # a mapping that is not a dict, or a reward_model that is not one
        labels = [
            rm.get("ground_truth") if isinstance(rm := f.get("reward_model"), dict) else None for f in fields
        ]
        return [f.get("response") for f in fields], labels


class InlineScorerJudger(ScorerJudger):
    """A :class:`ScorerJudger` with a single-pass batch path for inline scorers."""

    judges_states = True
    """Its ``preprocess`` and ``postprocess`` are done by :meth:`judge_states`'s single pass."""
    scores_fields: bool = True
    """``batch_judge`` is exactly :meth:`score_fields` followed by writing each output (or failing
    that sample); overriding any step of that withdraws it."""
    capability_hooks: ClassVar[Mapping[str, tuple[str, ...]]] = {
        **ScorerJudger.capability_hooks,
        "scores_fields": ("batch_judge", "judge_states", "_judge_chunk", "preprocess", "postprocess"),
    }

    def __init__(self, *args: Any, batch_scorer: BatchScorer | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.batch_scorer = batch_scorer
        if self.execution != "inline":  # its scorer runs on the pool: payloads travel there
            self.judges_states = self.scores_fields = False

    def judges_fields(self) -> bool:
        """True when ``batch_judge`` is exactly :meth:`score_fields` followed by writing each output
        (or failing that sample): a caller holding validated field dicts (``/judge``) may then
        score them without building RolloutStates, and gets the same rewards."""
        return self.scores_fields and self.judges_states and self.on_error == "fail"

    def score_fields(self, fields: Sequence[Mapping[str, Any]]) -> list[Any]:
        """The output dict, or the exception of a failed sample, for each state given as its field
        values (a state's instance dict, or the validated fields of a posted state). A null response
        fails with :class:`NoResponseError`, as :meth:`preprocess` fails it on the state path."""
        if self.batch_scorer is not None:
            # a batch scorer fails a null response with NoResponseError itself: no pass of its own
            return self.batch_scorer(*responses_and_labels(fields))
        unanswered = [i for i, f in enumerate(fields) if f.get("response") is None]
        if unanswered:
            answered = [f for f in fields if f.get("response") is not None]
            out = self._generic_batch(answered) if answered else []
            for i in unanswered:
                out.insert(i, NoResponseError())
            return out
        return self._generic_batch(fields)

    def _generic_batch(self, fields: Sequence[Mapping[str, Any]]) -> list[Any]:
        scorer, options, name = self.scorer, self.options, self.judger_name
        out: list[Any] = []
        for f in fields:
            try:
                reward_model = f.get("reward_model")
                label = reward_model.get("ground_truth") if reward_model else None
                extra = (f.get("extra_fields") or {}).get("extra_info") or None
                out.append(check_output(scorer(f.get("response"), label, extra, **options), name))
            except Exception as exc:
                out.append(exc)
        return out

    async def judge_states(self, rollout_states: list[RolloutState]) -> None:
        for lo in range(0, len(rollout_states), _CHUNK):
            if lo and lo % _YIELD_EVERY == 0:
                await asyncio.sleep(0)  # a 100k batch must not starve the event loop
            self._judge_chunk(rollout_states[lo : lo + _CHUNK])

    def _judge_chunk(self, chunk: list[RolloutState]) -> None:
        # Fields live in each state's instance dict: read and write them there, without pydantic's
        # Python-level attribute dispatch, which costs more than scoring a GSM8K answer. Small
        # chunks keep those dicts in cache from the read to the write.
        fields = [state.__dict__ for state in chunk]
        rewards = self.score_fields(fields)
        plain = RolloutState if direct_writes() else None  # write_reward, inlined for a plain state
        for state, values, reward in zip(chunk, fields, rewards):
            if type(reward) is not dict:
                self.capture(state, reward)
            elif type(state) is plain:
                values["reward"] = reward
                state.__pydantic_fields_set__.add("reward")
            else:
                write_reward(state, reward)
