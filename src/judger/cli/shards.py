"""`judger score` on a large JSONL file: blocks of lines scored in worker processes, merged in order.

One process reads, judges and tallies a file row by row, and on a large file that process is the
bottleneck whatever the judger's own workers do. With several cores, the main process instead cuts
the file into blocks of whole lines (bytes, never decoded there) and hands them to shard
processes. Each shard reads its block into states, judges them with its own judger (built from the
same command-line arguments), tallies them and encodes their output lines; the main process writes
the blocks and merges the tallies in file order. The output file, the report and the exit code are
those of the one-process run: the same rows in the same order, the same line numbers in errors, the
same metrics (the shards share one hash secret, so a prompt group split over two blocks is one
group).

Only judgers that build alike in every process are sharded: the default routing and the presets. A
config of one's own may hold connections, a Ray cluster or state it counts on being single, so it
runs in one process as before; so do Parquet input or output and ``--html``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any

from judger.trainer.io import RowError

if TYPE_CHECKING:  # the command imports this module to decide; only a sharded run needs these
    from concurrent.futures import Future, ProcessPoolExecutor

BLOCK_BYTES = 4 << 20
"""Bytes of lines per block: about 2,000 MATH rows, enough to amortise a hand-off, small enough
that a shard holds little and the last block does not leave the other shards idle for long."""
FIRST_CALL_BLOCKS = 6
"""Blocks in a shard's first call: it reads them while its worker pool starts (most of a second,
Math-Verify's import), instead of waiting on the pool with one block read."""
CALL_BLOCKS = 2
"""Blocks in every later call: one is read while the other's answers are graded on the pool."""
MIN_SHARDED_BYTES = 48 << 20
"""Smaller files are scored in one process: starting shard processes would cost more than it saves."""
_PROBE = "judger shard hash probe"
_SHARD_PRELOAD = (
    "judger.cli.judging",
    "judger.cli.tally",
    "judger.cli.sink",
    "judger.compat.verl.router",
    "judger.compat.verl.compute_score",  # the MATH scorers (its package imports them on first use)
    "judger.presets",
)


@dataclass
class Block:
    """What a shard gives back for one block of lines."""

    rows: int  # rows read (the progress count), bad ones included
    errors: list[RowError]
    tally: Any  # judger.cli.tally.Tally of the block's samples
    output: bytes  # the block's output lines (empty without -o)
    written: int  # output rows in ``output``
    probe: int = field(default_factory=lambda: hash(_PROBE))


def shard_count(args: argparse.Namespace) -> int:
    """Processes to score ``args.input`` in: 0 for one process (the judger of the command itself)."""
    if args.shards is not None:
        return 0 if args.shards <= 1 else args.shards
    if args.config or args.html or not _plain_jsonl(args.input) or not _plain_jsonl(args.output, True):
        return 0
    try:
        if os.path.getsize(args.input) < MIN_SHARDED_BYTES:
            return 0
    except OSError:
        return 0
    if args.output and first_row_is_state(args.input):
        return 0  # its output's layout may depend on the rows of the whole first chunk
    if not _forks_alike():
        return 0
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if args.workers:  # each shard has at least one worker process: --workers bounds them all
        cores = min(cores, args.workers)
    return cores if cores > 1 else 0


def _forks_alike() -> bool:
    """Whether shards can be forked from one fork server (sharing its hash secret)."""
    from judger.runtime.procpool.forkserver import default_start_method

    return default_start_method() == "forkserver"


def rule_based(judger: Any) -> bool:
    """Whether every branch of ``judger`` is a rule preset (a scorer run inline or on the process
    pool): the judgers whose work shards share out. An LLM verifier or a handler calling a server
    waits on that server, and shards would only multiply the load on it."""
    from judger.judgers.composed import leaf_judgers
    from judger.presets.base import ScorerJudger

    # a preset given a handler is a NativeJudger
    return all(isinstance(leaf, ScorerJudger) for leaf in leaf_judgers(judger))


