"""`judger eval`: generate answers to a benchmark on OpenAI-compatible servers, judge them, report.

Sampler -> RolloutController -> judger, then the same per-data_source report as ``judger score``
(mean@n, best@n, maj@n, pass@n, failed, timed out), plus generation figures (tokens/s, time in
generation vs judging). With ``-o scored.jsonl`` every group is appended to the file as soon as it
is judged; run the same command again after an interruption and the groups already written are
not generated again (they are judged again, which is cheap and keeps the report whole).

Exit codes: 0 every prompt read and every sample generated and judged; 1 some input rows could not
be read; 2 nothing could be evaluated (bad input, config or server); 3 some samples failed to be
judged; 4 some samples failed to be generated (see the table's skipped count and the output file),
a completion longer than asked included (:mod:`judger.cli.completion_length`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from judger.cli.completion_length import fail_overlong
from judger.cli.eval_output import OutputConflict, check_served_model, claim_output, run_identity
from judger.cli.generation_report import generation_summary, record_generation, render_generation
from judger.cli.judging import build, score_states
from judger.cli.pools import close_shared_pool as _close_shared_pool
from judger.cli.report import progress_bar, render_summary, summarize
from judger.core.rollout import RolloutState, Status
from judger.presets.loading import ConfigError

EXIT_OK = 0
EXIT_BAD_ROWS = 1
EXIT_UNUSABLE = 2
EXIT_JUDGE_FAILURES = 3
EXIT_GENERATION_FAILURES = 4

_EPILOG = """\
examples:
  judger eval gsm8k_test.jsonl --base-url http://127.0.0.1:8000 -n 8 -o scored.jsonl
  judger eval data.parquet --base-url http://gpu1:8000 --base-url http://gpu2:8000 --preset math
  judger score scored.jsonl        the same report again from the written file

input rows: verl's layout (prompt, data_source, reward_model.ground_truth) or GSM8K's
(question, answer with '#### <number>'); see judger.trainer.sampler.

