"""The install command docs/install.md gives a trainer's environment, run as written there: a wheel
built from this checkout (``pip wheel --no-deps -w dist .``), installed with ``pip install
"$wheel[math]"`` into a fresh environment that sees the trainers' packages (this tier's verl, TRL and
torch) but not judger; then verl's own loader and TRL's reward call score from the installed copy."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
INSTALL = ROOT / "docs" / "install.md"

# what a trainer does with the installed judger: verl loads the reward function by its config's
# pkg:// path, TRL calls the reward function with its keyword arguments
CHECK = r"""
import judger, trl, verl
from verl.utils.import_utils import load_extern_object
from judger.compat.trl import judger_reward
from judger.trainer import example_data

print(judger.__file__)
score = load_extern_object("pkg://judger.compat.verl", "default_compute_score")
print(score("DigitalLearningGmbH/MATH-lighteval", r"so \boxed{\frac{1}{2}}", "0.5")["score"])
reward = judger_reward("math", failure_reward="lowest", asynchronous=False)
print(reward(prompts=["1+1?"], completions=[r"\boxed{2}"], ground_truth=["2"]))
print(example_data("gsm8k_test.jsonl").is_file())
"""


def docs_commands() -> tuple[str, str]:
    """The two commands of docs/install.md's wheel block, as a reader copies them."""
    text = INSTALL.read_text(encoding="utf-8")
    block = re.search(r"```bash\n(pip wheel --no-deps[^\n]*)\n([^\n]*\$wheel\[math\][^\n]*)\n```", text)
    assert block is not None, "docs/install.md lost its wheel commands"
    return block.group(1), block.group(2)


def trainer_environment(tmp_path: Path) -> Path:
    """A fresh venv whose Python also sees this tier's site-packages, less judger's own files."""
    venv = tmp_path / "trainer-env"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    theirs = Path(sysconfig.get_paths()["purelib"])
    view = tmp_path / "trainer-packages"
    view.mkdir()
    for entry in theirs.iterdir():
        if not re.match(r"(__editable__[._]+)?judger", entry.name):
            (view / entry.name).symlink_to(entry)
    python = venv / "bin" / "python"
    ours = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(ours) / "trainer-packages.pth").write_text(f"{view}\n")
    return venv


@pytest.mark.slow
def test_the_documented_wheel_install_scores_in_a_trainers_environment(tmp_path: Path) -> None:
    build, install = docs_commands()
    venv = trainer_environment(tmp_path)
    env = {**os.environ, "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}", "VIRTUAL_ENV": str(venv)}
    env.pop("PYTHONPATH", None)
    checkout = tmp_path / "judger"  # what a clone holds for a build: the build leaves files in it
    checkout.mkdir()
    shutil.copytree(
        ROOT / "src", checkout / "src", ignore=shutil.ignore_patterns("*.egg-info", "__pycache__")
    )
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, checkout / name)
    for command in (build, install):
        done = subprocess.run(
            ["bash", "-c", command], cwd=checkout, env=env, capture_output=True, text=True, timeout=600
        )
        assert done.returncode == 0, f"{command}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", CHECK],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    location, math_score, trl_rewards, bundled = done.stdout.strip().splitlines()
    assert Path(location).is_relative_to(venv), f"judger came from {location}, not the installed wheel"
    assert float(math_score) == 1.0
    assert trl_rewards == "[1.0]"
    assert bundled == "True"
