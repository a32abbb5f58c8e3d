"""Sending payloads to JudgerActor replicas: least-loaded choice, backpressure, deadlines, retries.

Shared by :class:`~judger.RemoteJudger` (one replica) and :class:`~judger.JudgerPool` (several).

- A batch is cut into few, large chunks (see :meth:`Dispatcher.chunk_size_for`) sent in input
  order, large first and smaller towards the end (guided scheduling); each goes to the replica
  with the fewest payloads in flight that has room under ``max_in_flight``; callers wait otherwise
  (backpressure). Concurrent ``judge()`` calls reach it already grouped (micro-batching).
- Every call has a deadline. Past it, the actor is asked whether its event loop still answers
  (the per-sample deadlines run there): a loop that answers is waited on, a few deadlines at most;
  one that does not is blocked or dead, and the actor is killed so that Ray restarts it. A call
  that loses its actor is retried on another replica, in a few pieces, then payload by payload. A
  replica whose actor was lost takes no work until a probe sees it answer again (restarted by Ray).
- A payload's last attempt runs alone on an idle replica, so a payload that kills or blocks its
  actor fails by itself and never takes innocent payloads down with it on their last attempt.
- Results land at their input index: nothing is lost and nothing appears twice.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from judger.core.deadlines import wait_for
from judger.core.errors import JudgerError, JudgeTimeoutError
from judger.core.failure import JudgeFailure
from judger.core.judger import JudgerOutput, JudgerPayload, PayloadResult, gather_bounded
from judger.core.loops import LoopLocal
from judger.remote.cluster import kill_actor

# A Ray call has a fixed cost of milliseconds whatever it carries: chunks are large (a batch of 64
# on 2 replicas is 2 calls). Least-loaded choice still evens out replicas of different speeds.
# chunk_size None: sized from the batch and the measured cost (see Dispatcher.chunk_size_for);
# an int caps every call.
DEFAULT_CHUNK_SIZE: int | None = None
DEFAULT_MAX_IN_FLIGHT = 2048
DEFAULT_MAX_RETRIES = 2
# Up to this many payloads per replica a batch is split evenly, one call each; larger ones are
# pipelined in guided chunks, so that a lost actor strands one chunk, not half the batch...
_EVEN_SPLIT_MAX = 256
# ...unless the batch is known to be quick: when its work, at the measured cost per payload, is
# under this many seconds per replica, a lost actor or a slower replica costs less than the Ray
# calls that pipelining would add (each one costs more than judging hundreds of trivial payloads).
_QUICK_BATCH_S = 0.25
_COST_WEIGHT = 0.3  # of the newest call in the running mean of the cost per payload
# How long a lost actor may take to come back (Ray restarts it) before it counts as dead.
RESTART_WAIT_S = 120.0
_PROBE_INTERVAL_S = 0.2
# A call past its deadline whose actor's event loop still answers is waited on for up to this many
# more deadlines: per-sample deadlines run in that loop, so it is making progress (a machine under
# load, a restarted actor starting its worker processes). A loop that does not answer within
# _LOOP_PROBE_S is blocked or dead: the actor is killed.
_LIVE_EXTENSIONS = 3
_LOOP_PROBE_S = 5.0
# tasks telling waiting callers of room a cancelled release could not tell them of (asyncio keeps
# only weak references to tasks)
_NOTIFIERS: set[asyncio.Future[None]] = set()


class ReplicaLostError(JudgerError):
    """A Ray actor died while running a payload, on every attempt the retry budget allowed."""


@dataclass
class Replica:
    """One JudgerActor handle and what the dispatcher knows about it."""

    handle: Any
    name: str
    in_flight: int = 0
    completed: int = 0
    lost_calls: int = 0
    hung_calls: int = 0
    kills: int = 0
    generation: int = 0  # bumped whenever the actor is found lost: calls from before know it
    restarting: bool = False  # lost its actor; waiting for Ray to bring it back
    dead: bool = False  # did not come back within RESTART_WAIT_S
    reserved: bool = False  # running one payload alone (its last attempt)
    closed: bool = False
    # whether ``stats`` is answered by the actor's own event loop (a foreign actor's is answered on
    # the driver, so it says nothing about a hang there)
    probes_loop: bool = True
    probe: asyncio.Task[None] | None = field(default=None, repr=False)

    @property
    def usable(self) -> bool:
        return not (self.closed or self.dead or self.restarting or self.reserved)

    def status(self) -> dict[str, Any]:
        return {
            "in_flight": self.in_flight,
            "completed": self.completed,
            "lost_calls": self.lost_calls,
            "hung_calls": self.hung_calls,
            "kills": self.kills,
            "state": "closed"
            if self.closed
            else "dead"
            if self.dead
            else "restarting"
            if self.restarting
            else "alive",
        }


class _Lost(Exception):
    """Internal: a call lost its actor; carries the exception to report if retries run out."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


