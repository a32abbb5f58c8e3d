"""`judger score`: score a rollouts file and report per data_source.

Exit codes: 0 every row read and every sample judged; 1 some input rows could not be read (the rest
were scored); 2 nothing could be scored (unreadable file, bad config), scoring stopped on an
exception, or the output could not be written; 3 some samples failed to be judged (error or
timeout; see the table).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from judger.cli import process
from judger.cli.judging import build, load_config, score_states
from judger.cli.pools import close_shared_pool, start_pools
from judger.cli.report import progress_bar, render_examples, render_summary
from judger.core.rollout import Status
from judger.presets.loading import ConfigError

EXIT_OK = 0
EXIT_BAD_ROWS = 1
EXIT_UNUSABLE = 2
EXIT_JUDGE_FAILURES = 3

_EPILOG = """\
examples:
  judger score rollouts.jsonl                      route by data_source with verl's table
  judger score rollouts.parquet --preset math -o scored.parquet
  judger score rollouts.jsonl -c my_config.py --examples 3
  judger score rollouts.jsonl -c my_pkg.judgers:config --format json > summary.json

exit codes: 0 ok; 1 some input rows unreadable (the rest scored); 2 nothing scored;
            3 some samples failed to be judged (error or timeout)
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the arguments of `judger score`; must stay cheap (no heavy imports here)."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = _EPILOG
    parser.add_argument(
        "input", help="rollouts: .jsonl or .parquet in verl's row layout, or RolloutState JSON lines"
    )
    which = parser.add_mutually_exclusive_group()
    which.add_argument(
        "-c",
        "--config",
        metavar="CONFIG",
        help="a Python file defining a JudgerConfig / ComposedJudgerConfig (FILE.py or FILE.py:NAME), "
        "or an import string 'pkg.module:name'",
    )
    which.add_argument(
        "--preset",
        metavar="NAME",
        help="a built-in judger config from judger.presets, e.g. MathJudgerConfig (or just 'math')",
    )
    parser.add_argument(
        "--compat",
        choices=("verl",),
        help="with the default config: 'verl' reproduces verl's scores exactly, false negatives included",
    )
    parser.add_argument(
        "-o", "--output", metavar="OUTPUT", help="write every row with its reward (.jsonl or .parquet)"
    )
    parser.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="parallelism: max_concurrency of the judger and of each branch (async and HTTP handlers, "
        "LLM verifiers), and the number of worker processes of process-run scorers (math, code)",
    )
    parser.add_argument("--examples", type=int, default=0, metavar="K", help="show K samples per data_source")
    parser.add_argument(
        "--format", choices=("table", "json"), default="table", help="table (default) or one JSON object"
    )
    parser.add_argument(
        "--batch-size", type=int, default=256, metavar="B", help="samples per batch_judge call"
    )
    parser.add_argument(
        "--shards",
        type=int,
        metavar="N",
        help="score in N processes, each reading, judging and tallying blocks of the file (default: "
        "one per core for a JSONL file of 48 MB or more with the default config or a preset; 1: one "
        "process)",
    )
    parser.add_argument(
        "--ray",
        nargs="?",
        const="local",
        metavar="ADDRESS",
        help="score the file's blocks on Ray actors, one per free CPU of the cluster (at most "
        "--workers), with the same output, report and exit code: ADDRESS of a cluster (host:port, "
        "ray://...), 'auto' for the one running here or at RAY_ADDRESS; none: a local Ray. Put it "
        "after the input file",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    parser.add_argument(
        "--html", metavar="REPORT", help="also write the report as one self-contained HTML file"
    )


# --- the output file ------------------------------------------------------------------------------


def _same_file(input_path: str, output_path: str) -> bool:
    try:
        return os.path.samefile(input_path, output_path)
    except OSError:  # the output does not exist yet (or the input does not: reading reports it)
        return os.path.abspath(input_path) == os.path.abspath(output_path)


def _unusable(judger: Any) -> int:
    """Release a judger built before the input turned out unusable; the command then exits."""
    if judger is not None:
        judger.close()
        close_shared_pool()
    return EXIT_UNUSABLE


def _say(message: str) -> None:
    """A plain line on stderr: never wrapped, so row numbers and paths stay greppable."""
    print(message, file=sys.stderr, flush=True)


# rows per chunk read, judged and written at a time: memory holds about two chunks
CHUNK_ROWS = 4096
_SHOWN_ERRORS = 20
# A chunk allocates hundreds of thousands of objects and frees them by reference counting (rows
# hold no cycles): a young-generation collection every few hundred allocations would only re-scan
# them. Above what two chunks hold, a run's chunks come and go without one; cyclic garbage (a
# failed sample's traceback) is still collected, after at most this many objects.
_YOUNG_COLLECTION_EVERY = 200_000


def _next_chunk(chunks: Iterator[Any]) -> Any:
    return next(chunks, None)


@contextmanager
def _few_collections() -> Iterator[None]:
    """The garbage collector's young threshold raised while scoring, restored after (except in the
    command's own process, which ends here: restored, the threshold would start a collection of
    everything the run left, only to delay the exit)."""
    before = gc.get_threshold()
    gc.set_threshold(max(before[0], _YOUNG_COLLECTION_EVERY), *before[1:])
    try:
        yield
    finally:
        if not process.owned:
            gc.set_threshold(*before)


def _refusal(args: argparse.Namespace) -> str | None:
    """Why the arguments cannot run together, if they cannot."""
    if args.compat and (args.config or args.preset):
        return "--compat applies to the default config only (drop -c / --preset)"
    if args.batch_size < 1 or (args.workers is not None and args.workers < 1) or args.examples < 0:
        return "--batch-size and --workers must be >= 1, --examples >= 0"
    if args.shards is not None and args.shards < 1:
        return "--shards must be >= 1"
    if args.ray is not None and args.shards is not None:
        return "--shards and --ray both say where to score: give one"
    if args.output and _same_file(args.input, args.output):
        # rows that cannot be read are not written back: scoring in place would lose them
        return f"-o {args.output} is the input file; write the scored rows to another path"
    from judger.cli.shards import refusal

    return refusal(args, "--ray" if args.ray is not None else "--shards")


def _open(args: argparse.Namespace) -> tuple[Any, Iterator[Any], Any] | int:
    """The judger, the input's chunks and its first chunk; or the exit code if either is unusable."""
    # trainer.io only for this subcommand: `judger serve` and `judger --help` do not load it
    from judger.trainer.io import InputError, iter_rollouts

    # the judger first, so that its worker processes start while the file is read
    config_error: ConfigError | None = None
    judger: Any = None
    try:
        judger = build(args)
    except ConfigError as exc:
        config_error = exc
    else:
        start_pools(judger)
    # the default config routes on data_source; a preset or a config of one's own may not need it
    chunks = iter_rollouts(args.input, CHUNK_ROWS, require_data_source=not (args.config or args.preset))
    try:
        first = _next_chunk(chunks)
    except InputError as exc:
        _say(f"judger score: {exc}")
        return _unusable(judger)
    if first is None:
        _say(f"judger score: {args.input}: no rows to score")
        return _unusable(judger)
    if config_error is not None:
        _say(f"judger score: {config_error}")
        return EXIT_UNUSABLE
    return judger, chunks, first


class _Outputs:
    """Where judged chunks go: the tally of the report, the HTML report's sample, the output file."""

    def __init__(self, args: argparse.Namespace) -> None:
        from judger.cli.tally import Tally

        self.input = args.input
        self.tally = Tally(args.examples)
        self.report_sample: Any = None
        if args.html:
            from judger.cli.html_report import ReportSample

            self.report_sample = ReportSample()  # bounded: a few examples and points, every score
        self.sink: Any = None
        self.write_error: str | None = None
        if args.output:
            from judger.cli.sink import OutputSink

            try:
                self.sink = OutputSink(args.output)
            except OSError as exc:  # scored all the same: the report is worth having
                self.write_error = f"{type(exc).__name__}: {exc}"

    def report_errors(self, errors: list[Any]) -> None:
        for error in errors:
            if len(self.tally.errors) < _SHOWN_ERRORS:
                _say(f"{self.input}: {error}")
            self.tally.errors.append(error)

    def _write(self, write: Callable[[Any], None]) -> None:
        """``write(sink)`` unless an earlier write failed; a failure is kept for the report and the
        partial output dropped (the rows are still scored and tallied)."""
        if self.sink is not None and self.write_error is None:
            try:
                write(self.sink)
            except Exception as exc:
                self.write_error = f"{type(exc).__name__}: {exc}"
                self.sink.discard()

    def add(self, chunk: Any) -> None:
        self._write(lambda sink: sink.write(chunk.states, chunk.layout))
        self.tally.add(chunk.states)
        if self.report_sample is not None:
            self.report_sample.add(chunk.states)

    def add_block(self, block: Any) -> None:
        """A block judged by a shard process (:mod:`judger.cli.shards`): lines encoded, tally made."""
        self.report_errors(block.errors)
        self._write(lambda sink: sink.write_encoded(block.output, block.written))
        self.tally.merge(block.tally)

    def discard(self) -> None:
        if self.sink is not None:
            self.sink.discard()

    def commit(self) -> None:
        if self.sink is not None and self.write_error is None:
            try:
                self.sink.commit()
            except Exception as exc:
                self.write_error = f"{type(exc).__name__}: {exc}"


def _judges_in_this_thread(judger: Any) -> bool:
    """Whether every judger under ``judger`` built so far scores inline, in the calling thread (a
    router builds a route's judger when its first sample comes)."""
    from judger.judgers.composed import leaf_judgers

    return all(getattr(leaf, "execution", None) == "inline" for leaf in leaf_judgers(judger))


async def _score_chunks(
    args: argparse.Namespace, judger: Any, chunks: Iterator[Any], first: Any, outputs: _Outputs
) -> None:
    # the bar only where someone watches it: a pipe or a CI log gets no control characters
    show_progress = not args.no_progress and sys.stderr.isatty()
    loop = asyncio.get_running_loop()
    # The next chunk is read in a thread while this one is judged, where judging waits (on worker
    # processes, handler threads, HTTP, Ray). Beside judgers that compute in this thread (inline
    # scorers: GSM8K, QA) a reading thread would only take turns with them for the GIL: their
    # chunks are read in turn. Asked at every chunk: a router builds its routes on first use.
    try:
        with progress_bar("rows", None, enabled=show_progress) as advance:
            chunk = first
            while chunk is not None:
                reading: asyncio.Future[Any] | None = None
                if not _judges_in_this_thread(judger):
                    reading = loop.run_in_executor(None, _next_chunk, chunks)
                try:
                    outputs.report_errors(chunk.errors)
                    to_judge = [s for s in chunk.states if s.status == Status.COMPLETED]
                    await score_states(judger, to_judge, args.batch_size)
                    outputs.add(chunk)
                    advance(len(chunk.errors) + len(set(chunk.rows)))
                finally:
                    if reading is not None:  # waited for even when judging failed
                        chunk = await reading
                if reading is None:
                    chunk = _next_chunk(chunks)
    finally:
        await judger.aclose()
        close_shared_pool()


def _stream(
    args: argparse.Namespace, judger: Any, chunks: Iterator[Any], first: Any, outputs: _Outputs
) -> int | None:
    """Judge every chunk; the exit code if the run stopped, None when every chunk went through."""
    return _guarded(outputs, lambda: asyncio.run(_score_chunks(args, judger, chunks, first, outputs)))


@contextmanager
def _no_half_file(outputs: _Outputs) -> Iterator[None]:
    """Ctrl-C outside the scoring's own handler (:func:`_guarded`: just before it, or while the
    output is put in place) leaves no half file either; the caller says it was interrupted."""
    try:
        yield
    except KeyboardInterrupt:
        outputs.discard()
        raise


def _guarded(outputs: _Outputs, work: Any) -> int | None:
    """Run ``work``; the exit code if it stopped (the output discarded), None when it went through."""
    from judger.trainer.io import InputError

    try:
        work()
    except KeyboardInterrupt:
        outputs.discard()
        _say("judger score: interrupted")
        return 130
    except InputError as exc:
        outputs.discard()
        _say(f"judger score: {exc}")
        return EXIT_UNUSABLE
    except Exception as exc:  # a judger with on_error="raise", or a bug in a custom judger
        outputs.discard()
        _say(f"judger score: scoring stopped: {type(exc).__name__}: {exc}")
        return EXIT_UNUSABLE
    return None


def _run_sharded(args: argparse.Namespace, shards: int) -> int | None:
    """Score the file in ``shards`` processes (:mod:`judger.cli.shards`), reported as one run; None
    when the judger is not one that shards share out (and ``--shards`` was not asked for)."""
    from judger.cli.pools import may_use_pool
    from judger.cli.shards import rule_based, start_shards

    try:
        judger = build(args)  # a bad config is refused here, by name, as in one process
    except ConfigError as exc:
        _say(f"judger score: {exc}")
        return EXIT_UNUSABLE
    judger.close()
    if args.shards is None and not rule_based(judger):
        return None
    running = start_shards(args, shards, pools=may_use_pool(judger))  # they start while the file is checked
    try:
        return _score_sharded(args, shards, running)
    except KeyboardInterrupt:  # before or after the scoring itself (_guarded answers within it)
        _say("judger score: interrupted")
        return 130
    finally:
        running.shutdown()


def _score_sharded(args: argparse.Namespace, shards: int, running: Any) -> int:
    from judger.cli.shards import score_in_shards
    from judger.trainer.io import InputError, iter_rollouts

    try:  # an unreadable file is refused as the one-process run refuses it
        next(iter_rollouts(args.input, 1, require_data_source=not args.preset), None)
    except InputError as exc:
        _say(f"judger score: {exc}")
        return EXIT_UNUSABLE
    outputs = _Outputs(args)
    show_progress = not args.no_progress and sys.stderr.isatty()

    def work() -> None:
        with progress_bar("rows", None, enabled=show_progress) as advance:
            score_in_shards(running, args, shards, outputs.add_block, advance)

    with _no_half_file(outputs):
        start = time.perf_counter()
        stopped = _guarded(outputs, work)
        if stopped is not None:
            return stopped
        return _finish(args, outputs, time.perf_counter() - start)


def routing_hint(args: argparse.Namespace, summary: dict[str, Any]) -> str | None:
    """What to do when the default routing failed samples for want of a ``data_source`` (verl's
    validation dumps have none): said once, above the report, rather than in every reason."""
    from judger.trainer.metrics import data_source_name  # the report's name for a missing one

    unrouted = summary["data_sources"].get(data_source_name(None))
    if args.config or args.preset or not unrouted or not unrouted["failed"]:
        return None
    return (
        f"{unrouted['failed']} samples have no data_source, which the default routing (verl's dispatch "
        "by data_source) needs, as in verl's validation dumps: name the judger with --preset NAME "
        "(math, gsm8k, ...) or -c my_config.py"
    )


def _run_on_ray(args: argparse.Namespace) -> int:
    """Score the file's blocks on Ray actors (:mod:`judger.cli.ray_score`), reported as one run."""
    from judger.cli import ray_score
    from judger.cli.shards import BlockOptions
    from judger.trainer.io import InputError, iter_rollouts

    try:
        cfg = load_config(args)  # a bad config is refused here, by name, as in one process
    except ConfigError as exc:
        _say(f"judger score: {exc}")
        return EXIT_UNUSABLE
    refusal = ray_score.refusal(cfg)
    if refusal is None:
        try:  # an unreadable file is refused as the one-process run refuses it
            next(iter_rollouts(args.input, 1, require_data_source=not (args.config or args.preset)), None)
        except InputError as exc:
            refusal = str(exc)
    if refusal is not None:
        _say(f"judger score: {refusal}")
        return EXIT_UNUSABLE
    try:
        running = ray_score.start(
            cfg, BlockOptions.of(args), args.ray, workers=args.workers, config=args.config
        )
    except KeyboardInterrupt:
        _say("judger score: interrupted")
        return 130
    except Exception as exc:
        _say(f"judger score: cannot score on Ray: {exc}")
        return EXIT_UNUSABLE
    try:
        return _score_on_ray(args, running)
    except KeyboardInterrupt:  # before or after the scoring itself (_guarded answers within it)
        _say("judger score: interrupted")
        return 130
    finally:
        running.close()


def _score_on_ray(args: argparse.Namespace, running: Any) -> int:
    from judger.cli import ray_score

    outputs = _Outputs(args)
    show_progress = not args.no_progress and sys.stderr.isatty()

    def work() -> None:
        with progress_bar("rows", None, enabled=show_progress, status=running.status) as advance:
            asyncio.run(ray_score.score_file(running, args.input, outputs.add_block, advance))

    with _no_half_file(outputs):
        start = time.perf_counter()
        stopped = _guarded(outputs, work)
        note = ray_score.lost_note(running)
        if note is not None:
            _say(note)
        if stopped is not None:
            return stopped
        return _finish(args, outputs, time.perf_counter() - start)


def _print_report(args: argparse.Namespace, summary: dict[str, Any], outputs: _Outputs) -> None:
    shown = outputs.tally.examples
    hint = routing_hint(args, summary)
    report = getattr(args, "report", None)
    if report is not None:  # score_file: the summary is returned, not printed
        if hint:
            summary["hint"] = hint
        report.update(summary, examples=shown)
        return
    if args.format == "json":
        if shown:
            summary["examples"] = shown
        if hint:
            summary["hint"] = hint
        sys.stdout.write(json.dumps(summary, ensure_ascii=False, default=str) + "\n")
        return
    from rich.console import Console

    # piped output is read by people too: do not squeeze the table into 80 columns
    out = Console() if sys.stdout.isatty() else Console(width=160)
    if hint:
        out.print(f"judger score: {hint}", highlight=False)
    if shown:
        render_examples(shown, out)
    render_summary(summary, out)
    if args.output and outputs.write_error is None:
        out.print(f"wrote {outputs.tally.samples} rows to {args.output}")


def _finish(args: argparse.Namespace, outputs: _Outputs, elapsed: float) -> int:
    """Put the output in place, report, and say how the run went (the exit code)."""
    tally = outputs.tally
    if len(tally.errors) > _SHOWN_ERRORS:
        _say(f"... and {len(tally.errors) - _SHOWN_ERRORS} more bad rows")
    if not tally.samples:
        outputs.discard()
        _say(f"judger score: {args.input}: no rows to score")
        return EXIT_UNUSABLE
    outputs.commit()
    if outputs.write_error is not None:
        _say(f"judger score: cannot write {args.output}: {outputs.write_error}")
    summary = {"input": str(args.input), **tally.summary(elapsed)}
    if tally.errors:
        summary["bad_row_errors"] = [{"row": e.row, "message": e.message} for e in tally.errors]
    html_failed = False
    if outputs.report_sample is not None:
        from judger.cli.html_report import write_sample_report

        html_failed = not write_sample_report(args.html, summary, outputs.report_sample)
    _print_report(args, summary, outputs)
    if outputs.write_error is not None or html_failed:
        return EXIT_UNUSABLE
    if tally.errors:
        return EXIT_BAD_ROWS
    if summary["failed"] or summary["timed_out"]:
        return EXIT_JUDGE_FAILURES
    return EXIT_OK


def run(args: argparse.Namespace) -> int:
    refusal = _refusal(args)
    if refusal is not None:
        _say(f"judger score: {refusal}")
        return EXIT_UNUSABLE
    from judger.cli.shards import shard_count

    if args.ray is not None:
        with _few_collections():
            return _run_on_ray(args)
    shards = shard_count(args)
    with _few_collections():
        done = _run_sharded(args, shards) if shards else None
        if done is not None:
            return done
        opened = _open(args)
        if isinstance(opened, int):
            return opened
        judger, chunks, first = opened
        outputs = _Outputs(args)
        with _no_half_file(outputs):
            start = time.perf_counter()
            stopped = _stream(args, judger, chunks, first, outputs)
            if stopped is not None:
                return stopped
            return _finish(args, outputs, time.perf_counter() - start)


@dataclass
class ScoreResult:
    """What :func:`score_file` gives back: the command's exit code and its report (the summary that
    ``--format json`` prints, with ``examples``; empty when the run stopped before a report)."""

    exit_code: int
    report: dict[str, Any]


def score_file(
    input: str | os.PathLike[str],
    *,
    output: str | os.PathLike[str] | None = None,
    config: str | None = None,
    preset: str | None = None,
    compat: str | None = None,
    ray: str | None = None,
    shards: int | None = None,
    workers: int | None = None,
    batch_size: int = 256,
    examples: int = 0,
) -> ScoreResult:
    """``judger score`` from Python: the same run, its report returned instead of printed.

    ``ray``: score on a Ray cluster, as ``--ray ADDRESS`` (``"auto"``, ``"host:port"``, or
    ``"local"`` to start one; a Ray already initialised in this process is used as it is). Refusals
    and bad rows are said on stderr as the command says them; ``exit_code`` is the command's.
    """
    argv = [os.fspath(input), "--no-progress", "--format", "json", "--batch-size", str(batch_size)]
    argv += ["--examples", str(examples)]
    for flag, value in (("-o", output), ("-c", config), ("--preset", preset), ("--compat", compat)):
        if value is not None:
            argv += [flag, os.fspath(value)]
    for flag, number in (("--shards", shards), ("--workers", workers)):
        if number is not None:
            argv += [flag, str(number)]
    parser = argparse.ArgumentParser(prog="judger score")
    add_arguments(parser)
    args = parser.parse_args(argv)
    args.ray = ray
    report: dict[str, Any] = {}
    args.report = report
    return ScoreResult(run(args), report)
