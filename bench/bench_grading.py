"""Answer-equivalence benchmark: judger's MATH grading against its peers, case by case.

    PYTHONPATH=src .venv/bin/python bench/bench_grading.py [--verl-python .venv-clients/bin/python]
        [--markdown docs/grading-benchmark.md] [--show-misses]

Cases: ``bench/grading/*.jsonl``, one ``{source, licence, ref, gold, pred, expected}`` a line (see
``bench/grading/README.md``). Every grader sees the same final answer, as a model would write it:
``The answer is $\\boxed{pred}$.`` against the label ``gold``.

Farmability: the MATH-format cases of ``judger.testing.adversary`` (near misses a policy can write
without solving, and their honest siblings), per rule, through the same graders: how many near
misses each pays, and how many honest answers. judger gets each case's prompt as the user turn;
the peers take only (response, gold), so a rule that depends on the prompt (an order or a decimal
asked for, the question restated) is what it is for them.

Graders:

- judger default and ``compat="verl"``: ``MathJudgerConfig`` through ``batch_judge`` (the process
  pool and its deadline; a FAILED sample counts as a miss and is listed);
- Math-Verify (this environment's): ``parse(\\boxed{gold})``, ``parse(response)``, ``verify``, its
  recommended reward settings;
- verl's ``math_reward``, ``math_verify``, ``prime_math`` and ``math_dapo`` (strict box), run in
  the environment named by ``--verl-python`` (a subprocess, so that their pins stay theirs); left
  out when that interpreter cannot import verl.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT / "bench" / "grading"
DEFAULT_VERL_PYTHON = ROOT.parent.parent / "main" / ".venv-clients" / "bin" / "python"

VERL_RUNNER = r"""
import contextlib, io, json, sys
from verl.utils.reward_score import math_dapo, math_reward, math_verify, prime_math

cases = json.load(sys.stdin)
out = []
for response, gold in cases:
    row = {}
    for name, fn in (
        ("verl math_reward", lambda: math_reward.compute_score(response, gold)),
        ("verl math_verify", lambda: math_verify.compute_score(response, gold)),
        ("verl prime_math", lambda: prime_math.compute_score(response, gold)[0]),
        ("verl math_dapo", lambda: math_dapo.compute_score(response, gold, strict_box_verify=True)["acc"]),
    ):
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                value = fn()
            row[name] = bool(value is True or (not isinstance(value, bool) and float(value) >= 1.0))
        except Exception:
            row[name] = False
    out.append(row)
json.dump(out, sys.stdout)
"""


def load_cases() -> list[dict[str, Any]]:
    rows = []
    for path in sorted(CASES.glob("*.jsonl")):
        rows += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return rows


def response_of(case: dict[str, Any]) -> str:
    """The case's whole response where the source has one, else its answer in a box."""
    if "response" in case:
        return str(case["response"])
    return f"The answer is $\\boxed{{{case['pred']}}}$."


async def judger_verdicts(cases: list[dict[str, Any]], compat: str | None) -> list[bool | None]:
    from judger import RolloutState
    from judger.presets.math import MathJudgerConfig

    judge = MathJudgerConfig(compat="verl" if compat == "verl" else None).build()
    states = [
        RolloutState(
            message=[{"role": "user", "content": c.get("prompt") or "q"}],
            response=response_of(c),
            reward_model={"ground_truth": c["gold"]},
        )
        for c in cases
    ]
    out = await judge.batch_judge(states)
    return [None if s.reward is None else bool(s.reward["acc"]) for s in out]


def math_verify_verdicts(cases: list[dict[str, Any]]) -> list[bool]:
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

    verdicts = []
    for c in cases:
        try:
            gold = parse("\\boxed{" + c["gold"] + "}", [LatexExtractionConfig()])
            pred = parse(response_of(c), [LatexExtractionConfig(), ExprExtractionConfig()])
            verdicts.append(bool(verify(gold, pred)))
        except Exception:
            verdicts.append(False)
    return verdicts


