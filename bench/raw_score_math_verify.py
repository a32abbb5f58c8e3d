"""The floor for `judger score` on MATH: read the JSONL rows and call Math-Verify in a loop."""

import json
import sys

from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

with open(sys.argv[1]) as f:
    rows = [json.loads(line) for line in f if line.strip()]
ok = 0
for r in rows:
    gold = parse("\\boxed{" + r["reward_model"]["ground_truth"] + "}", [LatexExtractionConfig()])
    pred = parse(r["response"], [LatexExtractionConfig(), ExprExtractionConfig()])
    ok += bool(verify(gold, pred))
print(json.dumps({"n": len(rows), "acc": ok / len(rows)}))
