"""The floor for `judger score` on MATH rows, streamed: read each JSONL row and call judger's own
MATH scorer (``judger.scorers.math.reward.compute_score``) on it, one row in memory at a time."""

import json
import sys

from judger.scorers.math.reward import compute_score

n = ok = 0
with open(sys.argv[1], encoding="utf-8") as f:
    for line in f:
        if not line.strip():
            continue
        row = json.loads(line)
        n += 1
        ok += compute_score(row["response"], row["reward_model"]["ground_truth"])["acc"]
print(json.dumps({"n": n, "acc": ok / n}))
