"""`import judger` and `judger score` load only what they use: each check runs in a fresh interpreter,
so a module-level import added anywhere on the path shows up here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

# never needed to import judger or to score a GSM8K file
HEAVY = ("numpy", "ray", "httpx", "rich", "fastapi", "uvicorn", "sympy", "math_verify", "torch", "pyarrow")

PROBE = """
import json, sys
{body}
print(json.dumps(sorted(sys.modules)))
"""

pytestmark = [pytest.mark.py310, pytest.mark.clients_env]


def _loaded(body: str, *args: str) -> set[str]:
    code = PROBE.format(body=body)
    out = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120, check=True
    )
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_import_judger_loads_none_of_the_heavy_dependencies() -> None:
    loaded = _loaded("import judger")
    assert not loaded & set(HEAVY)


def test_import_judger_loads_only_the_package_core() -> None:
    """Every public name is lazy: no pydantic model, no asyncio, no judger subsystem until one is used."""
    loaded = _loaded("import judger")
    assert {"pydantic", "asyncio"}.isdisjoint(loaded)
    assert {m for m in loaded if m.startswith("judger")} == {
        "judger",
        "judger.core",
        "judger.core.errors",
        "judger.core.lazy",
    }


def test_public_names_resolve_on_first_use_and_are_listed() -> None:
    loaded = _loaded(
        "import judger\n"
        "assert set(judger.__all__) <= set(dir(judger))\n"
        "from judger import RolloutState, GSM8KJudgerConfig, build_judger\n"
        "assert RolloutState.__module__ == 'judger.core.rollout'\n"
        "assert judger.RolloutState is RolloutState and judger.build_judger is build_judger\n"
        "assert GSM8KJudgerConfig.__name__ == 'GSM8KJudgerConfig'"
    )
    assert "judger.core.rollout" in loaded


@pytest.mark.parametrize(
    "body",
    [
        "from judger import RolloutState, JudgerConfig, build_judger",
        "from judger.compat.verl import default_compute_score",
        "from judger import GSM8KJudgerConfig",
    ],
)
def test_common_entry_points_load_none_of_the_heavy_dependencies(body: str) -> None:
    assert not _loaded(body) & set(HEAVY)


def test_a_preset_loads_its_own_module_only() -> None:
    loaded = _loaded("from judger import GSM8KJudgerConfig")
    presets = {m for m in loaded if m.startswith("judger.presets.")}
    # base, inline, xtuner_options and scorer_options are the machinery every preset is built on
    assert presets == {
        "judger.presets.gsm8k",
        "judger.presets.base",
        "judger.presets.inline",
        "judger.presets.xtuner_options",
        "judger.presets.scorer_options",
    }


def test_cli_version_and_help_import_no_subcommand() -> None:
    loaded = _loaded(
        "from judger.cli.main import main\n"
        "for argv in (['--version'], ['--help'], []):\n"
        "    try:\n"
        "        main(argv)\n"
        "    except SystemExit:\n"
        "        pass"
    )
    assert not {"judger.cli.score", "judger.cli.serve", "judger.cli.eval", "judger.cli.view"} & loaded
    assert "pydantic" not in loaded


# what each subcommand must not import: the others (``eval`` scores with ``judger.cli.score``)
NOT_IMPORTED = {
    "score": ("serve", "eval", "view"),
    "serve": ("score", "eval", "view"),
    "eval": ("serve", "view"),
    "view": ("score", "serve", "eval"),
}
HELP = (
    "from judger.cli.main import main\ntry:\n    main([sys.argv[1], '--help'])\nexcept SystemExit:\n    pass"
)


@pytest.mark.parametrize("command", sorted(NOT_IMPORTED))
def test_cli_subcommand_imports_only_its_own_module(command: str) -> None:
    loaded = _loaded(HELP, command)
    assert f"judger.cli.{command}" in loaded
    assert not {f"judger.cli.{c}" for c in NOT_IMPORTED[command]} & loaded


def _gsm8k_rows(path: Path, n: int = 40) -> None:
    with path.open("w") as f:
        for i in range(n):
            truth = str(10 + i)
            answer = truth if i % 4 else "0.5"  # every fourth one wrong
            row = {
                "data_source": "openai/gsm8k",
                "prompt": [{"role": "user", "content": f"question {i}"}],
                "response": f"so the answer is\n#### {answer}",
                "reward_model": {"style": "rule", "ground_truth": truth},
                "extra_info": {"index": i, "split": "test"},
            }
            f.write(json.dumps(row) + "\n")


def test_judger_score_on_gsm8k_loads_none_of_the_heavy_dependencies(tmp_path: Path) -> None:
    """The whole command (read, judge on the default routing, report with its metrics, JSON out)."""
    path = tmp_path / "gsm8k.jsonl"
    _gsm8k_rows(path)
    loaded = _loaded(
        "import contextlib, io\n"
        "from judger.cli.main import main\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n"
        "    code = main(['score', sys.argv[1], '--format', 'json'])\n"
        "report = json.loads(out.getvalue())\n"
        "assert code == 0, code\n"
        "assert report['data_sources']['openai/gsm8k']['metrics']['acc'] == {'mean@1': 0.75}, report",
        str(path),
    )
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))
    # nor what only other scorers use: the worker-process pool's multiprocessing, the MATH scorers
    others = {"multiprocessing", "judger.runtime.procpool.shared", "judger.scorers.math.reward"}
    assert not loaded & others, sorted(loaded & others)
