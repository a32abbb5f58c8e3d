"""The sandbox's default memory limit is written once (``runner.DEFAULT_MEMORY_MB``): changing that
one line moves the code preset, ``judger score`` (by preset and by verl's routing) and verl's code
route together. The child process loads ``runner`` from its source with the line changed, then reads
the limit each way a sample reaches the sandbox."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import judger.runtime.sandbox.runner as runner

pytestmark = pytest.mark.py310

RUNNER = Path(runner.__file__)

CHILD = r"""
import argparse, importlib.util, json, sys
import judger.runtime.sandbox

path, line, changed = sys.argv[1], sys.argv[2], sys.argv[3]
source = open(path, encoding="utf-8").read()
assert source.count(line) == 1, f"{line!r} is not written exactly once in {path}"
spec = importlib.util.spec_from_file_location("judger.runtime.sandbox.runner", path)
module = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = module
exec(compile(source.replace(line, changed), path, "exec"), module.__dict__)
judger.runtime.sandbox.runner = module

import judger.scorers.code as code_scorer
from judger.cli import judging
from judger.compat.verl import default_compute_score
from judger.compat.verl.routes import route_config
from judger.presets.code import CodeJudgerConfig

seen = {}
async def captured(*args, limits, **kwargs):
    seen["verl_code_route"] = limits.memory_mb
    return {"score": 0.0, "acc": False, "pred": None}
code_scorer.score_async = captured

def args(**kw):
    return argparse.Namespace(**{"config": None, "preset": None, "compat": None, "workers": None, **kw})

routed = judging.load_config(args())
out = {
    "preset_field": CodeJudgerConfig().memory_mb,
    "preset_limits": CodeJudgerConfig().limits().memory_mb,
    "judger_score_preset": judging.build(args(preset="code")).limits.memory_mb,
    "judger_score_routed": route_config("code", routed.compat).limits().memory_mb,
    "sandbox_limits": module.SandboxLimits().memory_mb,
}
tests = json.dumps({"inputs": ["\n"], "outputs": ["1\n"]})
default_compute_score("codecontests", "```python\nprint(1)\n```", tests)
out.update(seen)
print(json.dumps(out))
"""


def _limits_with(memory_mb: int) -> dict[str, int]:
    line = f"DEFAULT_MEMORY_MB = {runner.DEFAULT_MEMORY_MB}\n"
    changed = f"DEFAULT_MEMORY_MB = {memory_mb}\n"
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(RUNNER), line, changed], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_changing_the_one_default_moves_every_path_to_the_sandbox() -> None:
    seen = _limits_with(runner.DEFAULT_MEMORY_MB + 333)
    assert set(seen) == {
        "preset_field",
        "preset_limits",
        "judger_score_preset",
        "judger_score_routed",
        "sandbox_limits",
        "verl_code_route",
    }
    assert seen == dict.fromkeys(seen, runner.DEFAULT_MEMORY_MB + 333)


def test_the_default_is_what_each_path_uses_today() -> None:
    assert runner.SandboxLimits().memory_mb == runner.DEFAULT_MEMORY_MB
    from judger.presets.code import CodeJudgerConfig

    assert CodeJudgerConfig().limits().memory_mb == runner.DEFAULT_MEMORY_MB
