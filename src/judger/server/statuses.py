"""The HTTP status of a sample the judger failed on, chosen by whether a client should retry it.

Trainers' reward clients retry 5xx (judger's own URL handler retries 500, 502, 503, 504 and 429):
a failure the same sample will meet again (the scorer raised on it, its output was invalid) is 422,
which they do not retry; a timeout is 504; a failure of the server rather than the sample (every
handler thread hung, a worker process died, a pool closed, an upstream gave up) is 503.
"""

from __future__ import annotations

import re

# what /reward's failure statuses mean, for its OpenAPI schema
REWARD_FAILURES = {
    422: "invalid body (the message names the field), or the judger failed on this sample",
    503: "too many requests in flight (retry after Retry-After s), or the server could not judge now",
    504: "the judger timed out on this sample",
}

# judger's errors that say nothing about the sample: the same request may succeed later
UNAVAILABLE_ERRORS = (
    "ThreadBudgetError",
    "WorkerCrashedError",
    "PoolClosedError",
    "ReplicaLostError",
    "HandlerHTTPError",
    "GenerationError",
    "SandboxStartError",
)
# a failure message is "<ExceptionType>: <text>", possibly wrapped ("JudgerError: judger 'x': ...")
_UNAVAILABLE = re.compile(r"^(?:\w+: judger '[^']*': )*(?:" + "|".join(UNAVAILABLE_ERRORS) + r"):")


def failure_status(failure: dict[str, str]) -> int:
    """504 for a timeout, 503 for a failure of the server, 422 for a failure of the sample."""
    if failure["kind"] == "timeout":
        return 504
    if _UNAVAILABLE.match(failure["message"][:500]):
        return 503
    return 422