exit codes: 0 ok; 1 some input rows unreadable; 2 nothing evaluated; 3 some samples failed to be
            judged; 4 some samples failed to be generated
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the arguments of `judger eval`; must stay cheap (no heavy imports here)."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = _EPILOG
    parser.add_argument("input", help="prompts: .jsonl or .parquet (verl's layout, or GSM8K's)")
    parser.add_argument(
        "--base-url",
        action="append",
        required=True,
        metavar="URL",
        help="an OpenAI-compatible server (vLLM, SGLang...); repeat for several (balanced, failed over)",
    )
    parser.add_argument("--model", help="served model name (default: the first of GET /v1/models)")
    parser.add_argument("-n", type=int, default=1, metavar="N", help="samples per prompt (default 1)")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("-c", "--config", metavar="CONFIG", help="judger config, as for `judger score`")
    which.add_argument("--preset", metavar="NAME", help="a built-in judger config, e.g. gsm8k or math")
    parser.add_argument("--compat", choices=("verl",), help="with the default config, as for `judger score`")
    parser.add_argument(
        "-o", "--output", metavar="OUTPUT", help="write every sample (.jsonl resumable; .parquet)"
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="delete an existing -o file that another run (or no judger eval run) wrote, and start over",
    )
    parser.add_argument("--format", choices=("table", "json"), default="table")
    parser.add_argument(
        "--html", metavar="REPORT", help="also write the report as one self-contained HTML file"
    )
    parser.add_argument(
        "--endpoint",
        choices=("chat", "completions"),
        default="chat",
        help="completions: the prompt goes as token ids under --tokenizer's chat template",
    )
    parser.add_argument(
        "--tokenizer",
        metavar="DIR",
        help="the model's tokenizer (a local folder or cached name): its chat template renders "
        "prompts for --endpoint completions (default: --model, when that is a local model folder)",
    )
    parser.add_argument(
        "--row-format", choices=("auto", "verl", "gsm8k"), default="auto", help="input layout (default: auto)"
    )
    parser.add_argument("--limit", type=int, metavar="K", help="only the first K prompts")
    parser.add_argument("--max-tokens", type=int, metavar="T")
    parser.add_argument("--temperature", type=float)
    parser.add_argument("--top-p", type=float)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--stop", action="append", metavar="TEXT", help="a stop string (repeatable)")
    parser.add_argument("--concurrency", type=int, default=64, metavar="G", help="prompts in flight (64)")
    parser.add_argument(
        "--request-timeout", type=float, default=600.0, metavar="S", help="seconds per attempt"
    )
    parser.add_argument("--max-retries", type=int, default=5, metavar="R")
    parser.add_argument(
        "--max-reply-bytes", type=int, metavar="B", help="bytes one server reply may take (default 128 MiB)"
    )
    parser.add_argument(
        "--models-timeout", type=float, metavar="S", help="seconds for GET /v1/models in all (default 10)"
    )
    parser.add_argument("--workers", type=int, metavar="N", help="judging parallelism, as for `judger score`")
    parser.add_argument(
        "--ray",
        nargs="?",
        const="local",
        metavar="ADDRESS",
        help="judge on a Ray cluster, one actor per free CPU (at most --workers), as `judger score "
        "--ray`: ADDRESS, 'auto', or none for a local Ray (put it after the input)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _sample_params(args: argparse.Namespace) -> dict[str, Any]:
    params = {
        "max_tokens": args.max_tokens,
        "temperature": args.temperature,
        "top_p": args.top_p,
        "seed": args.seed,
        "stop": args.stop,
    }
    return {k: v for k, v in params.items() if v is not None}


def _partial_path(output: Path) -> Path:
    """Where groups are appended as they finish: the output itself for JSONL, a sidecar for Parquet."""
    return output if output.suffix.lower() == ".jsonl" else output.with_name(output.name + ".partial.jsonl")


def resume(path: Path, n: int) -> dict[Any, list[Any]]:
    """The groups already written to ``path`` whole (``n`` samples, none failed to generate), by
    group id; the file is rewritten without the others, which will be generated again."""
    from judger.trainer.io import parse_row

    if not path.exists():
        return {}
    lines: dict[Any, list[str]] = {}
    groups: dict[Any, list[Any]] = {}
    with path.open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                (state,), _ = parse_row(json.loads(line), number)
            except Exception:
                continue  # a line cut by the interruption: its group is generated again
            groups.setdefault(state.group_id, []).append(state)
            lines.setdefault(state.group_id, []).append(line if line.endswith("\n") else line + "\n")
    done = {
        gid: states
        for gid, states in groups.items()
        if len(states) == n and all(s.status != Status.FAILED for s in states)
    }
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        for gid in done:
            fh.writelines(lines[gid])
    tmp.replace(path)
    return done


def _refusal(args: argparse.Namespace) -> str | None:
    """Why these arguments cannot run, before anything is loaded; None when they can."""
    if args.n < 1 or args.concurrency < 1 or (args.limit is not None and args.limit < 1):
        return "judger eval: -n, --concurrency and --limit must be >= 1"
    if args.compat and (args.config or args.preset):
        return "judger eval: --compat applies to the default config only (drop -c / --preset)"
    output = Path(args.output) if args.output else None
    if output is not None and output.suffix.lower() not in (".jsonl", ".parquet"):
        return f"judger eval: -o {output}: use .jsonl (resumable) or .parquet"
    return None


def _tokenizer(args: argparse.Namespace) -> tuple[Any, str | None]:
    """The tokenizer --endpoint completions (or --tokenizer) asks for, or why there is none."""
    if not (args.endpoint == "completions" or args.tokenizer):
        return None, None
    from judger.trainer.tokenizer import load_tokenizer

    tokenizer = load_tokenizer(args.tokenizer or args.model)
    if tokenizer is None and (args.tokenizer or args.endpoint == "completions"):
        if args.tokenizer or args.model:
            flag = f"--tokenizer {args.tokenizer}" if args.tokenizer else f"--model {args.model}"
            found = f"{flag} gives no local tokenizer (transformers and a local model folder are needed)"
        else:
            found = "no tokenizer was given"
        return None, (
            "judger eval: --endpoint completions sends prompts under the model's chat template, "
            f"and {found}: give --tokenizer DIR, or use --endpoint chat (the server applies its own)"
        )
    return tokenizer, None


def _configs(args: argparse.Namespace, tokenizer: Any, greedy_n: bool) -> tuple[Any, Any, Any]:
    """The sampler, the rollout controller's config and the agent loop's config."""
    from judger.trainer.agent_loop import SingleTurnAgentLoopConfig
    from judger.trainer.controller import RolloutControllerConfig
    from judger.trainer.sampler import SamplerConfig

    sampler = SamplerConfig(
        data_files=[Path(args.input)],
        row_format=args.row_format,
        n=args.n,
        shuffle=False,
        limit=args.limit,
    ).build(tokenizer=tokenizer)
    controller_cfg = RolloutControllerConfig(
        base_urls=args.base_url,
        model=args.model,
        endpoint=args.endpoint,
        max_concurrency=max(args.concurrency, 1),
        request_timeout=args.request_timeout,
        max_retries=args.max_retries,
        **{k: v for k in ("max_reply_bytes", "models_timeout") if (v := getattr(args, k)) is not None},
        # token ids give each row its token counts; logprobs slow the server down markedly,
        # for numbers evaluation never reads
        logprobs=False,
    )
    params = _sample_params(args) | ({"n": 1} if greedy_n else {})
    return sampler, controller_cfg, SingleTurnAgentLoopConfig(sample_params=params)


def _say_bad_rows(source: str, errors: list[Any]) -> None:
    for error in errors[:20]:
        _say(f"{source}: {error}")
    if len(errors) > 20:
        _say(f"... and {len(errors) - 20} more bad rows")


class _Generation:
    """One eval's generation and judging: resumed samples judged again, the others generated in
    groups, each group appended to the partial file as soon as it is judged."""

    def __init__(
        self,
        args: argparse.Namespace,
        groups: list[list[RolloutState]],
        done: dict[Any, list[RolloutState]],
        judger: Any,
    ) -> None:
        self.args = args
        self.groups = groups
        self.done = done
        self.todo = [g for g in groups if g[0].group_id not in done]
        self.resumed = [s for g in groups if g[0].group_id in done for s in done[g[0].group_id]]
        self.finished: dict[Any, list[RolloutState]] = {}
        self.judger = judger
        self.controller: Any = None
        self.agent: Any = None
        self.sink: Any = None
        self.rejudge_s = 0.0

    def states(self) -> list[RolloutState]:
        """Every sample in the input's order, resumed or generated now."""
        return [
            s
            for g in self.groups
            for s in (self.done.get(g[0].group_id) or self.finished.get(g[0].group_id) or [])
        ]

    async def _one(self, group: list[RolloutState], slots: asyncio.Semaphore, advance: Any) -> None:
        from judger.trainer.agent_loop import run_judger
        from judger.trainer.io import json_default, state_to_row

        async with slots:
            states = await self.agent.generate_group(group)  # the agent has no judger: judged here
            # a completion longer than asked is a broken reply: failed, never judged
            fail_overlong(states, self.args.max_tokens)
            judging = time.perf_counter()
            await run_judger(self.judger, states, enable_batch_judge=self.agent.config.enable_batch_judge)
            self.agent.timings["judge_s"] += time.perf_counter() - judging
        for state in states:
            record_generation(state)
        self.finished[group[0].group_id] = states
        if self.sink is not None:
            self.sink.write(
                "".join(
                    json.dumps(state_to_row(s), ensure_ascii=False, default=json_default) + "\n"
                    for s in states
                )
            )
            self.sink.flush()
        advance(len(states))

    async def _main(self, advance: Any, output: Path | None) -> None:
        await self.controller.resolve_model()
        if output is not None:
            check_served_model(output, self.controller.model)
        slots = asyncio.Semaphore(self.args.concurrency)
        t0 = time.perf_counter()
        to_rejudge = [s for s in self.resumed if s.status == Status.COMPLETED]
        if to_rejudge:
            await score_states(self.judger, to_rejudge, 256)
        self.rejudge_s = time.perf_counter() - t0
        advance(len(self.resumed))
        await asyncio.gather(*(self._one(g, slots, advance) for g in self.todo))

    async def run_all(self, output: Path | None, err: Any) -> None:
        args = self.args
        try:
            with progress_bar(
                "eval", len(self.groups) * args.n, err, enabled=not args.no_progress
            ) as advance:
                await self._main(advance, output)
        finally:
            await self.controller.aclose()
            await self.judger.aclose()
            _close_shared_pool()


def _summary(
    args: argparse.Namespace, gen: _Generation, states: list[RolloutState], elapsed: float, sampler: Any
) -> dict[str, Any]:
    """``judger score``'s summary with the generation figures under ``generation``."""
    from judger.trainer.metrics import compute_validation_metrics

    summary = summarize(states, elapsed, compute_validation_metrics(states), bad_rows=sampler.errors)
    stats = gen.controller.stats
    summary = {
        "input": str(args.input),
        **summary,
        "generation": {
            "servers": args.base_url,
            "model": gen.controller.model,
            "prompts": len(gen.groups),
            "resumed_samples": len(gen.resumed),
            "generated_samples": stats.samples,
            "failed_samples": sum(1 for s in states if "generation_failure" in s.extra_fields),
            "requests": stats.requests,
            "retries": stats.retries,
            "completion_tokens": stats.completion_tokens,
            "tokens_per_s": round(stats.completion_tokens / elapsed, 1) if elapsed > 0 else None,
            "generation_s": round(gen.agent.timings["generate_s"], 3),
            "judging_s": round(gen.agent.timings["judge_s"] + gen.rejudge_s, 3),
            "servers_taken_out": {s.url: s.taken_out for s in gen.controller.servers if s.taken_out},
            "by_data_source": generation_summary(states),
        },
    }
    if sampler.errors:
        summary["bad_row_errors"] = [{"row": e.row, "message": e.message} for e in sampler.errors]
    return summary


def _write_output(output: Path, partial: Path, states: list[RolloutState]) -> bool:
    """Write every sample to ``output`` in the input's order; False (said) when it cannot."""
    from judger.trainer.io import write_rollouts

    # the file was appended in the order groups finished; it ends in the input's order, so that
    # `judger score` on it averages in the same order and reports the same numbers to the bit
    try:
        final = output.with_name(output.name + ".tmp" + output.suffix)
        write_rollouts(final, states)
        final.replace(output)
        if partial != output:
            partial.unlink(missing_ok=True)
    except Exception as exc:
        _say(f"judger eval: cannot write {output}: {type(exc).__name__}: {exc}")
        return False
    return True


def _render(args: argparse.Namespace, summary: dict[str, Any], out: Any, wrote: str | None) -> None:
    if args.format == "json":
        sys.stdout.write(json.dumps(summary, ensure_ascii=False, default=str) + "\n")
        return
    g = summary["generation"]
    out.print(f"judger eval: {args.input} on {len(args.base_url)} server(s), model {g['model']}")
    render_summary(summary, out, title="judger eval")
    render_generation(g["by_data_source"], out)
    out.print(
        f"generation: {g['completion_tokens']} tokens, {g['tokens_per_s']} tokens/s; "
        f"{g['requests']} requests, {g['retries']} retries, {g['failed_samples']} samples failed; "
        f"time summed over prompts: generation {g['generation_s']:.1f} s, judging {g['judging_s']:.1f} s"
    )
    if wrote is not None:
        out.print(wrote)


def _exit_code(summary: dict[str, Any], write_failed: bool, bad_rows: bool) -> int:
    if write_failed:
        return EXIT_UNUSABLE
    if bad_rows:
        return EXIT_BAD_ROWS
    if summary["failed"] or summary["timed_out"]:
        return EXIT_JUDGE_FAILURES
    if summary["generation"]["failed_samples"]:
        return EXIT_GENERATION_FAILURES
    return EXIT_OK


def _claim(args: argparse.Namespace, output: Path, partial: Path, judger: Any) -> bool:
    """Claim ``output`` for this run (only this run's own earlier samples are resumed: see
    judger.cli.eval_output); False (said, the judger closed) when another run's file is there."""
    try:
        claim_output(
            output,
            partial,
            run_identity(args.input, args.model, _sample_params(args), args.n, args.endpoint),
            args.overwrite,
        )
    except OutputConflict as exc:
        judger.close()
        _say(f"judger eval: {exc}")
        return False
    return True


def _generate(gen: _Generation, output: Path | None, partial: Path | None, err: Any) -> int | None:
    """Run the generation; the exit code when it stopped early, None when it ran to the end."""
    from judger.trainer.controller import GenerationError

    gen.sink = partial.open("a", encoding="utf-8") if partial is not None else None
    try:
        asyncio.run(gen.run_all(output, err))
    except KeyboardInterrupt:
        where = f"; run the same command again to resume from {partial}" if partial else ""
        _say(f"judger eval: interrupted{where}")
        return 130
    except GenerationError as exc:
        _say(f"judger eval: {exc}")
        return EXIT_UNUSABLE
    except Exception as exc:
        _say(f"judger eval: stopped: {type(exc).__name__}: {exc}")
        return EXIT_UNUSABLE
    finally:
        if gen.sink is not None:
            gen.sink.close()
    return None


def _ray_judger(args: argparse.Namespace) -> Any:
    from judger.cli.ray_eval import build as build_on_ray

    return build_on_ray(args)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from judger.trainer.agent_loop import SingleTurnAgentLoop
    from judger.trainer.io import InputError

    out = Console() if sys.stdout.isatty() else Console(width=160)
    err = Console(stderr=True)
    refusal = _refusal(args)
    if refusal is not None:
        _say(refusal)
        return EXIT_UNUSABLE
    output = Path(args.output) if args.output else None
    greedy_n = args.n > 1 and args.temperature == 0
    if greedy_n:
        # vLLM refuses n > 1 with greedy sampling (HTTP 400): the group goes as n requests of one
        _say(f"judger eval: --temperature 0 -n {args.n}: sent as {args.n} requests of n=1 per prompt")
    tokenizer, missing = _tokenizer(args)
    if missing is not None:
        _say(missing)
        return EXIT_UNUSABLE
    try:
        sampler, controller_cfg, loop_cfg = _configs(args, tokenizer, greedy_n)
    except (InputError, ValueError) as exc:
        _say(f"judger eval: {exc}")
        return EXIT_UNUSABLE
    _say_bad_rows(args.input, sampler.errors)
    if not len(sampler):
        _say(f"judger eval: {args.input}: no prompts to evaluate")
        return EXIT_UNUSABLE
    try:
        judger = build(args) if args.ray is None else _ray_judger(args)
    except ConfigError as exc:
        _say(f"judger eval: {exc}")
        return EXIT_UNUSABLE

    partial = _partial_path(output) if output is not None else None
    if output is not None and partial is not None and not _claim(args, output, partial, judger):
        return EXIT_UNUSABLE
    done = resume(partial, args.n) if partial is not None else {}
    gen = _Generation(args, list(sampler.groups()), done, judger)
    if done:
        _say(f"judger eval: resuming: {len(gen.resumed)} samples of {len(done)} prompts already in {partial}")
    gen.controller = controller_cfg.build()
    gen.agent = SingleTurnAgentLoop(loop_cfg, gen.controller)
    start = time.perf_counter()
    stopped = _generate(gen, output, partial, err)
    if stopped is not None:
        return stopped
    elapsed = time.perf_counter() - start

    states = gen.states()
    summary = _summary(args, gen, states, elapsed, sampler)
    write_failed = False
    if output is not None and partial is not None:
        write_failed = not _write_output(output, partial, states)
    if args.html:
        from judger.cli.html_report import write_report

        write_failed = not write_report(args.html, summary, states, "judger eval") or write_failed
    wrote = f"wrote {len(states)} rows to {output}" if output is not None and not write_failed else None
    _render(args, summary, out, wrote)
    return _exit_code(summary, write_failed, bool(sampler.errors))
