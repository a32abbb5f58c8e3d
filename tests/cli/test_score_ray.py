"""`judger score --ray` on a two-node Ray cluster on this machine: the output, the report and the
exit code of one process; a node removed mid-run loses nothing.

The command runs as a process of its own (this one may hold a Ray of its own from other tests), and
the cluster is ``judger.testing.ray.local_cluster``: two raylets, each a node with its own object
store and its own worker processes, as on two machines.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from judger.cli.main import main
from judger.testing.rows import mixed_rows, parser_warning_apart

pytestmark = [pytest.mark.ray]

ray = pytest.importorskip("ray")

# the command as users run it, with small blocks (argv[1]) so that a small file is dozens of them
_COMMAND = """
import sys
from judger.cli import shards
shards.BLOCK_BYTES = int(sys.argv.pop(1))
from judger.cli.main import entry
entry()
"""


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    from judger.testing.ray import local_cluster

    with local_cluster(nodes=2, cpus_per_node=1) as started:
        yield started


def _score(args: list[str], *, block: int = 16 << 10, env: dict[str, str] | None = None) -> tuple[Any, ...]:
    """(exit code, JSON report without its timing, the command's own stderr lines, output bytes)."""
    out = Path(args[args.index("-o") + 1])
    done = subprocess.run(
        [sys.executable, "-c", _COMMAND, str(block), "score", "--no-progress", "--format", "json", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **(env or {})},
    )
    assert done.stdout, done.stderr
    summary = json.loads(done.stdout)
    summary.pop("elapsed_s"), summary.pop("samples_per_s")
    own, _ = parser_warning_apart(done.stderr)
    lines = [line for line in own.splitlines() if line.startswith(("judger score: ", args[0]))]
    return done.returncode, summary, lines, out.read_bytes() if out.exists() else b""


def _block_actors_by_node(cluster: Any) -> dict[str, int]:
    from judger.testing.ray import actors_by_node

    return {node: len(infos) for node, infos in actors_by_node(cluster, "BlockActor").items()}


def test_a_two_node_cluster_scores_the_file_as_one_process_does(tmp_path: Path, cluster: Any) -> None:
    src = tmp_path / "rows.jsonl"
    # a BOM, and Windows line ends in the second half (counted as the text reader counts them)
    lines = mixed_rows()
    half = len(lines) // 2
    src.write_bytes(("\ufeff" + "\n".join(lines[:half]) + "\n" + "\r\n".join(lines[half:]) + "\r\n").encode())
    before = _block_actors_by_node(cluster)

    one = _score([str(src), "--examples", "2", "-o", str(tmp_path / "one.jsonl"), "--shards", "1"])
    on_ray = _score(
        [str(src), "--examples", "2", "-o", str(tmp_path / "ray.jsonl"), "--ray", cluster.address]
    )

    assert on_ray == one
    code, summary, errors, output = one
    # what the comparison covers: bad rows by line number, a null response, groups across blocks
    assert code == 1 and summary["bad_rows"] == 15 and summary["failed"] == 1
    assert "row 9: not valid JSON" in errors[0] and len(summary["examples"]) == 4
    assert summary["data_sources"]["DigitalLearningGmbH/MATH-lighteval"]["at_n"]["n"] == 8
    assert output.count(b"\n") == 300 and src.stat().st_size > (16 << 10) * 8
    # one actor per node's CPU, on both nodes
    after = _block_actors_by_node(cluster)
    started = {node: after[node] - before.get(node, 0) for node in after}
    assert sorted(started.values()) == [1, 1] and len(started) == 2


_HANDLER_CONFIG = """
import os
from judger import JudgerConfig

def length_parity(response, label, extra_info):  # defined here: it travels to the nodes by value
    return {"score": float(len(response or "") % 2 == int(label) % 2), "chars": len(response or "")}

judger_config = JudgerConfig(judger_name="parity", reward_handler=length_parity)
"""


def test_auto_joins_the_running_cluster_and_a_config_file_travels(tmp_path: Path, cluster: Any) -> None:
    config = tmp_path / "parity_config.py"
    config.write_text(_HANDLER_CONFIG)
    src = tmp_path / "rows.jsonl"
    rows = [
        {
            "data_source": "toy",
            "uid": f"u{i // 4}",
            "prompt": "p",
            "response": "x" * i,
            "reward_model": {"ground_truth": str(i % 3)},
        }
        for i in range(400)
    ]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = [str(src), "-c", str(config)]
    one = _score([*args, "-o", str(tmp_path / "one.jsonl")], block=4 << 10)
    # the folder of the config file is on no node's path: only the function's value can get there
    joined = _score(
        [*args, "-o", str(tmp_path / "ray.jsonl"), "--ray", "auto"],
        block=4 << 10,
        env={"RAY_ADDRESS": cluster.address, "PYTHONPATH": ""},
    )
    assert joined == one
    assert one[0] == 0 and one[1]["samples"] == 400 and b'"chars": 399' in one[3]


@pytest.mark.slow
def test_a_node_removed_mid_run_loses_nothing(tmp_path: Path) -> None:
    from judger.testing.ray import local_cluster

    config = tmp_path / "sleepy_config.py"
    config.write_text(
        "import os\nfrom judger import JudgerConfig\n"
        "judger_config = JudgerConfig(judger_name='sleepy', num_threads=4,\n"
        "    reward_handler='judger.testing.handlers:sleepy',\n"
        "    extra_info={'sleep': float(os.environ.get('SLEEP', '0'))})\n"
    )
    src = tmp_path / "rows.jsonl"
    rows = [
        {
            "data_source": "toy",
            "uid": f"u{i // 8}",
            "prompt": "p",
            "response": str(i % 5),
            "reward_model": {"ground_truth": "3"},
        }
        for i in range(1600)
    ]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = [str(src), "-c", str(config)]
    one = _score([*args, "-o", str(tmp_path / "one.jsonl")], block=4 << 10)
    with local_cluster(nodes=2, cpus_per_node=1) as cluster:
        worker = next(iter(cluster.worker_nodes))
        command = [sys.executable, "-c", _COMMAND, str(4 << 10), "score", "--no-progress", "--format", "json"]
        command += [*args, "-o", str(tmp_path / "ray.jsonl"), "--ray", cluster.address]
        # 0.05 s a row on 4 threads, two actors: some 10 s of work, about 100 blocks
        run = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "SLEEP": "0.05"},
        )
        deadline = time.monotonic() + 120
        while worker.node_id not in _alive_block_actors(cluster) and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(2.0)  # its actor is scoring blocks
        cluster.remove_node(worker)
        stdout, stderr = run.communicate(timeout=600)
    summary = json.loads(stdout)
    summary.pop("elapsed_s"), summary.pop("samples_per_s")
    assert (run.returncode, summary, (tmp_path / "ray.jsonl").read_bytes()) == (one[0], one[1], one[3])
    assert one[0] == 0 and one[1]["samples"] == 1600
    # the blocks the lost node held were scored again, and the command says so
    assert "were scored again on other actors; nothing was lost" in stderr, stderr


