"""Write ``judger_categories.jsonl``: judger's own category cases, from the tables of the tests.

    .venv/bin/python bench/grading/categories.py      # rewrites bench/grading/judger_categories.jsonl

The rows are ``tests/scorers/test_math_forms.py``'s ``CASES`` (each under the category its comment
names), its cases with a prompt that asks for a rounding (``ROUNDING_CASES``), and the huge powers
of ``HUGE_POWERS`` below. ``tests/scorers/test_math_forms.py`` checks that the file is what this
script writes, so a case changed in the tests is a case changed in the benchmark.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
OUT = Path(__file__).with_name("judger_categories.jsonl")
FORMS = ROOT / "tests" / "scorers" / "test_math_forms.py"
ROUNDING_PROMPT = {
    1: "Express your answer as a decimal to the nearest tenth.",
    2: "Express your answer as a decimal to the nearest hundredth.",
    3: "Express your answer as a decimal to the nearest thousandth.",
    "decimal": "Express your answer as a decimal.",
}
HUGE_POWERS = [  # (pred, gold, equal)
    ("(x-a)^{5999}", "(x-a)^{6000}", False),
    ("(a-x)^{6000}", "(x-a)^{6000}", True),
    ("(x-a)^{6000}+1", "(x-a)^{6000}", False),
    ("-(x-a)^{6001}", "(a-x)^{6001}", True),
    ("(x-a)^{6001}", "(a-x)^{6001}", False),
    ("(x^2-1)^{3000}", "(x+1)^{3000}(x-1)^{3000}", True),
    ("(x^2+1)^{3000}", "(x+1)^{3000}(x-1)^{3000}", False),
    ("(1+x)^{3000}", "(x+1)^{3000}", True),
    ("(x-1)^{3000}", "(x+1)^{3000}", False),
    ("2^{4000}(x-1)^{4000}", "(2x-2)^{4000}", True),
    ("2^{3999}(x-1)^{4000}", "(2x-2)^{4000}", False),
    ("2^{999} \\cdot 2", "2^{1000}", True),
    ("2^{1000}+1", "2^{1000}", False),
    ("4^{500}", "2^{1000}", True),
    ("9^{1000}", "3^{2000}", True),
    ("9^{999}", "3^{2000}", False),
    ("10 \\cdot 1000^{333}", "10^{1000}", True),
    ("1000^{333}", "10^{1000}", False),
]


def _row(ref: str, pred: str, gold: str, expected: bool, prompt: str | None = None) -> dict[str, Any]:
    row: dict[str, Any] = {"source": "judger-categories", "licence": "Apache-2.0", "ref": ref}
    if prompt is not None:
        row["prompt"] = prompt
    return {**row, "gold": gold, "pred": pred, "expected": expected}


def _category_of_each_case() -> list[str]:
    """The category comment above each CASES row, in order (``# units`` -> ``units``)."""
    text = FORMS.read_text()
    body = text[text.index("CASES = [") : text.index("\n]\n", text.index("CASES = ["))]
    categories, current = [], "?"
    for line in body.splitlines()[1:]:
        comment = re.match(r"\s*# (\w[\w ]*?)(?::|$)", line)
        if comment is not None:
            current = comment[1]
        elif line.strip().startswith("("):
            categories.append(current)
    return categories


def rows() -> list[dict[str, Any]]:
    sys.path.insert(0, str(ROOT / "tests" / "scorers"))
    import test_math_forms as forms  # type: ignore[import-not-found]

    ref = "tests/scorers/test_math_forms.py"
    out = [
        _row(f"{ref} ({category})", pred, gold, equal)
        for category, (pred, gold, equal) in zip(_category_of_each_case(), forms.CASES, strict=True)
    ]
    out += [
        _row(f"{ref} (a decimal asked for)", pred, gold, equal, ROUNDING_PROMPT[rounding])
        for rounding, pred, gold, equal in forms.ROUNDING_CASES
    ]
    out += [_row(f"{ref} (huge powers)", pred, gold, equal) for pred, gold, equal in HUGE_POWERS]
    return out


def text() -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows())


if __name__ == "__main__":
    OUT.write_text(text())
    print(f"{OUT}: {len(rows())} cases")
