"""Rollout files with known content for tests of ``judger score``: real rows from the bundled data
and every kind of bad row, as JSON lines."""

from __future__ import annotations

import json
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data"


def mixed_rows() -> list[str]:
    """Real MATH rollouts (groups of 8, split over blocks), GSM8K rows, and every kind of bad row."""
    math = [json.loads(line) for line in (DATA / "math_rollouts_dev.jsonl").read_text().splitlines() if line]
    gsm8k = [json.loads(line) for line in (DATA / "gsm8k_test.jsonl").read_text().splitlines()[:60] if line]
    lines = []
    for i, row in enumerate(math[:240]):
        if i == 17:
            row = {**row, "response": None}  # nothing to judge: FAILED, in either mode
        lines.append(json.dumps(row))
        if i % 50 == 7:
            lines += ["{not json", "", json.dumps({"prompt": "p", "response": "r"}), "[1, 2]"]
    for i, item in enumerate(gsm8k):
        truth = item["answer"].rsplit("####", 1)[1].strip()
        response = item["answer"] if i % 3 else "The answer is #### 1234567"
        row = {
            "data_source": "openai/gsm8k",
            "uid": f"g{i // 4}",
            "prompt": [{"role": "user", "content": item["question"]}],
            "response": response,
            "reward_model": {"ground_truth": truth},
            "extra_info": {"index": i},
            "kept": {"column": i},
        }
        lines.append(json.dumps(row))
    return lines


def parser_warning_apart(err: str) -> tuple[str, list[str]]:
    """``err`` without the warning where latex2sympy cannot parse (verl's antlr4 pin), and that
    warning's lines: printed by whichever process grades first, so its place differs between runs,
    but it is printed as often."""
    lines = err.splitlines(keepends=True)
    warned = [i for i, line in enumerate(lines) if "latex2sympy cannot parse LaTeX here" in line]
    # warnings.warn's line with the indented source line it prints under it, and the log line
    block = {*warned, *(i + 1 for i in warned if lines[i + 1 : i + 2] and lines[i + 1][:1].isspace())}
    return "".join(line for i, line in enumerate(lines) if i not in block), [lines[i] for i in sorted(block)]