def _alive_block_actors(cluster: Any) -> set[str]:
    from judger.testing.ray import actors_by_node

    by_node = actors_by_node(cluster, "BlockActor")
    return {node for node, infos in by_node.items() if any(i["State"] == "ALIVE" for i in infos)}


def test_ray_is_refused_where_blocks_would_not_score_alike(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], exact_match_config: Path
) -> None:
    src = tmp_path / "rows.jsonl"
    src.write_text(mixed_rows()[0] + "\n")
    built = tmp_path / "built_judger.py"
    built.write_text(
        "from judger import JudgerConfig\njudger = JudgerConfig(judger_name='x', "
        "reward_handler='judger.testing.handlers:exact_match').build()\n"
    )
    on_actors = tmp_path / "on_actors.py"
    on_actors.write_text(
        "from judger import CPUResourcesConfig, JudgerConfig\njudger_config = JudgerConfig(judger_name='x', "
        "reward_handler='judger.testing.handlers:exact_match', cpu_resources=CPUResourcesConfig())\n"
    )
    cases = [
        ([str(src), "--ray", "--shards", "2"], "--shards and --ray"),
        ([str(src), "-o", str(tmp_path / "out.parquet"), "--ray"], "--ray needs JSONL input and output"),
        ([str(src), "--html", str(tmp_path / "r.html"), "--ray"], "no --html"),
        ([str(src), "-c", str(built), "--ray"], "a judger already built in this process"),
        ([str(src), "-c", str(on_actors), "--ray"], "drop cpu_resources from the config, or --ray"),
        ([str(tmp_path / "missing.jsonl"), "--ray"], "no such file"),
    ]
    connected = ray.is_initialized()
    for args, message in cases:
        assert main(["score", "--no-progress", *args]) == 2
        assert message in capsys.readouterr().err
    assert ray.is_initialized() == connected  # refused before any Ray is started or joined