class _NoReplica(Exception):
    """Internal: every replica is dead; payloads fail at once instead of waiting forever."""


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300] if text else ''}"


def _cancel(ref: Any) -> None:
    import ray

    # ray.cancel on anything but an ObjectRef would start a local Ray (foreign_actor's calls are not)
    try:
        if isinstance(ref, ray.ObjectRef):
            ray.cancel(ref)
        else:
            ref.future().cancel()
    except Exception:
        pass


async def _await_ref(ref: Any, timeout: float) -> Any:
    return await wait_for(asyncio.wrap_future(ref.future()), timeout)


async def _loop_answers(replica: Replica, within: float) -> bool:
    """Whether the actor's event loop answers ``stats`` within ``within`` seconds."""
    if not replica.probes_loop:
        return False
    try:
        await _await_ref(replica.handle.stats.remote(), within)
    except asyncio.CancelledError:
        raise
    except Exception:
        return False
    return True


async def _await_live(replica: Replica, ref: Any, timeout: float) -> Any:
    """``ref``'s result; TimeoutError once it is past ``timeout`` and the actor's loop does not answer
    (or past ``1 + _LIVE_EXTENSIONS`` deadlines in all). The caller cancels ``ref``."""
    result = asyncio.wrap_future(ref.future())
    # the caller cancels a call given up on: its outcome is nobody's to read
    result.add_done_callback(lambda done: done.cancelled() or done.exception())
    for extension in range(_LIVE_EXTENSIONS + 1):
        try:
            # shielded: a deadline that passes must leave the call running while the loop is asked
            return await wait_for(asyncio.shield(result), timeout)
        except TimeoutError:
            if extension == _LIVE_EXTENSIONS or not await _loop_answers(replica, _LOOP_PROBE_S):
                raise
    raise AssertionError("unreachable")


