"""Real receivers on loopback for the notification tests: an HTTP server that records what it
is sent (and can fail on purpose), and an SMTP server (aiosmtpd) that records the mail."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from email.message import EmailMessage
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from aiosmtpd.controller import Controller


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float


@dataclass
class HttpReceiver:
    """Answers POSTs with ``fail_status`` the first ``fail_first`` times (every time when
    ``fail_first`` is None), then 200; waits ``delay`` seconds before answering."""

    url: str = ""
    fail_first: int | None = 0
    fail_status: int = 500
    delay: float = 0.0
    requests: list[Received] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self, received: Received) -> int:
        with self._lock:
            self.requests.append(received)
            n = len(self.requests)
        if self.fail_first is None or n <= self.fail_first:
            return self.fail_status
        return 200


@contextmanager
def http_receiver(**behaviour: Any) -> Iterator[HttpReceiver]:
    receiver = HttpReceiver(**behaviour)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            status = receiver.answer(
                Received(self.path, dict(self.headers.items()), body, time.monotonic())
            )
            if receiver.delay:
                time.sleep(receiver.delay)  # a slow receiver: its delay is the point
            reply = b"ok" if status == 200 else b"try again" if status >= 500 else b"no"
            self.send_response(status)
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@dataclass
class Mail:
    sender: str
    recipients: list[str]
    message: EmailMessage


class MailRecorder:
    """An aiosmtpd handler keeping every message it accepts."""

    def __init__(self) -> None:
        self.mail: list[Mail] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        message = message_from_bytes(envelope.content, policy=policy.default)
        assert isinstance(message, EmailMessage)
        self.mail.append(Mail(envelope.mail_from, list(envelope.rcpt_tos), message))
        return "250 OK"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def smtp_receiver() -> Iterator[tuple[MailRecorder, int]]:
    recorder = MailRecorder()
    port = free_port()
    controller = Controller(recorder, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield recorder, port
    finally:
        controller.stop()
