"""`judger eval` on the bundled GSM8K test set against fake servers on 127.0.0.1 (one killed halfway):
every prompt completes, the report equals `judger score` on the written file, and a rerun resumes."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from judger.cli.main import main
from judger.testing.fake_openai import PolicyServer
from judger.trainer.io import example_data, read_rollouts
from judger.trainer.sampler import GSM8K_INSTRUCTION

pytestmark = [pytest.mark.py310, pytest.mark.clients_env]

GSM8K = example_data("gsm8k_test.jsonl")


def answers() -> dict[str, str]:
    key = {}
    for line in GSM8K.read_text().splitlines():
        row = json.loads(line)
        truth = row["answer"].rsplit("####", 1)[1].strip().replace(",", "")
        key[f"{row['question']} {GSM8K_INSTRUCTION}"] = truth
    return key


KEY = answers()


def respond(prompt: str, j: int) -> str:
    """A model that is right on some samples: how often depends on the prompt, so pass@k, maj@k and
    mean@k all differ; sample 5 of some prompts forgets the answer format."""
    truth = KEY[prompt]
    if j == 5 and len(prompt) % 4 == 0:
        return f"The answer is {truth}"
    right = (len(prompt) + j) % 3 != 0
    return f"Step by step... #### {truth if right else int(truth) + 1}"


@pytest.fixture
def servers() -> Iterator[list[PolicyServer]]:
    served = [PolicyServer("policy"), PolicyServer("policy")]
    for s in served:
        s.fake.responder = respond
        s.fake.delay = 0.005
    yield served
    for s in served:
        s.stop()


def kill_when(server: PolicyServer, servers: list[PolicyServer], requests: int) -> threading.Thread:
    """Kill ``server`` once the servers together have taken ``requests`` requests."""

    def watch() -> None:
        deadline = time.monotonic() + 60
        while sum(s.fake.chat_requests for s in servers) < requests and time.monotonic() < deadline:
            time.sleep(0.005)
        server.kill()

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def run_json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, dict[str, Any]]:
    capsys.readouterr()
    code = main(argv)
    out = capsys.readouterr().out
    return code, json.loads(out.strip().splitlines()[-1])


def eval_then_score(
    capsys: pytest.CaptureFixture[str], servers: list[PolicyServer], out: Path, prompts: int, n: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    killer = kill_when(servers[0], servers, prompts // 2)
    argv = ["eval", str(GSM8K), "-n", str(n), "-o", str(out), "--format", "json", "--no-progress"]
    argv += ["--limit", str(prompts), "--concurrency", "16"]
    for s in servers:
        argv += ["--base-url", s.url]
    code, report = run_json(capsys, argv)
    killer.join()
    assert code == 0, report
    code, scored = run_json(capsys, ["score", str(out), "--format", "json", "--no-progress"])
    assert code == 0
    return report, scored


def test_eval_gsm8k_two_servers_one_killed_equals_score(
    servers: list[PolicyServer], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prompts, n = 120, 8
    report, scored = eval_then_score(capsys, servers, tmp_path / "scored.jsonl", prompts, n)
    gen = report["generation"]
    assert gen["prompts"] == prompts and gen["generated_samples"] == prompts * n
    assert gen["failed_samples"] == 0
    assert gen["servers_taken_out"] == {servers[0].url: 1}
    assert servers[0].fake.chat_requests > 0 and servers[1].fake.chat_requests > servers[0].fake.chat_requests
    assert gen["completion_tokens"] > 0 and gen["tokens_per_s"] > 0
    rows = read_rollouts(tmp_path / "scored.jsonl")
    assert len(rows.states) == prompts * n and not rows.errors
    assert len({s.group_id for s in rows.states}) == prompts
    # every prompt, every sample, judged; the report is `judger score`'s on the written file
    assert report["samples"] == prompts * n and report["judged"] == prompts * n and report["skipped"] == 0
    assert report["data_sources"] == scored["data_sources"]
    at_n = report["data_sources"]["openai/gsm8k"]["at_n"]
    assert at_n["n"] == n and 0 < at_n["mean"] < at_n["maj"] < at_n["pass"] == 1.0


def test_eval_resumes_without_generating_again(
    servers: list[PolicyServer], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "scored.jsonl"
    argv = ["eval", str(GSM8K), "-n", "4", "--limit", "30", "-o", str(out), "--format", "json"]
    argv += ["--no-progress", "--base-url", servers[1].url, "--preset", "gsm8k"]
    code, first = run_json(capsys, argv)
    assert code == 0 and servers[1].fake.chat_requests == 30
    lines = out.read_text().splitlines(keepends=True)
    # interrupted: 10 groups written whole, the 11th cut in the middle of a line
    out.write_text("".join(lines[:42]) + lines[42][:25])
    code, second = run_json(capsys, argv)
    assert code == 0
    assert servers[1].fake.chat_requests == 30 + 20  # only the 20 unfinished groups again
    assert second["generation"]["resumed_samples"] == 40 and second["generation"]["generated_samples"] == 80
    assert second["data_sources"] == first["data_sources"]
    assert len(read_rollouts(out).states) == 120


def test_eval_refuses_what_it_cannot_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", str(tmp_path / "none.jsonl"), "--base-url", "http://127.0.0.1:9"]) == 2
    assert "data_files" in capsys.readouterr().err
    assert main(["eval", str(GSM8K), "--base-url", "127.0.0.1:9"]) == 2
    assert "base_urls" in capsys.readouterr().err
    assert main(["eval", str(GSM8K), "--base-url", "http://127.0.0.1:9", "-o", "x.csv"]) == 2
    assert ".jsonl" in capsys.readouterr().err
    # no server answers and no --model: said at once, nothing generated
    code = main(["eval", str(GSM8K), "--base-url", "http://127.0.0.1:9", "--limit", "2", "--no-progress"])
    assert code == 2 and "no server lists its models" in capsys.readouterr().err


def test_eval_parquet_output_and_table(
    servers: list[PolicyServer], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "scored.parquet"
    base = ["eval", str(GSM8K), "-n", "2", "--limit", "5", "--base-url", servers[0].url]
    argv = [*base, "-o", str(out)]
    assert main([*argv, "--no-progress", "--max-tokens", "20", "--temperature", "0.6", "--seed", "1"]) == 0
    text = capsys.readouterr().out
    assert "openai/gsm8k" in text and "tokens/s" in text and "judging" in text
    assert len(read_rollouts(out).states) == 10 and not Path(str(out) + ".partial.jsonl").exists()
    body = servers[0].fake.requests[-1]
    assert body["max_tokens"] == 20 and body["temperature"] == 0.6 and body["seed"] == 1 and body["n"] == 2
    # the completions endpoint without a tokenizer would send the raw text with no chat template
    code = main([*argv, "--no-progress", "--endpoint", "completions", "--preset", "gsm8k"])
    assert code == 2 and servers[0].fake.completion_requests == 0
    err = capsys.readouterr().err
    assert "--endpoint completions" in err and "--tokenizer DIR" in err
    code = main([*argv, "--no-progress", "--endpoint", "completions", "--tokenizer", str(tmp_path)])
    assert code == 2 and f"--tokenizer {tmp_path} gives no local tokenizer" in capsys.readouterr().err


def test_eval_greedy_group_goes_as_requests_of_one(
    servers: list[PolicyServer], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["eval", str(GSM8K), "-n", "4", "--limit", "3", "--temperature", "0", "--format", "json"]
    code, report = run_json(capsys, [*argv, "--no-progress", "--base-url", servers[0].url])
    assert code == 0 and report["generation"]["generated_samples"] == 12
    # vLLM refuses n > 1 with greedy sampling: four requests of one sample per prompt
    bodies = list(servers[0].fake.requests)
    assert len(bodies) == 12 and all(b["n"] == 1 and b["temperature"] == 0 for b in bodies)


def test_eval_reports_truncation_and_generation_failures(
    servers: list[PolicyServer], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "scored.jsonl"
    servers[0].fake.fail_first, servers[0].fake.fail_status = 1, 400  # one group's request refused
    argv = ["eval", str(GSM8K), "-n", "2", "--limit", "4", "--max-tokens", "5", "-o", str(out)]
    argv += ["--no-progress", "--concurrency", "1", "--base-url", servers[0].url]
    code, report = run_json(capsys, [*argv, "--format", "json"])
    assert code == 4
    gen = report["generation"]["by_data_source"]["openai/gsm8k"]
    assert gen["samples"] == 8 and gen["length"] == 6 and gen["stop"] == 0 and gen["generation_failed"] == 2
    assert gen["mean_response_tokens"] == 5.0 and gen["max_response_tokens"] == 5
    ((reason, count),) = gen["top_failure_reasons"]
    assert count == 2 and "HTTP 400" in reason
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    cut = [r for r in rows if r["finish_reason"] == "length"]
    assert len(cut) == 6 and all(r["truncated"] is True and r["response_tokens"] == 5 for r in cut)
    failed = [r for r in rows if r["finish_reason"] == "failed"]
    assert len(failed) == 2 and all(r["truncated"] is False and "response_tokens" not in r for r in failed)
    # the table says it too
    out.unlink()
    servers[0].fake.reset()  # fail_first counts from here again
    assert main(argv) == 4
    table = capsys.readouterr().out
    assert "generation" in table and "gen failed" in table and "2 x " in table and "HTTP 400" in table


@pytest.mark.slow
def test_eval_full_gsm8k_test_set(
    servers: list[PolicyServer], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prompts, n = 1319, 8
    report, scored = eval_then_score(capsys, servers, tmp_path / "scored.jsonl", prompts, n)
    assert report["generation"]["generated_samples"] == prompts * n
    assert report["judged"] == prompts * n and report["data_sources"] == scored["data_sources"]


def test_eval_with_the_progress_bar(servers: list[PolicyServer], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", str(GSM8K), "--limit", "3", "-n", "2", "--base-url", servers[0].url]) == 0
    assert servers[0].fake.chat_requests == 3 and "openai/gsm8k" in capsys.readouterr().out


# --- whose -o file it is ----------------------------------------------------------------------------


def _eval_argv(server: PolicyServer, out: Path, *extra: str) -> list[str]:
    argv = ["eval", str(GSM8K), "--limit", "6", "-o", str(out), "--format", "json", "--no-progress"]
    return [*argv, "--base-url", server.url, "--preset", "gsm8k", *extra]


def test_eval_refuses_an_output_it_did_not_write(
    servers: list[PolicyServer], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "mine.jsonl"
    foreign = "".join(json.dumps({"id": i, "note": "someone else's data"}) + "\n" for i in range(401))
    out.write_text(foreign)
    assert main(_eval_argv(servers[0], out)) == 2
    err = capsys.readouterr().err
    assert "not written by judger eval" in err and "--overwrite" in err
    assert out.read_text() == foreign and servers[0].fake.chat_requests == 0  # not truncated, nothing sent
    code, report = run_json(capsys, _eval_argv(servers[0], out, "--overwrite"))
    assert code == 0 and report["samples"] == 6 and len(out.read_text().splitlines()) == 6


@pytest.mark.parametrize(
    ("changed", "named"),
    [
        (["-n", "2"], "n was 1, this run 2"),
        (["--temperature", "0.7"], "'temperature': 0.7"),
        (["--max-tokens", "64"], "'max_tokens': 64"),
        (["--model", "another"], "model was None, this run 'another'"),
    ],
)
def test_eval_refuses_to_mix_runs_of_other_parameters(
    servers: list[PolicyServer],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    changed: list[str],
    named: str,
) -> None:
    out = tmp_path / "scored.jsonl"
    code, _ = run_json(capsys, _eval_argv(servers[0], out))
    assert code == 0 and servers[0].fake.chat_requests == 6
    before = out.read_text()
    assert main(_eval_argv(servers[0], out, *changed)) == 2
    err = capsys.readouterr().err
    assert "another run" in err and named in err, err
    assert out.read_text() == before and servers[0].fake.chat_requests == 6  # kept, and nothing reused
    # the same parameters resume: nothing generated again
    code, report = run_json(capsys, _eval_argv(servers[0], out))
    assert code == 0 and report["generation"]["resumed_samples"] == 6 and servers[0].fake.chat_requests == 6


def test_eval_refuses_another_input_or_another_served_model(
    servers: list[PolicyServer], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "scored.jsonl"
    code, _ = run_json(capsys, _eval_argv(servers[0], out))
    assert code == 0
    other_input = tmp_path / "gsm8k_copy.jsonl"
    other_input.write_text("\n".join(GSM8K.read_text().splitlines()[1:]) + "\n")
    argv = _eval_argv(servers[0], out)
    argv[1] = str(other_input)
    assert main(argv) == 2 and "the input was a different file" in capsys.readouterr().err
    renamed = PolicyServer("another-policy")
    renamed.fake.responder = respond
    try:
        assert main(_eval_argv(renamed, out)) == 2
        assert "'policy'" in capsys.readouterr().err and renamed.fake.chat_requests == 0
    finally:
        renamed.stop()
