"""Pure parts of the verifiers: verdict parsing, response cutting, prompt filling."""

from __future__ import annotations

import pytest

from judger.verifiers import (
    GRADER_PROMPT,
    cut_response,
    parse_compass_verdict,
    regex_parser,
    render_prompt,
    split_grading_prompt,
)


@pytest.mark.parametrize(
    ("reply", "verdict"),
    [
        ("A", "A"),
        (" B\n", "B"),
        ("C.", "C"),
        ("(A)", "A"),
        ("reasoning... Final Judgment: \\boxed{B}", "B"),
        ("\\boxed{A} then later \\boxed{ C }", "C"),
        ("Final Judgment: A", "A"),
        ("final judgement: **B**", "B"),
        ("<think>maybe A? or \\boxed{A}</think>B", "B"),
        ("The answer is correct", None),
        ("", None),
        ("D", None),
        ("AB", None),
    ],
)
def test_compass_verdict_rules(reply: str, verdict: str | None) -> None:
    assert parse_compass_verdict(reply) == verdict


def test_regex_parser_takes_last_match_first_group() -> None:
    parse = regex_parser(r"VERDICT:\s*(yes|no)")
    assert parse("VERDICT: no ... VERDICT: yes") == "yes"
    assert parse("nothing") is None
    assert regex_parser(r"[AB]")("xx A yy B") == "B"


def test_cut_response_finish_words_lines_chars() -> None:
    text = "thinking\n" * 50 + "</think>\n" + "\n".join(f"line {i}" for i in range(30)) + "<|im_end|>"
    cut = cut_response(text)
    assert "thinking" not in cut and "<|im_end|>" not in cut
    assert cut.split("\n") == [f"line {i}" for i in range(20, 30)]
    assert cut_response("x" * 5000, finish_words=(), max_lines=None, max_chars=1000) == "x" * 1000
    # the text after the LAST finish word is kept; order of words is applied in turn
    assert cut_response("a </think> b </think> c") == "c"
    assert cut_response("a **Final Answer** b", max_lines=None, max_chars=None) == "b"
    # nothing after the finish word: nothing left to grade
    assert cut_response("long reasoning </think>") == ""


def test_prompt_is_filled_without_format_pitfalls() -> None:
    prompt = render_prompt(
        GRADER_PROMPT, question="Find {x} in \\frac{1}{2}", gold_answer="{response}", response="\\boxed{3}"
    )
    assert "Find {x} in \\frac{1}{2}" in prompt
    # a placeholder inside inserted text is never expanded again
    sections = split_grading_prompt(prompt)
    assert sections == {
        "question": "Find {x} in \\frac{1}{2}",
        "gold_answer": "{response}",
        "response": "\\boxed{3}",
    }
    assert "\\boxed{}" in GRADER_PROMPT  # the template's own LaTeX braces survive