def test_score_file_is_the_command_from_python(tmp_path: Path, cluster: Any) -> None:
    src = tmp_path / "rows.jsonl"
    src.write_text("\n".join(mixed_rows()[:120]) + "\n")
    script = (
        "import json, sys\nfrom judger.cli.score import score_file\n"
        "done = score_file(sys.argv[1], ray=sys.argv[2], examples=1, output=sys.argv[3])\n"
        "print(json.dumps({'code': done.exit_code, 'report': done.report}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(src), cluster.address, str(tmp_path / "ray.jsonl")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    result = json.loads(done.stdout.splitlines()[-1])
    one = _score([str(src), "--examples", "1", "-o", str(tmp_path / "one.jsonl")])
    result["report"].pop("elapsed_s"), result["report"].pop("samples_per_s")
    assert (result["code"], result["report"]) == one[:2]
    assert (tmp_path / "ray.jsonl").read_bytes() == one[3]


def test_the_progress_bar_counts_rows_and_nodes(tmp_path: Path, cluster: Any) -> None:
    import pty

    src = tmp_path / "rows.jsonl"
    rows = [
        {
            "data_source": "toy",
            "uid": f"u{i // 4}",
            "prompt": "p",
            "response": "1",
            "reward_model": {"ground_truth": "1"},
        }
        for i in range(3000)
    ]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    config = tmp_path / "sleepy_config.py"  # slow enough for the bar to be drawn a few times
    config.write_text(
        "from judger import JudgerConfig\njudger_config = JudgerConfig(judger_name='sleepy', num_threads=8, "
        "reward_handler='judger.testing.handlers:sleepy', extra_info={'sleep': 0.01})\n"
    )
    terminal, stderr = pty.openpty()
    command = [sys.executable, "-c", _COMMAND, str(8 << 10), "score", str(src), "-c", str(config)]
    run = subprocess.Popen([*command, "--ray", cluster.address], stdout=subprocess.PIPE, stderr=stderr)
    os.close(stderr)
    drawn = b""
    while True:  # the terminal's side until the command closes it
        try:
            chunk = os.read(terminal, 65536)
        except OSError:
            break
        if not chunk:
            break
        drawn += chunk
    run.communicate(timeout=60)
    os.close(terminal)
    assert run.returncode == 0
    assert b"rows" in drawn and b"2 nodes, 2 actors" in drawn and b"/3000" not in drawn


_CODE_CONFIG = "from judger import CodeJudgerConfig\njudger_config = CodeJudgerConfig(wall_s=5, cpu_s=5)\n"
_PROGRAMS = [
    "print(int(input()) * 2)",  # right
    "print(int(input()) + 2)",  # right on one test of two
    "import socket\nsocket.create_connection(('127.0.0.1', 22), timeout=1)\nprint(2 * int(input()))",
    "print(open('/etc/hostname').read())",  # no /etc in the sandbox
    "import time\ntime.sleep(0.3)\nprint(int(input()) * 2)",
]


def _sandbox_parents() -> set[int]:
    """Parent pids of the bubblewrap processes running judger's sandboxes now."""
    parents = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            stat = Path(f"/proc/{entry}/stat").read_bytes()
        except OSError:
            continue
        if cmdline.startswith(b"/usr/bin/bwrap\0") and b"/opt/judger-sandbox" in cmdline:
            parents.add(int(stat[stat.rfind(b")") + 2 :].split()[1]))
    return parents


def test_code_rows_run_in_sandboxes_of_every_node(tmp_path: Path, cluster: Any) -> None:
    from judger.runtime.sandbox import bwrap

    if bwrap.probe():
        pytest.skip(f"bubblewrap unavailable: {bwrap.probe()}")
    config = tmp_path / "code_config.py"
    config.write_text(_CODE_CONFIG)
    src = tmp_path / "rows.jsonl"
    tests = {"inputs": ["2\n", "0\n"], "outputs": ["4\n", "0\n"]}
    rows = [
        {
            "data_source": "code",
            "uid": f"c{i // 4}",
            "prompt": "double it",
            "response": f"```python\n{_PROGRAMS[i % len(_PROGRAMS)]}\n```",
            "reward_model": {"ground_truth": json.dumps(tests)},
        }
        for i in range(40)
    ]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = [str(src), "-c", str(config)]
    one = _score([*args, "-o", str(tmp_path / "one.jsonl")], block=1 << 10)
    command = [sys.executable, "-c", _COMMAND, str(1 << 10), "score", "--no-progress", "--format", "json"]
    command += [*args, "-o", str(tmp_path / "ray.jsonl"), "--ray", cluster.address]
    run = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    parents: set[int] = set()
    while run.poll() is None:  # who starts the sandboxes while the command runs
        parents |= _sandbox_parents()
        time.sleep(0.02)
    stdout, _ = run.communicate()
    summary = json.loads(stdout)
    summary.pop("elapsed_s"), summary.pop("samples_per_s")
    assert (run.returncode, summary, (tmp_path / "ray.jsonl").read_bytes()) == (one[0], one[1], one[3])
    assert summary["samples"] == 40 and summary["failed"] == 0
    assert summary["data_sources"]["code"]["mean_score"] == pytest.approx((1 + 0.5 + 0 + 0 + 1) / 5)
    # each node's actor started sandboxes of its own, in its own process
    from judger.testing.ray import actors_by_node

    actor_pids = {
        node: {i["Pid"] for i in infos} for node, infos in actors_by_node(cluster, "BlockActor").items()
    }
    nodes_with_sandboxes = {node for node, pids in actor_pids.items() if pids & parents}
    assert len(nodes_with_sandboxes) == 2, (actor_pids, parents)


_POOL_DRIVER = """
import asyncio, json, sys
import ray
from judger import CodeJudgerConfig, CPUResourcesConfig, RolloutState
ray.init(address=sys.argv[1], log_to_driver=False)
tests = json.dumps({"inputs": ["3\\n"], "outputs": ["6\\n"]})
programs = ["print(int(input()) * 2)", "print(int(input()))"]
states = [
    RolloutState(response=f"```python\\n{programs[i % 2]}\\n```", reward_model={"ground_truth": tests})
    for i in range(24)
]
workers = CPUResourcesConfig(num_workers=2, cpu_memory_per_worker=1 << 28)
pool = CodeJudgerConfig(wall_s=5, cpu_resources=workers).build()
def max_parallel(actor):
    return actor.judger.max_parallel
async def main():
    done = await pool.batch_judge(states)
    stats = [await r.actor_stats() for r in pool.replicas]
    limits = ray.get([r.actor.__ray_call__.remote(max_parallel) for r in pool.replicas])
    return [s.reward["score"] for s in done], stats, limits
scores, stats, limits = asyncio.run(main())
pool.close()
nodes, payloads = [s["node"] for s in stats], [s["payloads"] for s in stats]
print(json.dumps({"scores": scores, "nodes": nodes, "payloads": payloads, "max_parallel": limits}))
"""


def test_a_code_judger_pool_spreads_its_sandboxes_over_the_nodes(cluster: Any) -> None:
    from judger.runtime.sandbox import bwrap

    if bwrap.probe():
        pytest.skip(f"bubblewrap unavailable: {bwrap.probe()}")
    done = subprocess.run(
        [sys.executable, "-c", _POOL_DRIVER, cluster.address], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["scores"] == [1.0, 0.0] * 12
    assert len(set(result["nodes"])) == 2 and all(n > 0 for n in result["payloads"])
    # one CPU each: one sandbox at a time per actor, not one per CPU of the machine
    assert result["max_parallel"] == [1, 1]


def test_no_address_starts_a_local_ray_of_this_machine(tmp_path: Path) -> None:
    src = tmp_path / "rows.jsonl"
    src.write_text("\n".join(mixed_rows()[:80]) + "\n")
    one = _score([str(src), "-o", str(tmp_path / "one.jsonl")], block=4 << 10)
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    command = [sys.executable, "-c", _COMMAND, str(4 << 10), "score", "--no-progress", "--format", "json"]
    done = subprocess.run(
        [*command, str(src), "-o", str(tmp_path / "ray.jsonl"), "--ray"],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    summary = json.loads(done.stdout)
    summary.pop("elapsed_s"), summary.pop("samples_per_s")
    assert (done.returncode, summary, (tmp_path / "ray.jsonl").read_bytes()) == (one[0], one[1], one[3])


_DIES_ONCE_CONFIG = """
import os
from pathlib import Path
from judger import JudgerConfig

FLAG = Path(os.environ["DIES_ONCE_FLAG"])

def dies_once(response, label, extra_info):  # the Ray worker scoring it dies, the first time only
    if response == "die" and not FLAG.exists():
        FLAG.touch()
        os._exit(3)
    return {"score": float(response == str(label))}

judger_config = JudgerConfig(judger_name="dies_once", reward_handler=dies_once, execution="thread")
"""


def test_a_dead_worker_s_message_from_ray_stays_out_of_the_report(tmp_path: Path, cluster: Any) -> None:
    # Ray prints "A worker died or was killed while executing a task..." to the driver's stdout,
    # log_to_driver or not: in the middle of the JSON report (or the rows of -o -) a pipeline reads
    config = tmp_path / "dies_once_config.py"
    config.write_text(_DIES_ONCE_CONFIG)
    src = tmp_path / "rows.jsonl"
    rows = [
        {
            "data_source": "toy",
            "prompt": "p",
            "response": "die" if i == 5 else str(i % 3),
            "reward_model": {"ground_truth": "1"},
        }
        for i in range(12)
    ]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    command = [sys.executable, "-c", _COMMAND, str(1 << 10), "score", "--no-progress", "--format", "json"]
    command += [str(src), "-c", str(config), "-o", str(tmp_path / "ray.jsonl"), "--ray", cluster.address]
    env = {**os.environ, "DIES_ONCE_FLAG": str(tmp_path / "died")}
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
    assert (tmp_path / "died").exists(), done.stderr
    summary = json.loads(done.stdout)  # the report, and nothing else
    assert summary["samples"] == 12 and summary["failed"] == 0, summary
    assert "worker died" in done.stderr, done.stderr  # Ray's message is still told, on stderr