def verl_verdicts(cases: list[dict[str, Any]], python: str) -> dict[str, list[bool]]:
    probe = subprocess.run([python, "-c", "import verl"], capture_output=True, timeout=120)
    if probe.returncode != 0:
        print(f"verl not importable with {python}: its graders are left out", file=sys.stderr)
        return {}
    payload = json.dumps([[response_of(c), c["gold"]] for c in cases])
    done = subprocess.run(
        [python, "-c", VERL_RUNNER], input=payload, capture_output=True, text=True, timeout=1800
    )
    if done.returncode != 0:
        raise SystemExit(f"verl runner failed: {done.stderr[-2000:]}")
    rows = json.loads(done.stdout)
    return {name: [r[name] for r in rows] for name in rows[0]}


def table(cases: list[dict[str, Any]], verdicts: dict[str, list[bool | None]]) -> str:
    sources = sorted({c["source"] for c in cases}, key=lambda s: (s == "judger-categories", s))
    names = list(verdicts)
    lines = [
        "| source (licence) | cases | " + " | ".join(names) + " |",
        "|---|---|" + "---|" * len(names),
    ]
    totals: dict[str, int] = defaultdict(int)
    public_totals: dict[str, int] = defaultdict(int)
    for source in sources:
        idx = [i for i, c in enumerate(cases) if c["source"] == source]
        licence = cases[idx[0]]["licence"]
        cells = []
        for name in names:
            agree = sum(verdicts[name][i] is cases[i]["expected"] for i in idx)
            totals[name] += agree
            if source != "judger-categories":
                public_totals[name] += agree
            cells.append(str(agree))
        lines.append(f"| {source} ({licence}) | {len(idx)} | " + " | ".join(cells) + " |")
    n_public = sum(c["source"] != "judger-categories" for c in cases)
    lines.append(
        f"| **public sources** | {n_public} | " + " | ".join(f"**{public_totals[n]}**" for n in names) + " |"
    )
    lines.append(f"| all | {len(cases)} | " + " | ".join(str(totals[n]) for n in names) + " |")
    return "\n".join(lines)


def misses(cases: list[dict[str, Any]], verdicts: dict[str, list[bool | None]], name: str) -> str:
    out = []
    for i, c in enumerate(cases):
        got = verdicts[name][i]
        if got is not c["expected"]:
            shown = "FAILED" if got is None else str(got)
            others = ", ".join(f"{n}={verdicts[n][i]}" for n in verdicts if n != name)
            pred = c.get("pred") or c["response"][-120:].replace("\n", " ")
            out.append(
                f"- [{c['source']}] gold `{c['gold']}` pred `{pred}`: expected {c['expected']}, "
                f"{name} {shown} ({others})"
            )
    return "\n".join(out)


def _case_line(case: dict[str, Any]) -> str:
    pred = case.get("pred") or "…" + case["response"][-100:].replace("\n", " ")
    return f"`{case['gold']}` vs `{pred}` ({case['source']}, expected {case['expected']})"


def disagreements(cases: list[dict[str, Any]], verdicts: dict[str, list[bool | None]], peer: str) -> str:
    """The cases where judger's default mode and ``peer`` differ, split by which one is right."""
    ours, theirs = verdicts["judger default"], verdicts[peer]
    differ = [i for i in range(len(cases)) if ours[i] != theirs[i]]
    judger_right = [cases[i] for i in differ if ours[i] is cases[i]["expected"]]
    peer_right = [cases[i] for i in differ if theirs[i] is cases[i]["expected"]]
    lines = [
        f"<details><summary>{peer}: {len(judger_right)} cases judger right, {len(peer_right)} {peer} right"
        "</summary>",
        "",
    ]
    lines += [f"- judger right: {_case_line(c)}" for c in judger_right]
    lines += [f"- **{peer} right**: {_case_line(c)}" for c in peer_right]
    lines += ["", "</details>", ""]
    return "\n".join(lines)


