"""JSON request bodies read strictly: a body naming a key twice in one object is refused.

``json.loads`` keeps the last of duplicate keys, so ``{"decision": "reject", "decision":
"approve"}`` approved, while a proxy, a firewall or an audit tap reading the first saw a
rejection: one body, two meanings. The API's routes read bodies with ``UniqueKeysRequest``;
FastAPI turns its ``JSONDecodeError`` into a 422 that names the key."""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import Response


class UniqueKeysRequest(Request):
    """A request whose JSON body may not name a key twice in one object."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            body = await self.body()
            self._json = json.loads(body, object_pairs_hook=_unique_keys)
        return self._json


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            twice = f"the key {json.dumps(key)} appears twice in one object"
            raise json.JSONDecodeError(twice, "", 0)
        found[key] = value
    return found


class UniqueKeysRoute(APIRoute):
    """An API route that reads JSON bodies with ``UniqueKeysRequest``."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def handle(request: Request) -> Response:
            return await handler(UniqueKeysRequest(request.scope, request.receive))

        return handle
