"""A stand-in of Slack's Web API on loopback, for the Slack app's tests: it records every call
(method, Authorization header, JSON body) and answers as Slack does, or as a test scripts it."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Call:
    method: str
    authorization: str
    body: dict[str, Any]


@dataclass
class StandIn:
    """A stand-in of Slack's Web API: it records each call and answers ``ok``, a posted
    message with its channel and a ts of its own."""

    url: str = ""
    calls: list[Call] = field(default_factory=list)
    #: Answers to give, by method, before the usual ones (a failure, say).
    scripted: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self, call: Call) -> dict[str, Any]:
        with self._lock:
            self.calls.append(call)
            n = len(self.calls)
            if self.scripted.get(call.method):
                return self.scripted[call.method].pop(0)
        if call.method == "chat.postMessage":
            return {"ok": True, "channel": call.body["channel"], "ts": f"1700000000.{n:06d}"}
        return {"ok": True}

    def of(self, method: str) -> list[Call]:
        with self._lock:
            return [c for c in self.calls if c.method == method]

    async def wait_for(self, method: str, count: int = 1) -> list[Call]:
        """The calls of ``method`` once there are ``count`` (they come after the answer)."""
        deadline = time.monotonic() + 15
        while len(self.of(method)) < count:
            assert time.monotonic() < deadline, f"no {count} {method} calls: {self.calls}"
            await asyncio.sleep(0.02)
        return self.of(method)


@contextmanager
def slack_stand_in() -> Iterator[StandIn]:
    stand_in = StandIn()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            call = Call(self.path.rsplit("/", 1)[-1], self.headers.get("Authorization", ""), body)
            answer = json.dumps(stand_in.answer(call)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    stand_in.url = f"http://127.0.0.1:{server.server_address[1]}/api/"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield stand_in
    finally:
        server.shutdown()
        server.server_close()
