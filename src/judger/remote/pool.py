"""JudgerPool: several JudgerActor replicas behind one judger, with least-loaded dispatch."""

from __future__ import annotations

from collections.abc import Sequence

from judger.remote.dispatch import (
    DEFAULT_CHUNK_SIZE,
    DEFAULT_MAX_IN_FLIGHT,
    DEFAULT_MAX_RETRIES,
    Dispatcher,
)
from judger.remote.ray_judger import RayJudger
from judger.remote.remote_judger import RemoteJudger


class JudgerPool(RayJudger):
    """Replicas of one remote judger, used as one judger.

    Where XTuner sends a whole batch round-robin to one replica, a pool cuts a batch into chunks
    and sends each to the replica with the fewest payloads in flight, reassembling results in input
    order; a slow replica simply receives fewer chunks. Each replica holds at most
    ``max_in_flight`` payloads at once, and callers beyond that wait (backpressure). A chunk whose
    actor dies or hangs past its deadline is retried payload by payload on other replicas, at most
    ``max_retries`` times, before those samples fail (``on_error`` applies); Ray restarts the actor.

    ``preprocess`` / ``postprocess`` are the first replica's local judger's. Closing the pool closes
    every replica (kills its actor) and releases the pool's resource registration.
    """

    def __init__(
        self,
        replicas: Sequence[RemoteJudger],
        *,
        judger_name: str | None = None,
        chunk_size: int | None = DEFAULT_CHUNK_SIZE,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        max_retries: int = DEFAULT_MAX_RETRIES,
        call_timeout: float | None = None,
    ) -> None:
        if not replicas:
            raise ValueError("JudgerPool needs at least one replica: JudgerPool([RemoteJudger(cfg), ...])")
        for replica in replicas:
            if not isinstance(replica, RemoteJudger):
                raise TypeError(f"JudgerPool replicas must be RemoteJudger, got {type(replica).__name__}")
        first = replicas[0]
        name = judger_name or first.judger_name
        self.replicas: list[RemoteJudger] = list(replicas)
        for i, replica in enumerate(self.replicas):
            replica.endpoint.name = f"{name}[{i}]"
        dispatcher = Dispatcher(
            name,
            [r.endpoint for r in self.replicas],
            call_timeout=first.call_timeout_of if call_timeout is None else (lambda n: call_timeout),
            chunk_size=chunk_size,
            max_in_flight=max_in_flight,
            max_retries=max_retries,
        )
        super().__init__(first.local, dispatcher, name)

    def _kill_actors(self) -> None:
        for replica in self.replicas:
            replica._kill_actors()

    async def aclose(self) -> None:
        if self.closed:
            return
        await super().aclose()
        for replica in self.replicas:
            await replica.aclose()  # each kill is idempotent; replicas share the local judger
