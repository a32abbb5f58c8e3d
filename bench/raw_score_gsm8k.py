"""The floor for `judger score` on GSM8K: read the JSONL rows and call the scorer in a loop."""

import json
import sys

from judger.scorers.math.gsm8k import compute_score

with open(sys.argv[1]) as f:
    rows = [json.loads(line) for line in f if line.strip()]
scores = [compute_score(r["response"], r["reward_model"]["ground_truth"])["score"] for r in rows]
print(json.dumps({"n": len(scores), "mean": sum(scores) / len(scores)}))