def refusal(args: argparse.Namespace, flag: str = "--shards") -> str | None:
    """Why ``--shards`` (``flag="--ray"``: ``--ray``, which scores the same blocks on Ray actors)
    cannot apply to these arguments, if it cannot."""
    if flag == "--shards" and (args.shards is None or args.shards <= 1):
        return None
    if flag == "--shards" and args.config:
        return "--shards applies to the default config and --preset, not -c (build one judger per process)"
    if args.html or not _plain_jsonl(args.input) or not _plain_jsonl(args.output, True):
        return f"{flag} needs JSONL input and output (not Parquet) and no --html"
    if args.output and first_row_is_state(args.input):
        return f"{flag} with -o needs verl rows; this file holds RolloutState dumps (drop {flag})"
    if flag == "--shards" and not _forks_alike():
        return "--shards needs multiprocessing's forkserver start method, which this platform lacks"
    return None


def _plain_jsonl(path: str | None, absent_ok: bool = False) -> bool:
    if path is None:
        return absent_ok
    return Path(path).suffix.lower() in (".jsonl", ".json", ".ndjson")


# --- the main process ------------------------------------------------------------------------------


def blocks(path: str, size: int | None = None) -> Iterator[tuple[int, bytes]]:
    """``(number of the block's first line, its bytes)``: whole lines, about ``size`` bytes each
    (default :data:`BLOCK_BYTES`).

    Lines are counted as the text reader splits them (``\\n``, ``\\r\\n`` or a lone ``\\r``).
    """
    number = 1
    size = size or BLOCK_BYTES
    with open(path, "rb") as fh:
        while data := fh.read(size):
            data += fh.readline()
            yield number, data
            number += data.count(b"\n") + data.count(b"\r") - data.count(b"\r\n")


def first_row_is_state(path: str) -> bool:
    """Whether the file's first row is a RolloutState dump (which decides the output's layout)."""
    import json

    try:
        with open(path, encoding="utf-8-sig", errors="replace") as fh:
            line = next((line for line in fh if line.strip()), "")
    except OSError:  # no such file, a directory: the reader says so, in its words
        return False
    try:
        row = json.loads(line)
    except json.JSONDecodeError:
        return False
    return isinstance(row, dict) and "message" in row and "prompt" not in row


@dataclass
class Shards:
    """The shard processes of a run, and the fork server of their worker pools (None when the
    judger scores nothing on worker processes)."""

    executor: ProcessPoolExecutor
    pool_server: Any = None
    _stopping: threading.Thread | None = None

    def stop(self) -> None:
        """Tell the shards to stop (calls not started are dropped) and let them exit while the
        caller goes on; :meth:`shutdown` waits for them."""
        if self._stopping is None:
            # the executor's own shutdown waits for its processes: in a thread, so that the caller
            # reports meanwhile (shutdown without waiting would leave no one to reap them)
            self._stopping = threading.Thread(
                target=self.executor.shutdown,
                kwargs={"wait": True, "cancel_futures": True},
                name="judger-shards-stop",
                daemon=True,
            )
            self._stopping.start()

    def shutdown(self) -> None:
        """Stop the shards and wait until they have exited, then stop their pools' fork server."""
        from judger.runtime.procpool.forkserver import stop_fork_server

        try:
            self.stop()
            assert self._stopping is not None
            self._stopping.join()
        finally:
            if self.pool_server is not None:
                stop_fork_server(self.pool_server)
                self.pool_server = None


