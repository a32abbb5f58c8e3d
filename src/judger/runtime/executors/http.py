"""Calls that are a POST to a URL: the coroutine executor with one pooled client with retries."""

from __future__ import annotations

from typing import Any

from judger.core.errors import JudgerOutputError
from judger.runtime.executors.coroutine import CoroutineExecutor
from judger.runtime.http import HttpClient


class HttpExecutor(CoroutineExecutor):
    """Runs async calls as :class:`CoroutineExecutor` does; those calls :meth:`post` through the
    executor's one pooled :class:`~judger.runtime.http.HttpClient` (retries, a bounded reply)."""

    def __init__(
        self,
        name: str,
        limit: int,
        *,
        raise_errors: bool = False,
        request_timeout: float = 30.0,
        max_retries: int = 3,
    ) -> None:
        super().__init__(name, limit, raise_errors=raise_errors)
        self.client = HttpClient(timeout=request_timeout, max_retries=max_retries)

    async def post(self, url: str, body: dict[str, Any]) -> dict[str, Any]:
        """The JSON object ``url`` replies to ``body``; JudgerOutputError for any other JSON."""
        reply = await self.client.post_json(url, body)
        if not isinstance(reply, dict):
            raise JudgerOutputError(
                f"judger {self.name!r}: {url} replied {type(reply).__name__} "
                f"{reply!r:.200}; the reply must be a JSON object"
            )
        return reply

    async def aclose(self) -> None:
        await self.client.aclose()
