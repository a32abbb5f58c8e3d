"""Cutting a long response down to the part a grader with a short context needs: the final answer."""

from __future__ import annotations

from collections.abc import Sequence

DEFAULT_FINISH_WORDS: tuple[str, ...] = ("<conclude>", "**Final Answer**", "</think>")
STRIP_TOKENS: tuple[str, ...] = ("<|im_end|>",)


def cut_response(
    response: str,
    finish_words: Sequence[str] = DEFAULT_FINISH_WORDS,
    max_lines: int | None = 10,
    max_chars: int | None = 1000,
    strip_tokens: Sequence[str] = STRIP_TOKENS,
) -> str:
    """Keep what follows the last occurrence of each finish word (in order), then the last
    ``max_lines`` lines, then the last ``max_chars`` characters.

    Graders are served with short contexts (CompassVerifier: 2048 tokens), and the answer is at the
    end; a response whose text after the finish word is empty gets judged as having no answer.
    """
    text = response
    for token in strip_tokens:
        text = text.replace(token, "")
    for word in finish_words:
        if word and word in text:
            text = text.rsplit(word, 1)[1]
    text = text.strip()
    if max_lines is not None:
        text = "\n".join(text.split("\n")[-max_lines:])
    if max_chars is not None and len(text) > max_chars:
        text = text[-max_chars:]
    return text