def start_shards(args: argparse.Namespace, shards: int, *, pools: bool) -> Shards:
    """The shard processes, started now (their judgers built, their worker pools starting) while the
    caller checks the input; :func:`score_in_shards` then feeds them. ``pools``: the judger may
    score on worker processes (:func:`judger.cli.pools.may_use_pool`)."""
    from judger.runtime.interrupts import interrupts_held
    from judger.runtime.procpool.forkserver import fork_server_handle, start_fork_server, stop_fork_server
    from judger.runtime.procpool.shared import default_preload

    # each shard runs its process-run scorers on a pool of its own: the --workers asked, shared out
    pool_workers = max(1, (args.workers or os.cpu_count() or 1) // shards)
    # One fork server forks every shard's pool workers: Math-Verify's import and warm-up (a second
    # of CPU) is paid once, while the shards start, instead of once in a server of each shard's own.
    # It starts first, so that shards forked from here inherit its pipe.
    pool_server = start_fork_server(default_preload()) if pools else None
    try:
        ctx, forked = _shard_context()
        handle = fork_server_handle(pool_server, forked=forked) if pool_server is not None else None
        from concurrent.futures import ProcessPoolExecutor

        # a forked shard dies with this process (a fork server's child, with that server)
        parent = os.getpid() if forked else None
        executor = ProcessPoolExecutor(
            shards,
            mp_context=ctx,
            initializer=_start_shard,
            initargs=(args, pool_workers, handle, parent),
        )
    except BaseException:
        if pool_server is not None:
            stop_fork_server(pool_server)
        raise
    running = Shards(executor, pool_server)
    try:
        with interrupts_held():
            for _ in range(shards):  # one call each makes the executor start every process
                executor.submit(_started)
    except BaseException:
        running.shutdown()
        raise
    return running


def _shard_context() -> tuple[Any, bool]:
    """The multiprocessing context shards start in, and whether it forks this process.

    All shards must hash alike (prompt groups are merged by hash). Forked from this process they
    do, and start at once with everything it has imported (:func:`_forks_here` says when that is
    safe). Otherwise one fork server forks them all, importing :data:`_SHARD_PRELOAD` once.
    """
    import importlib
    import multiprocessing as mp

    from judger.runtime.procpool.forkserver import default_start_method, server_preload, worker_context

    if _forks_here():
        for name in _SHARD_PRELOAD:  # imported once here, not once in each shard
            importlib.import_module(name)
        return mp.get_context("fork"), True
    ctx = worker_context(default_start_method())
    ctx.set_forkserver_preload(server_preload(_SHARD_PRELOAD, shared=True))
    return ctx, False


def _forks_here() -> bool:
    """Whether shards may be forked from this process: the command's own (not a program that calls
    :func:`judger.cli.main.main`), on Linux, while it runs no other thread (before its first worker
    pool or progress bar). A fork copies every lock as it stands, and one held by another thread
    would never be released in the child."""
    import sys

    from judger.cli import process

    return process.owned and sys.platform == "linux" and threading.active_count() == 1


def _started() -> None:
    """Nothing: a call that makes a shard process start."""


def score_in_shards(
    running: Shards,
    args: argparse.Namespace,
    shards: int,
    take: Callable[[Block], None],
    advance: Callable[[int], None],
) -> None:
    """Score ``args.input`` on the shards of :func:`start_shards`; ``take`` gets each block's result
    in file order. The shards are told to stop before it returns (the caller waits for them with
    ``running.shutdown()``: they exit while it reports).

    Exceptions of a shard (an unreadable file, a judger with ``on_error="raise"``) are raised here.
    """
    executor = running.executor
    pending: deque[Future[list[Block]]] = deque()
    probe: int | None = None
    try:
        for call in _calls(args.input, shards):
            pending.append(executor.submit(score_blocks, call))
            if len(pending) >= 2 * shards:  # bounded: memory holds a few calls per shard
                probe = _take(pending.popleft(), probe, take, advance)
        while pending:
            probe = _take(pending.popleft(), probe, take, advance)
    finally:
        for future in pending:
            future.cancel()
        running.stop()


def _calls(path: str, shards: int) -> Iterator[list[tuple[int, bytes]]]:
    """The blocks of each call, in file order: :data:`FIRST_CALL_BLOCKS` for each shard's first
    call, then :data:`CALL_BLOCKS`."""
    read = blocks(path)
    for _ in range(shards):
        first = list(islice(read, FIRST_CALL_BLOCKS))
        if not first:
            return
        yield first
    while batch := list(islice(read, CALL_BLOCKS)):
        yield batch


def _take(
    future: Future[list[Block]],
    probe: int | None,
    take: Callable[[Block], None],
    advance: Callable[[int], None],
) -> int | None:
    for block in future.result():
        probe = accept(block, probe, take, advance)
    return probe


def accept(
    block: Block, probe: int | None, take: Callable[[Block], None], advance: Callable[[int], None]
) -> int:
    """Hand ``block`` to ``take`` (blocks come in file order); the hash probe of the blocks so far.

    Prompt groups are merged across blocks by hash: every block must have been tallied under one
    hash secret (a process started apart from the others would not be)."""
    if probe is not None and block.probe != probe:  # pragma: no cover - a start method that spawns
        raise RuntimeError(
            "blocks were tallied under different hash secrets, so prompt groups split between "
            "them would not merge; score in one process (--shards 1, no --ray)"
        )
    take(block)
    advance(block.rows)
    return block.probe


# --- a shard process -------------------------------------------------------------------------------


@dataclass
class _Shard:
    args: argparse.Namespace
    judger: Any
    loop: asyncio.AbstractEventLoop


_shard: _Shard | None = None


def _start_shard(args: argparse.Namespace, pool_workers: int, pool_server: Any, parent: int | None) -> None:
    from judger.cli.judging import build
    from judger.cli.pools import may_use_pool, size_process_pool, start_pools
    from judger.runtime.interrupts import ignore_interrupts
    from judger.runtime.procpool.forkserver import adopt_fork_server
    from judger.runtime.procpool.shared import shared_pool
    from judger.runtime.procpool.worker import die_with_parent

    global _shard
    # Ctrl-C reaches the whole process group: the main process stops the run and the shards with
    # it (a shard's traceback for each would only bury the one-line message)
    ignore_interrupts()
    # a shard waits for its next call on a queue whose writing end every shard holds: if the main
    # process dies without stopping it (SIGKILL, an out-of-memory kill), only the kernel ends it
    die_with_parent(parent)
    judger = build(args)
    size_process_pool(pool_workers)
    # workers forked from the run's pool server (see start_shards) start at once, so they start now
    # for a router's routes too; with a server of the shard's own, only for a judger that needs them
    if pool_server is not None and adopt_fork_server(pool_server):
        if may_use_pool(judger):
            shared_pool().start()
    else:
        start_pools(judger)
    _shard = _Shard(args, judger, asyncio.new_event_loop())
    # A block's rows hold no reference cycles: reference counting frees them when the block is
    # done. The collector would only re-scan them (a quarter of a block's time), so it is off while a
    # block is scored, and what was loaded before the first block is frozen out of its scans; the
    # few cycles a block leaves (a failure's traceback) go at the start of the next one.
    gc.freeze()
    gc.disable()


def score_blocks(blocks: list[tuple[int, bytes]]) -> list[Block]:
    """Read, judge, tally and encode blocks of lines (in a shard process), all at once: while one
    block's answers wait on the worker pool, the next block is read."""
    assert _shard is not None, "score_blocks runs in a shard process started by score_in_shards"
    gc.collect(1)  # the last call's cycles: only what was allocated since, never the frozen rest
    return _shard.loop.run_until_complete(_score_all(blocks))


async def _score_all(blocks: list[tuple[int, bytes]]) -> list[Block]:
    assert _shard is not None
    options = BlockOptions.of(_shard.args)
    return list(await asyncio.gather(*(score_block(_shard.judger, options, n, data) for n, data in blocks)))


@dataclass(frozen=True)
class BlockOptions:
    """What scoring a block needs of the command's arguments (small: it travels to Ray actors)."""

    input: str  # the input as the command names it in messages
    examples: int
    output: bool  # encode the block's output lines
    require_data_source: bool
    batch_size: int

    @classmethod
    def of(cls, args: argparse.Namespace) -> BlockOptions:
        return cls(
            str(args.input),
            args.examples,
            bool(args.output),
            not (args.config or args.preset),
            args.batch_size,
        )


async def score_block(judger: Any, options: BlockOptions, first_number: int, data: bytes) -> Block:
    """Read, judge, tally and encode one block of lines with ``judger`` (in a shard process or a Ray
    actor): what the one-process run does for these lines, as a :class:`Block`."""
    import io

    from judger.cli.judging import score_states
    from judger.cli.sink import encode_line
    from judger.cli.tally import Tally
    from judger.core.rollout import Status
    from judger.trainer.io import json_rows, rollouts_of, state_to_row

    first = first_number == 1
    # newline=None: lines split as the one-process reader splits them; a BOM only opens the file
    text = io.StringIO(data.decode("utf-8-sig" if first else "utf-8", errors="replace"), newline=None)
    path = Path(options.input)  # named in messages as the one-process reader names it
    rows = json_rows(text, path, first_number, first=first)
    chunk = next(rollouts_of(rows, path, 1 << 62, require_data_source=options.require_data_source), None)
    tally = Tally(options.examples)
    if chunk is None:
        return Block(0, [], tally, b"", 0)
    to_judge = [s for s in chunk.states if s.status == Status.COMPLETED]
    await score_states(judger, to_judge, options.batch_size)
    tally.add(chunk.states)
    output = b"".join(encode_line(state_to_row(s)) for s in chunk.states) if options.output else b""
    rows_read = len(chunk.errors) + len(set(chunk.rows))
    return Block(rows_read, chunk.errors, tally, output, len(chunk.states))
