"""Sessions, CSRF tokens, security headers, the body limit and sign-in throttling.

- A session is an itsdangerous-signed, timestamped cookie holding the principal and a random
  session id: HttpOnly, SameSite=Lax, Secure when the app is served over https, bounded by
  ``session_ttl_seconds``. Signing in always starts a new session (new id).
- The CSRF token of a session is its id signed with another salt; every state-changing form
  carries it, and the request's ``Origin`` (or ``Referer``) must be the app's own.
- Responses carry a Content-Security-Policy without ``unsafe-inline``, ``frame-ancestors
  'none'``, ``nosniff`` and ``Referrer-Policy: same-origin``.
"""

from __future__ import annotations

import hmac
import os
import secrets
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from itsdangerous import BadSignature, SignatureExpired, URLSafeTimedSerializer
from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from approvals.principals import Principal, Via

SESSION_COOKIE = "approvals_session"
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; object-src 'none'; "
    "frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    # same-origin, not no-referrer: under no-referrer browsers send "Origin: null" on our own
    # form posts, which the origin check must refuse. Other sites still get nothing.
    "referrer-policy": "same-origin",
    "cross-origin-opener-policy": "same-origin",
}


def secret_key(configured: str | None, data_dir: Path) -> str:
    """The configured key, or one generated once and kept in ``<data_dir>/secret_key``."""
    if configured:
        return configured
    path = data_dir / "secret_key"
    if path.is_file():
        return path.read_text(encoding="utf-8").strip()
    data_dir.mkdir(parents=True, exist_ok=True)
    key = secrets.token_urlsafe(48)
    # O_EXCL: two processes starting at once agree on the first key written.
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text(encoding="utf-8").strip()
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(key)
    return key


@dataclass(frozen=True, slots=True)
class Session:
    id: str
    principal: Principal


class Sessions:
    """Signed session cookies and the CSRF tokens bound to them."""

    def __init__(self, key: str, *, ttl_seconds: int, secure: bool) -> None:
        self._cookies = URLSafeTimedSerializer(key, salt="approvals.session")
        self._csrf = URLSafeTimedSerializer(key, salt="approvals.csrf")
        self.ttl_seconds = ttl_seconds
        self.secure = secure

    def read(self, request: Request) -> Session | None:
        raw = request.cookies.get(SESSION_COOKIE)
        if not raw:
            return None
        try:
            data: Any = self._cookies.loads(raw, max_age=self.ttl_seconds)
        except (BadSignature, SignatureExpired):
            return None
        try:
            principal = Principal(
                id=str(data["p"]["id"]),
                name=str(data["p"]["name"]),
                via=Via(data["p"]["via"]),
                groups=frozenset(str(g) for g in data["p"]["groups"]),
            )
            return Session(id=str(data["sid"]), principal=principal)
        except (KeyError, TypeError, ValueError):
            return None

    def start(self, response: Response, principal: Principal) -> Session:
        """A new session for ``principal`` (a new id, whatever cookie came in)."""
        session = Session(id=secrets.token_urlsafe(24), principal=principal)
        value = self._cookies.dumps(
            {
                "sid": session.id,
                "p": {
                    "id": principal.id,
                    "name": principal.name,
                    "via": principal.via.value,
                    "groups": sorted(principal.groups),
                },
            }
        )
        response.set_cookie(
            SESSION_COOKIE,
            value,
            max_age=self.ttl_seconds,
            httponly=True,
            samesite="lax",
            secure=self.secure,
            path="/",
        )
        return session

    def end(self, response: Response) -> None:
        response.delete_cookie(
            SESSION_COOKIE, httponly=True, samesite="lax", secure=self.secure, path="/"
        )

    def csrf_token(self, session: Session) -> str:
        return self._csrf.dumps(session.id)

    def csrf_ok(self, session: Session, token: str | None) -> bool:
        if not token:
            return False
        try:
            sid = self._csrf.loads(token, max_age=self.ttl_seconds)
        except (BadSignature, SignatureExpired):
            return False
        return isinstance(sid, str) and hmac.compare_digest(sid, session.id)


def same_origin(request: Request, public_url: str) -> bool:
    """The request's Origin (or, lacking one, its Referer) is the app's own origin."""
    allowed = {_origin(public_url), _origin(str(request.base_url))}
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        referer = request.headers.get("referer")
        if not referer:
            return False
        origin = _origin(referer)
    return _origin(origin) in allowed


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


class LoginThrottle:
    """At most ``attempts`` failed sign-ins per (name, client) in ``window`` seconds."""

    def __init__(self, attempts: int, window: float) -> None:
        self._attempts = attempts
        self._window = window
        self._failures: dict[tuple[str, str], deque[float]] = {}

    def _recent(self, key: tuple[str, str]) -> deque[float]:
        now = time.monotonic()
        failures = self._failures.setdefault(key, deque())
        while failures and now - failures[0] > self._window:
            failures.popleft()
        return failures

    def blocked(self, name: str, client: str) -> float:
        """Seconds until another attempt is allowed; 0 when it is."""
        failures = self._recent((name.lower(), client))
        if len(failures) < self._attempts:
            return 0.0
        return max(0.0, self._window - (time.monotonic() - failures[0]))

    def failed(self, name: str, client: str) -> None:
        self._recent((name.lower(), client)).append(time.monotonic())
        if len(self._failures) > 10_000:  # bounded memory under a spray of names
            self._failures.pop(next(iter(self._failures)))

    def succeeded(self, name: str, client: str) -> None:
        self._failures.pop((name.lower(), client), None)


class SecurityHeaders:
    """Adds the security headers to every response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers.setdefault(name, value)
            await send(message)

        await self.app(scope, receive, with_headers)


class BodyLimit:
    """Refuses request bodies over ``limit`` bytes with 413, declared or streamed."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = self.limit + 1
                if declared > self.limit:
                    await _too_large(send, self.limit)
                    return
        seen = 0
        too_large = False

        async def limited() -> Message:
            nonlocal seen, too_large
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    too_large = True
                    raise BodyTooLarge
            return message

        try:
            await self.app(scope, limited, send)
        except BodyTooLarge:
            await _too_large(send, self.limit)


class BodyTooLarge(Exception):
    pass


async def _too_large(send: Send, limit: int) -> None:
    body = (
        b'{"error": {"code": "body_too_large", "message": "the request body is larger than '
        + str(limit).encode()
        + b' bytes"}}'
    )
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *((k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
