"""Grading prompts for LLM verifiers, and a brace-safe way to fill them in.

The section markers (``<Original Question Begin>`` ... ``<Predicted End>``) follow the structure
CompassVerifier was trained on; the instructions around them are our own wording. Templates are
filled by replacing ``{question}``, ``{gold_answer}`` (alias ``{label}``) and ``{response}`` only,
so LaTeX braces in a template (``\\boxed{}``) or in the filled-in text never break formatting.
"""

from __future__ import annotations

import re

QUESTION_BEGIN = "<Original Question Begin>:"
QUESTION_END = "<Original Question End>"
GOLD_BEGIN = "<Gold Target Begin>:"
GOLD_END = "<Gold Target End>"
RESPONSE_BEGIN = "<Predicted Answer Begin>:"
RESPONSE_END = "<Predicted End>"

GRADER_PROMPT = f"""You are grading an answer against a reference. Decide whether the candidate's final \
answer agrees with the gold answer, and reply with a single letter.

Rules:
1. The gold answer is correct by definition. Never question it.
2. Compare only the candidate's final answer. Ignore its reasoning, working and style.
3. Accept answers equivalent to the gold answer: another notation, order, form or unit spelling that \
denotes the same value or meaning.
4. When the question has several parts, the answer is correct only if every part agrees.
5. Ignore wrappers such as \\boxed{{}} around the answer.
6. The response is invalid when it stops before giving a final answer, repeats itself without end, \
refuses to answer, or does not address the question.

Reply with one letter and nothing else:
A: CORRECT - the final answer agrees with the gold answer.
B: INCORRECT - a final answer is given and it disagrees with the gold answer.
C: INVALID - there is no usable final answer (see rule 6).

{QUESTION_BEGIN}
{{question}}
{QUESTION_END}

{GOLD_BEGIN}
{{gold_answer}}
{GOLD_END}

{RESPONSE_BEGIN}
{{response}}
{RESPONSE_END}

Your verdict (A, B or C):"""

_FIELD = re.compile(r"\{(question|gold_answer|label|response)\}")

# the section markers, however spelled (case, spaces, a slash): a grader reads any of them as one
_MARKER = re.compile(
    r"<(\s*/?\s*(?:original\s*question|gold\s*target|predicted(?:\s*answer)?)\s*(?:begin|end)\s*)>", re.I
)


# the control tokens of common chat templates (ChatML / Qwen / Llama 3 / Phi ``<|...|>``, Llama 2 /
# Mistral ``<s>`` and ``[INST]``, Gemma's turns): a server renders the grader's chat with its template
# and then tokenizes the text, special tokens included, so one of these in a response becomes a real
# control token there (checked on vLLM with SmolLM2's ChatML template: ``<|im_start|>`` in a message's
# content is token 1, the template's own)
_CONTROL = re.compile(r"<(\|[^<>|\s]{1,64}\|)>|<(/?s)>|<((?:start|end)_of_turn)>|\[(/?INST)\]")


def _inert(match: re.Match[str]) -> str:
    inner = next(group for group in match.groups() if group is not None)
    return f"\u2039{inner}\u203a"


def defang(text: str) -> str:
    """``text`` with the prompt's section markers made inert (``<Predicted End>`` becomes
    ``‹Predicted End›``): a response that writes one would otherwise close its own section and open
    a forged one -- a second gold target, say -- for the grader to read. The control tokens of chat
    templates (``<|im_end|>``, ``<|im_start|>``, ``<s>``, ``[INST]``...) are made inert the same way
    (``‹|im_start|›``): written into a response, they would close the grader's user turn and forge
    an assistant turn holding a verdict. Honest answers never contain them, so for those nothing
    changes."""
    text = _MARKER.sub(lambda m: f"\u2039{m.group(1)}\u203a", text)
    return _CONTROL.sub(_inert, text)


def render_prompt(template: str, *, question: str, gold_answer: str, response: str) -> str:
    """Fill ``template`` in one pass, so text inserted for one field is never scanned for another."""
    values = {"question": question, "gold_answer": gold_answer, "label": gold_answer, "response": response}
    return _FIELD.sub(lambda m: values[m.group(1)], template)


def check_template(template: str) -> str:
    """Reject a template that cannot show the grader the response."""
    if "{response}" not in template:
        raise ValueError(
            "prompt_template must contain '{response}' (and usually '{question}', '{gold_answer}')"
        )
    return template


def _between(text: str, begin: str, end: str) -> str | None:
    start = text.find(begin)
    if start < 0:
        return None
    start += len(begin)
    stop = text.find(end, start)
    if stop < 0:
        return None
    return text[start:stop].strip("\n")


def split_grading_prompt(text: str) -> dict[str, str] | None:
    """The (question, gold_answer, response) sections of a prompt built on our markers, or None."""
    gold = _between(text, GOLD_BEGIN, GOLD_END)
    response = _between(text, RESPONSE_BEGIN, RESPONSE_END)
    if gold is None or response is None:
        return None
    return {
        "question": _between(text, QUESTION_BEGIN, QUESTION_END) or "",
        "gold_answer": gold,
        "response": response,
    }
