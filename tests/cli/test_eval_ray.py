"""`judger eval --ray`: the samples judged on a two-node Ray cluster on this machine give the output
and the report of one process, and a node removed mid-run loses nothing.

The policy servers are fakes in this process; the command runs as a process of its own (this one
may hold a Ray of its own from other tests) against ``judger.testing.ray.local_cluster``.
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

from judger.testing.fake_openai import PolicyServer
from judger.trainer.io import example_data

pytestmark = [pytest.mark.ray]

ray = pytest.importorskip("ray")

GSM8K = example_data("gsm8k_test.jsonl")
# what differs from run to run whatever runs the judging: time, and the servers' pace
TIMING = ("elapsed_s", "samples_per_s")
GENERATION_TIMING = ("tokens_per_s", "generation_s", "judging_s")


def respond(prompt: str, j: int) -> str:
    """Right on some samples, by prompt and sample index (the same answers on every run)."""
    return f"Let me think... #### {len(prompt) % 7 + (j % 3 == 0)}"


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    from judger.testing.ray import local_cluster

    with local_cluster(nodes=2, cpus_per_node=1) as started:
        yield started


@pytest.fixture
def server() -> Iterator[PolicyServer]:
    served = PolicyServer("policy")
    served.fake.responder = respond
    yield served
    served.stop()


def _eval(server: PolicyServer, out: Path, extra: list[str], env: dict[str, str] | None = None) -> Any:
    command = [sys.executable, "-m", "judger", "eval", str(GSM8K), "--base-url", server.url, "-n", "4"]
    command += ["--limit", "48", "-o", str(out), "--format", "json", "--no-progress", *extra]
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})}
    )


def _finished(run: Any) -> tuple[int, dict[str, Any], str]:
    stdout, stderr = run.communicate(timeout=600)
    assert stdout, stderr
    report = json.loads(stdout.splitlines()[-1])
    for key in TIMING:
        report.pop(key)
    for key in GENERATION_TIMING:
        report["generation"].pop(key)
    return run.returncode, report, stderr


def test_eval_judged_on_two_nodes_equals_one_process(
    tmp_path: Path, cluster: Any, server: PolicyServer
) -> None:
    one_out, ray_out = tmp_path / "one.jsonl", tmp_path / "ray.jsonl"
    one = _finished(_eval(server, one_out, []))
    on_ray = _finished(_eval(server, ray_out, ["--ray", cluster.address]))
    assert on_ray[:2] == one[:2]
    assert ray_out.read_bytes() == one_out.read_bytes()
    code, report, _ = one
    assert code == 0 and report["samples"] == 192 and report["judged"] == 192
    assert 0 < report["data_sources"]["openai/gsm8k"]["mean_score"] < 1
    from judger.testing.ray import actors_by_node

    # the judging actors (one per node's CPU) ran on both nodes
    assert len(actors_by_node(cluster, "JudgerActor")) == 2


@pytest.mark.slow
def test_eval_survives_a_node_removed_mid_run(tmp_path: Path, server: PolicyServer) -> None:
    from judger.testing.ray import actors_by_node, local_cluster

    config = tmp_path / "sleepy_config.py"
    config.write_text(
        "import os\nfrom judger import JudgerConfig\n"
        "judger_config = JudgerConfig(judger_name='sleepy', num_threads=2,\n"
        "    reward_handler='judger.testing.handlers:sleepy',\n"
        "    extra_info={'sleep': float(os.environ.get('SLEEP', '0'))})\n"
    )
    one_out, ray_out = tmp_path / "one.jsonl", tmp_path / "ray.jsonl"
    one = _finished(_eval(server, one_out, ["-c", str(config)]))
    with local_cluster(nodes=2, cpus_per_node=1) as cluster:
        worker = next(iter(cluster.worker_nodes))
        # 0.1 s a sample on two threads, two actors: some 5 s of judging
        run = _eval(server, ray_out, ["-c", str(config), "--ray", cluster.address], env={"SLEEP": "0.1"})
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            alive = actors_by_node(cluster, "JudgerActor").get(worker.node_id, [])
            if any(info["State"] == "ALIVE" for info in alive):
                break
            time.sleep(0.2)
        time.sleep(2.0)  # its actor is judging samples
        cluster.remove_node(worker)
        on_ray = _finished(run)
        actors = [info for infos in actors_by_node(cluster, "JudgerActor").values() for info in infos]
    assert on_ray[:2] == one[:2], on_ray[2][-3000:]
    assert ray_out.read_bytes() == one_out.read_bytes()
    assert one[0] == 0 and one[1]["samples"] == 192
    # the removed node's actor died under the run (Ray restarted it; the command's own kill at the
    # end restarts nothing): its payloads were judged again elsewhere
    assert sorted(info["NumRestarts"] for info in actors) == [0, 1]
