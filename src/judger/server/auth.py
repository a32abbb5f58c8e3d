"""The server's one authentication rule: ``Authorization: Bearer <token>`` on every path but the
open ones (liveness and the docs). Checked on the request head, before any body byte is read."""

from __future__ import annotations

import hmac
from collections.abc import Collection, MutableMapping
from typing import Any

UNAUTHORIZED = "missing or wrong bearer token (Authorization: Bearer <token>)"
CHALLENGE = (b"www-authenticate", b"Bearer")


class BearerToken:
    """``authorized(scope)``: whether an ASGI request may pass (always, when ``token`` is None)."""

    def __init__(self, token: str | None, open_paths: Collection[str]) -> None:
        self.token = token.encode() if token else None
        self.open_paths = frozenset(open_paths)

    def authorized(self, scope: MutableMapping[str, Any]) -> bool:
        if self.token is None or scope["path"] in self.open_paths:
            return True
        for name, value in scope["headers"]:
            if name == b"authorization":
                scheme, _, credential = value.partition(b" ")
                return scheme.lower() == b"bearer" and hmac.compare_digest(credential.strip(), self.token)
        return False