class Dispatcher:
    """Runs payloads on a set of replicas (see the module docstring)."""

    def __init__(
        self,
        judger_name: str,
        replicas: Sequence[Replica],
        *,
        call_timeout: Callable[[int], float],
        chunk_size: int | None = DEFAULT_CHUNK_SIZE,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        max_retries: int = DEFAULT_MAX_RETRIES,
    ) -> None:
        if not replicas:
            raise ValueError("a dispatcher needs at least one replica")
        if (chunk_size is not None and chunk_size < 1) or max_in_flight < 1 or max_retries < 0:
            raise ValueError(
                f"chunk_size and max_in_flight must be >= 1 and max_retries >= 0; got "
                f"{chunk_size}, {max_in_flight}, {max_retries}"
            )
        self.judger_name = judger_name
        self.replicas = list(replicas)
        self.call_timeout = call_timeout
        self.chunk_size = chunk_size
        self.max_in_flight = max_in_flight
        self.max_retries = max_retries
        # asyncio primitives bind to one loop; sync callers may drive the judger from several
        # asyncio.run() loops in turn, so the condition follows the running loop
        self._conds: LoopLocal[asyncio.Condition] = LoopLocal(asyncio.Condition)
        self._turn = -1  # ties go to replica 0 first, then in turn (XTuner's round-robin order)
        self._isolated_waiting = 0
        # seconds per payload of recent calls, Ray's latency and queueing included (so it errs
        # towards pipelining); None until a call has come back
        self.cost_per_payload: float | None = None

    # --- capacity --------------------------------------------------------------------------------

    def _condition(self) -> asyncio.Condition:
        return self._conds.get()

    def _candidates(self, avoid: Replica | None) -> list[Replica]:
        if all(r.closed for r in self.replicas):
            raise RuntimeError(f"judger {self.judger_name!r} is closed; its actors were released")
        if all(r.dead or r.closed for r in self.replicas):
            raise _NoReplica()
        usable = [r for r in self.replicas if r.usable]
        others = [r for r in usable if r is not avoid] or usable
        self._turn += 1
        k = self._turn % len(others) if others else 0
        return others[k:] + others[:k]  # rotated, so that ties spread over replicas

    def _pick(self, size: int, avoid: Replica | None) -> Replica | None:
        candidates = self._candidates(avoid)
        if self._isolated_waiting:
            return None  # let replicas drain so that a last attempt can run alone
        fits = [r for r in candidates if not r.in_flight or r.in_flight + size <= self.max_in_flight]
        return min(fits, key=lambda r: r.in_flight, default=None)

    def _pick_idle(self, avoid: Replica | None) -> Replica | None:
        idle = [r for r in self._candidates(avoid) if not r.in_flight]
        if not idle and avoid is not None and avoid.usable and not avoid.in_flight:
            idle = [avoid]
        return idle[0] if idle else None

    async def _acquire(self, size: int, avoid: Replica | None, alone: bool) -> Replica:
        cond = self._condition()
        async with cond:
            if not alone:
                while (replica := self._pick(size, avoid)) is None:
                    await cond.wait()
            else:
                self._isolated_waiting += 1
                try:
                    while (replica := self._pick_idle(avoid)) is None:
                        await cond.wait()
                finally:
                    self._isolated_waiting -= 1
                    cond.notify_all()
                replica.reserved = True
            replica.in_flight += size
            return replica

    async def _release(self, replica: Replica, size: int) -> None:
        # the slot comes back before any wait: this runs in a call's `finally`, where a second cancel
        # (a sample's deadline, then its caller's) may land while the lock is taken in turn, and a
        # slot kept then is lost to the pool for good
        replica.in_flight -= size
        replica.reserved = False
        cond = self._condition()
        try:
            async with cond:
                cond.notify_all()
        except asyncio.CancelledError:
            # the callers waiting for room must still hear of it
            notify = asyncio.ensure_future(self._notify_all(cond))
            _NOTIFIERS.add(notify)
            notify.add_done_callback(_NOTIFIERS.discard)
            raise

    @staticmethod
    async def _notify_all(cond: asyncio.Condition) -> None:
        async with cond:
            cond.notify_all()

    async def wake_all(self) -> None:
        """After close: stop probes and wake waiting callers, so they see that the judger is closed."""
        for replica in self.replicas:
            if replica.probe is not None:
                try:
                    replica.probe.cancel()
                except RuntimeError:  # its event loop is already closed
                    pass
        cond = self._conds.current()
        if cond is not None:
            async with cond:
                cond.notify_all()

    # --- losing and regaining actors -------------------------------------------------------------

    def _mark_lost(self, replica: Replica) -> None:
        if replica.restarting or replica.closed:
            return
        replica.restarting = True
        replica.generation += 1
        replica.probe = asyncio.get_running_loop().create_task(self._probe(replica))

    async def _probe(self, replica: Replica) -> None:
        """Wait until Ray has restarted the actor (it answers ``stats``), or give it up as dead."""
        give_up = time.monotonic() + RESTART_WAIT_S
        try:
            while not replica.closed:
                try:
                    await _await_ref(replica.handle.stats.remote(), max(1.0, give_up - time.monotonic()))
                    break
                except asyncio.CancelledError:
                    raise
                except Exception:
                    if time.monotonic() >= give_up:
                        replica.dead = True
                        break
                    await asyncio.sleep(_PROBE_INTERVAL_S)
        finally:
            replica.restarting = False
            replica.probe = None
            cond = self._condition()
            async with cond:
                cond.notify_all()

    # --- one remote call -------------------------------------------------------------------------

    async def _call(
        self, replica: Replica, method: str, arg: Any, size: int, timeout: float | None = None
    ) -> Any:
        from ray.exceptions import RayError, RayTaskError

        generation = replica.generation
        started = time.monotonic()
        ref = getattr(replica.handle, method).remote(arg)
        timeout = self.call_timeout(size) if timeout is None else timeout
        try:
            result = await _await_live(replica, ref, timeout)
        except RayTaskError as exc:
            # the judger itself raised inside the actor: not an infrastructure fault, never retried
            replica.completed += size
            cause = exc.cause
            raise (cause if isinstance(cause, Exception) else exc) from None
        except RayError as exc:
            replica.lost_calls += 1
            self._mark_lost(replica)
            raise _Lost(exc) from exc
        except TimeoutError as exc:
            replica.hung_calls += 1
            _cancel(ref)
            # a hung actor is killed so that Ray restarts it; its other calls fail over and retry.
            # Calls stuck on the same hung instance time out together: only the first one kills it,
            # never the instance Ray has started since.
            if replica.generation == generation:
                replica.kills += 1
                kill_actor(replica.handle, restart=True)
                self._mark_lost(replica)
            waited = time.monotonic() - started
            answered = f"; its event loop answered for {waited:.0f} s" if waited >= 2 * timeout else ""
            err = JudgeTimeoutError(
                self.judger_name, timeout, f"remote call to {replica.name}{answered}; actor restarted"
            )
            raise _Lost(err) from exc
        except asyncio.CancelledError:
            _cancel(ref)
            raise
        replica.completed += size
        cost = (time.monotonic() - started) / size
        last = self.cost_per_payload
        self.cost_per_payload = cost if last is None else last + _COST_WEIGHT * (cost - last)
        return result

    def _exhausted(self, lost: _Lost | None, attempts: int) -> Exception:
        if lost is None:
            return ReplicaLostError(
                f"judger {self.judger_name!r}: every Ray actor of this judger is dead "
                f"(none came back within {RESTART_WAIT_S:g} s)"
            )
        if isinstance(lost.error, JudgeTimeoutError):
            return lost.error
        return ReplicaLostError(
            f"judger {self.judger_name!r}: the Ray actor running this payload was lost on all "
            f"{attempts} attempt(s); last error: {_short(lost.error)}"
        )

    # --- running payloads ------------------------------------------------------------------------

    def chunk_size_for(self, remaining: int, total: int, replicas: int) -> int:
        """Few, large calls: a Ray call costs milliseconds, whatever it carries.

        A small batch (up to 256 payloads per replica), or a quick one (under 0.25 s of work per
        replica at the cost per payload measured on earlier calls), is split evenly,
        ``ceil(total / replicas)`` each (at most ``max_in_flight``; half of it when one call per
        replica would not fit, so that two are in flight and an actor never waits for its next
        call). A larger one is sent as pipelined chunks of at most half ``max_in_flight``,
        shrinking towards the end (guided scheduling, ``remaining / (2 * replicas)``) so that
        replicas finish close together. A ``chunk_size`` given caps every call.
        """
        even = -(-total // replicas)
        if total <= replicas * min(self._pipelined_cap(), _EVEN_SPLIT_MAX):
            return max(1, min(even, self.chunk_size or even))
        cost = self.cost_per_payload
        if cost is not None and even * cost < _QUICK_BATCH_S:
            size = even if even <= self.max_in_flight else self.max_in_flight // 2
            return max(1, min(size, self.chunk_size or size))
        cap = self._pipelined_cap()
        return max(1, min(cap, max(-(-remaining // (2 * replicas)), cap // 8)))

    def _pipelined_cap(self) -> int:
        # two chunks in flight per replica by default, so that an actor never waits for its next call
        return min(self.chunk_size or max(1, self.max_in_flight // 2), self.max_in_flight)

    async def run_one(
        self, payload: JudgerPayload, *, method: str = "run_payload", timeout: float | None = None
    ) -> JudgerOutput:
        """One payload's output; raises the judger's own exception, or the retry-exhausted error.

        ``method``: the actor method that takes it (another than ``run_payload`` for an actor class
        of one's own, e.g. one that scores a block of a file); ``timeout``: this call's deadline
        (default ``call_timeout(1)``). A call that loses its actor is made again on another replica.
        """
        avoid: Replica | None = None
        lost: _Lost | None = None
        for attempt in range(self.max_retries + 1):
            alone = attempt > 0 and attempt == self.max_retries
            try:
                replica = await self._acquire(1, avoid, alone)
            except _NoReplica:
                break
            try:
                return await self._call(replica, method, payload, 1, timeout)
            except _Lost as exc:
                lost = exc
            finally:
                await self._release(replica, 1)
            avoid = replica
        raise self._exhausted(lost, self.max_retries + 1)

    async def run_many(self, payloads: Sequence[JudgerPayload]) -> list[PayloadResult]:
        """Every payload's output or JudgeFailure, in input order."""
        n = len(payloads)
        if n == 0:
            return []
        results: list[Any] = [None] * n
        # sized from the replicas (not the senders): 64 payloads on 2 replicas are 2 calls
        replicas = max(1, sum(1 for r in self.replicas if not (r.dead or r.closed)))
        # one sender per chunk the replicas can hold at once: more would only wait on the condition
        # (a 100k batch must not wake thousands of waiters per release), fewer would leave room idle
        per_replica = max(1, self.max_in_flight // self._pipelined_cap())
        senders = min(n, replicas * per_replica)
        cursor = 0

        async def sender() -> None:
            nonlocal cursor
            while cursor < n:
                lo = cursor
                cursor = hi = min(n, lo + self.chunk_size_for(n - lo, n, replicas))
                results[lo:hi] = await self._run_chunk(list(payloads[lo:hi]), 0, None)

        await gather_bounded([sender] * senders, senders)
        return results

    async def _run_chunk(
        self, chunk: list[JudgerPayload], attempt: int, avoid: Replica | None
    ) -> list[PayloadResult]:
        alone = attempt > 0 and attempt == self.max_retries
        lost: _Lost | None = None
        try:
            replica = await self._acquire(len(chunk), avoid, alone)
        except _NoReplica:
            attempt = self.max_retries
        else:
            try:
                return await self._call(replica, "run_payloads", chunk, len(chunk))
            except _Lost as exc:
                lost = exc
            finally:
                await self._release(replica, len(chunk))
        if attempt >= self.max_retries:
            failure = JudgeFailure.from_exception(self._exhausted(lost, attempt + 1), self.judger_name)
            return [failure] * len(chunk)
        nxt = attempt + 1
        if nxt < self.max_retries and len(chunk) > 2:
            # a large chunk is retried in a few pieces (not one Ray call per payload): the pieces
            # without the culprit succeed, the culprit's piece goes one by one at the next attempt
            size = -(-len(chunk) // 4)
            pieces = [chunk[i : i + size] for i in range(0, len(chunk), size)]
            parts = await asyncio.gather(*(self._run_chunk(piece, nxt, replica) for piece in pieces))
            return [result for part in parts for result in part]
        # one at a time from here on: a payload that kills or blocks its actor then fails alone
        parts = await asyncio.gather(*(self._run_chunk([p], nxt, replica) for p in chunk))
        return [part[0] for part in parts]
