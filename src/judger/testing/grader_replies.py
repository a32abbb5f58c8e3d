"""What a real grader model replied, and whether judger read it as it must: for the test tiers that
run one (vLLM and llama.cpp serving SmolLM2-135M-Instruct). A weak model's verdicts are not
checked for quality, only for how they were read: every reply read, or its sample failed saying
which rule found no verdict; a reply listing several letters never read as one of them; a reply
that opens with a lone letter on its own line, and says nothing else a verdict could stand in,
read as that letter."""

from __future__ import annotations

import re
from typing import Any

from judger.core.rollout import RolloutState, Status
from judger.verifiers.verdicts import read_compass_verdict

Exchange = tuple[str, str]  # (the user prompt sent, the reply's text)
_NAMES = {"A": "correct", "B": "incorrect", "C": "invalid"}
_FAILURE = re.compile(r"(no verdict|the reply gives different verdicts|verdict_pattern)")


async def judge_recorded(
    config: Any, samples: list[RolloutState]
) -> tuple[list[RolloutState], list[Exchange]]:
    """Judge ``samples`` with ``config`` (an LLM verifier's, or a cascade's around one); also every
    exchange its grader had, in order. With ``max_concurrency=1`` (and ``dedup=False``) the i-th
    exchange is the i-th sample sent to the grader."""
    exchanged: list[Exchange] = []
    async with config.build() as judger:
        verifier = getattr(judger, "verifier", judger)
        chat = verifier.pool.chat

        async def recording(messages: list[dict[str, Any]], **params: Any) -> Any:
            reply = await chat(messages, **params)
            exchanged.append((messages[-1]["content"], reply.text))
            return reply

        verifier.pool.chat = recording
        judged = list(await judger.batch_judge(samples))
    return judged, exchanged


def letters_alone(reply: str) -> list[str]:
    """The letters A-C standing alone on a line of ``reply``, in order (a look of its own, not the
    parser's)."""
    return re.findall(r"^\W*([ABC])\W*$", reply, re.MULTILINE)


def opening_letter(reply: str, prompt: str) -> str | None:
    """The letter a reply opens with, alone on its first line, when it is the only letter alone on a
    line, no other verdict form appears, and that line does not repeat one of the prompt's (an
    echo): the one reading the compass grammar must give."""
    lines = [line.strip() for line in reply.splitlines() if line.strip()]
    letters = letters_alone(reply)
    if not lines or not letters or set(letters) != {letters[0]} or re.search(r"(?i)judge?ment|boxed", reply):
        return None
    first = re.fullmatch(r"\W*([ABC])\W*", lines[0])
    if first is None or (len(lines) > 1 and lines[0] in {p.strip() for p in prompt.splitlines()}):
        return None
    return first.group(1)


def check_readings(judged: list[RolloutState], exchanged: list[Exchange], compass: bool = True) -> None:
    """Raise AssertionError where ``judged`` (the samples, each sent to the grader in order) was
    read otherwise than the rules say (see the module docstring)."""
    assert len(judged) == len(exchanged), (len(judged), len(exchanged))
    for state, (prompt, reply) in zip(judged, exchanged):
        if state.status == Status.COMPLETED:
            assert state.reward is not None, state
        else:
            assert state.status == Status.FAILED and state.reward is None, state
            why = (state.error_msg or "").rsplit("': ", 1)[-1]
            assert "VerdictParseError" in (state.error_msg or "") and _FAILURE.match(why), state.error_msg
        if not compass:
            continue
        if len(set(letters_alone(reply))) > 1:  # a list of options: never a verdict
            assert read_compass_verdict(reply, prompt).verdict is None and state.status == Status.FAILED, (
                reply
            )
        letter = opening_letter(reply, prompt)
        if letter is not None:
            assert state.reward is not None and state.reward["verdict"] == _NAMES[letter], (
                reply,
                state.error_msg,
            )