def adversary_rows() -> list[dict[str, Any]]:
    """The adversary's MATH-format cases as bench rows: ``expected`` is whether a fair grader pays."""
    from judger.testing.adversary import all_cases

    return [
        {
            "source": "adversary",
            "rule": c.rule,
            "prompt": c.prompt,
            "gold": c.gold,
            "response": c.response,
            "expected": c.paid_if_honest,
            "note": c.note,
        }
        for c in all_cases(formats=["math"])
    ]


def farm_table(rows: list[dict[str, Any]], verdicts: dict[str, list[bool | None]]) -> str:
    """Per rule: near misses paid (of how many), then honest answers paid, by each grader."""
    rules = list(dict.fromkeys(r["rule"] for r in rows))
    names = list(verdicts)
    lines = []
    for honest, title in ((False, "near misses paid (fewer is better)"), (True, "honest answers paid")):
        lines += [
            f"| rule: {title} | cases | " + " | ".join(names) + " |",
            "|---|---|" + "---|" * len(names),
        ]
        for rule in [*rules, None]:
            idx = [i for i, r in enumerate(rows) if r["expected"] is honest and rule in (None, r["rule"])]
            cells = [str(sum(verdicts[n][i] is True for i in idx)) for n in names]
            label = f"`{rule}`" if rule else "**all rules**"
            lines.append(f"| {label} | {len(idx)} | " + " | ".join(cells) + " |")
        lines.append("")
    failed = {n: sum(v is None for v in verdicts[n]) for n in names if any(v is None for v in verdicts[n])}
    if failed:
        lines.append(f"FAILED samples (counted as not paid): {failed}")
    return "\n".join(lines)


def all_verdicts(cases: list[dict[str, Any]], verl_python: str | None) -> dict[str, list[bool | None]]:
    verdicts: dict[str, list[bool | None]] = {}
    verdicts["judger default"] = asyncio.run(judger_verdicts(cases, None))
    verdicts["judger compat=verl"] = asyncio.run(judger_verdicts(cases, "verl"))
    verdicts["Math-Verify 0.9"] = list(math_verify_verdicts(cases))
    if verl_python and Path(verl_python).exists():
        for name, values in verl_verdicts(cases, verl_python).items():
            verdicts[name] = list(values)
    return verdicts


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--verl-python", default=str(DEFAULT_VERL_PYTHON))
    parser.add_argument("--markdown", type=Path, help="write the table (and judger's misses) here")
    parser.add_argument("--show-misses", action="append", default=[], help="list a grader's misses")
    parser.add_argument(
        "--show-farmed", action="append", default=[], help="list the near misses a grader pays"
    )
    args = parser.parse_args()

    cases = load_cases()
    started = time.perf_counter()
    verdicts = all_verdicts(cases, args.verl_python)
    elapsed = time.perf_counter() - started
    text = table(cases, verdicts)
    print(text)
    print(f"\n{len(cases)} cases, {elapsed:.1f} s")
    for name in args.show_misses:
        print(f"\n### {name}: misses\n")
        print(misses(cases, verdicts, name))

    rows = adversary_rows()
    started = time.perf_counter()
    farmed = all_verdicts(rows, args.verl_python)
    farm = farm_table(rows, farmed)
    print(f"\n### Farmability: the adversary's MATH cases\n\n{farm}")
    print(f"{len(rows)} cases, {time.perf_counter() - started:.1f} s")
    for name in args.show_farmed:
        print(f"\n### {name}: near misses paid\n")
        print(
            misses(
                [r for r in rows if not r["expected"]],
                {n: [v for v, r in zip(farmed[n], rows) if not r["expected"]] for n in farmed},
                name,
            )
        )
    if args.markdown:
        parts = [
            text,
            "",
            "### Farmability: near misses paid per rule",
            "",
            farm,
            "",
            "### Where judger's default mode misses",
            "",
            misses(cases, verdicts, "judger default"),
        ]
        parts += ["", "### Where judger's default mode and each peer disagree", ""]
        for name in verdicts:
            if name != "judger default":
                parts.append(disagreements(cases, verdicts, name))
        args.markdown.write_text("\n".join(parts) + "\n")


if __name__ == "__main__":
    main()
