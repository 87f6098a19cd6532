"""Sessions, CSRF tokens, security headers, the body limit and sign-in throttling.

- A session is a row in the database (``storage.sessions``): the browser's cookie is an
  itsdangerous-signed, timestamped session id and nothing else (HttpOnly, SameSite=Lax, Secure
  when the app is served over https, bounded by ``session_ttl_seconds``). Every request looks the
  row up, so signing out, ``approvals sessions end`` and a change to the local account (disabled,
  new groups) end a session at once. GETs may use this process's cache of the answer for
  ``session_cache_seconds``; state-changing requests always ask the database. Signing in always
  starts a new session (new id).
- The CSRF token of a session is an HMAC of its id, signed with another salt; every
  state-changing form carries it, and the request's ``Origin`` (or ``Referer``) must be the
  configured ``public_url``'s origin (never one derived from the request's own Host header).
- The sign-in form has a CSRF token of its own, before there is any session: a random nonce in
  a short-lived signed cookie, and the same nonce signed with another salt in the form.
- Responses carry a Content-Security-Policy without ``unsafe-inline``, ``frame-ancestors
  'none'``, ``nosniff``, ``Referrer-Policy: same-origin`` and, except for static assets,
  ``Cache-Control: no-store`` (pages and API answers show arguments).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import time
from collections import OrderedDict, deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from itsdangerous import BadSignature, SignatureExpired, URLSafeTimedSerializer
from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from approvals.principals import Principal

SESSION_COOKIE = "approvals_session"
LOGIN_COOKIE = "approvals_login"
#: How long a sign-in form may sit before it is submitted.
LOGIN_FORM_SECONDS = 3600
#: Paths whose responses may be cached: static assets, which show nothing of anyone's.
CACHEABLE_PREFIXES = ("/static/", "/api/docs-assets/")
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


class SessionStore(Protocol):
    """Where sessions live (``storage.sessions.PgSessions``)."""

    async def start(self, session_id: str, principal: Principal, *, ttl_seconds: int) -> None: ...

    async def get(self, session_id: str) -> _Record | None: ...

    async def end(self, session_id: str) -> bool: ...


class _Record(Protocol):
    @property
    def principal(self) -> Principal: ...


class Sessions:
    """Session cookies naming server-side sessions, and the CSRF tokens bound to them."""

    def __init__(
        self, key: str, *, ttl_seconds: int, secure: bool, cache_seconds: float = 3.0
    ) -> None:
        # A salt of its own for the new cookie (an id only): a cookie of the old kind, which
        # carried a principal and its groups, is refused rather than misread.
        self._cookies = URLSafeTimedSerializer(key, salt="approvals.session.v2")
        self._csrf = URLSafeTimedSerializer(key, salt="approvals.csrf")
        self._login_cookie = URLSafeTimedSerializer(key, salt="approvals.login.cookie")
        self._login_form = URLSafeTimedSerializer(key, salt="approvals.login.form")
        self._mac_key = hashlib.sha256(b"approvals.csrf.binding\0" + key.encode()).digest()
        self.ttl_seconds = ttl_seconds
        self.secure = secure
        self.cache_seconds = cache_seconds
        self._store: SessionStore | None = None
        # session id -> (monotonic time it was read, the session): a GET may reuse an answer
        # younger than cache_seconds; sign-out in this process drops it at once.
        self._cache: OrderedDict[str, tuple[float, Session]] = OrderedDict()

    def bind(self, store: SessionStore) -> None:
        """Use ``store`` (the app binds it once its engine is open)."""
        self._store = store

    @property
    def store(self) -> SessionStore:
        if self._store is None:
            raise RuntimeError("the sessions have no store yet (the app has not started)")
        return self._store

    def _session_id(self, request: Request) -> str | None:
        raw = request.cookies.get(SESSION_COOKIE)
        if not raw:
            return None
        try:
            data: Any = self._cookies.loads(raw, max_age=self.ttl_seconds)
        except (BadSignature, SignatureExpired):
            return None
        sid = data.get("sid") if isinstance(data, dict) else None
        return sid if isinstance(sid, str) and sid else None

    async def read(self, request: Request, *, fresh: bool = False) -> Session | None:
        """The request's live session. ``fresh``: ask the database even if this process saw the
        session a moment ago (before anything that changes state)."""
        sid = self._session_id(request)
        if sid is None:
            return None
        if not fresh and self.cache_seconds > 0:
            cached = self._cache.get(sid)
            if cached is not None and time.monotonic() - cached[0] < self.cache_seconds:
                return cached[1]
        record = await self.store.get(sid)
        if record is None:
            self._cache.pop(sid, None)
            return None
        session = Session(id=sid, principal=record.principal)
        self._cache[sid] = (time.monotonic(), session)
        self._cache.move_to_end(sid)
        while len(self._cache) > 10_000:  # bounded memory
            self._cache.popitem(last=False)
        return session

    async def start(
        self, response: Response, principal: Principal, *, replacing: Request | None = None
    ) -> Session:
        """A new session for ``principal`` (a new id, whatever cookie came in). ``replacing``:
        the sign-in request, whose own session (if its cookie names one) ends, so that a copy of
        the browser's previous cookie does not live on beside the new one."""
        previous = self._session_id(replacing) if replacing is not None else None
        if previous is not None:
            self._cache.pop(previous, None)
            await self.store.end(previous)
        session = Session(id=secrets.token_urlsafe(32), principal=principal)
        await self.store.start(session.id, principal, ttl_seconds=self.ttl_seconds)
        response.set_cookie(
            SESSION_COOKIE,
            self._cookies.dumps({"sid": session.id}),
            max_age=self.ttl_seconds,
            httponly=True,
            samesite="lax",
            secure=self.secure,
            path="/",
        )
        return session

    async def end(self, response: Response, session: Session) -> None:
        """Sign-out: the session's row is deleted (its cookie then names nothing, wherever a
        copy of it was kept) and the browser's cookie is cleared."""
        self._cache.pop(session.id, None)
        await self.store.end(session.id)
        response.delete_cookie(
            SESSION_COOKIE, httponly=True, samesite="lax", secure=self.secure, path="/"
        )

    def _binding(self, purpose: str, value: str) -> str:
        mac = hmac.new(self._mac_key, f"{purpose}\0{value}".encode(), hashlib.sha256)
        return mac.hexdigest()

    def csrf_token(self, session: Session) -> str:
        # An HMAC of the id, not the id: the token is in every page, the id must stay secret.
        return self._csrf.dumps(self._binding("session", session.id))

    def csrf_ok(self, session: Session, token: str | None) -> bool:
        if not token:
            return False
        try:
            bound = self._csrf.loads(token, max_age=self.ttl_seconds)
        except (BadSignature, SignatureExpired):
            return False
        return isinstance(bound, str) and hmac.compare_digest(
            bound, self._binding("session", session.id)
        )

    # ---- the sign-in form's CSRF token (there is no session yet) -------------------------------

    def login_nonce(self, request: Request) -> str:
        """The nonce of the browser's sign-in cookie when it has a valid one, else a new one
        (so that two open sign-in tabs both work)."""
        return self._login_nonce_of(request) or secrets.token_urlsafe(24)

    def _login_nonce_of(self, request: Request) -> str | None:
        raw = request.cookies.get(LOGIN_COOKIE)
        if not raw:
            return None
        try:
            nonce: Any = self._login_cookie.loads(raw, max_age=LOGIN_FORM_SECONDS)
        except (BadSignature, SignatureExpired):
            return None
        return nonce if isinstance(nonce, str) and nonce else None

    def login_form_token(self, nonce: str) -> str:
        return self._login_form.dumps(nonce)

    def set_login_cookie(self, response: Response, nonce: str) -> None:
        response.set_cookie(
            LOGIN_COOKIE,
            self._login_cookie.dumps(nonce),
            max_age=LOGIN_FORM_SECONDS,
            httponly=True,
            samesite="lax",
            secure=self.secure,
            path="/login",
        )

    def clear_login_cookie(self, response: Response) -> None:
        response.delete_cookie(
            LOGIN_COOKIE, httponly=True, samesite="lax", secure=self.secure, path="/login"
        )

    def login_token_ok(self, request: Request, token: str | None) -> bool:
        """The form's token and the browser's sign-in cookie carry the same nonce: the form
        was served to this browser by this app, not posted from another site."""
        cookie_nonce = self._login_nonce_of(request)
        if not token or cookie_nonce is None:
            return False
        try:
            form_nonce: Any = self._login_form.loads(token, max_age=LOGIN_FORM_SECONDS)
        except (BadSignature, SignatureExpired):
            return False
        return isinstance(form_nonce, str) and hmac.compare_digest(form_nonce, cookie_nonce)


def same_origin(request: Request, public_url: str) -> bool:
    """The request's Origin (or, lacking one, its Referer) is the configured public URL's.

    Only the configured URL counts: the Host header is the client's to choose, so an origin
    derived from it (``request.base_url``) would let any site that gets a browser to send a
    spoofed Host (a DNS-rebinding page, a misrouting proxy) pass as this one."""
    allowed = {_origin(public_url)}
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
    """Failed sign-ins, counted twice over a sliding ``window`` of seconds:

    - per (account name, client address): at most ``attempts``. One person mistyping is paused
      without touching anyone else, however many people share that address (an office's NAT).
    - per account name, whatever the address: at most ``account_attempts`` (higher). This bounds
      the guesses against one account from many addresses (or from spoofed ones): password
      guessing gets ``account_attempts`` tries per window in all, not per address.

    No limit is per address alone, so one shared address cannot lock out the other people
    behind it. The account-wide limit is the price: someone who floods one account's name can
    delay that account's password sign-in for one window (OpenID Connect sign-in is not
    affected); a higher ``account_attempts`` trades that against guesses allowed.

    No count is forgotten while it has a failure in the window, at its limit or under it; at
    ``CAPACITY`` counts, names and addresses not counted yet wait (see there).

    These are this process's counts; ``web.sign_in_throttle`` puts the ones every web process
    shares (PostgreSQL) behind them, so that N processes do not allow N times the guesses.
    """

    #: The most counts kept (a name, or a name and an address, with a failure in the window).
    #: A count is never forgotten while it has a failure in its window: forgetting one, under
    #: its limit or at it, gave its name more guesses (a spray of made-up names wiped them).
    #: Full, an attempt that would start a new count waits until the oldest count ends:
    #: password sign-in pauses for names and addresses not counted yet, and no one gets more
    #: guesses. Each attempt let through is a password check (scrypt, about 0.1 s of CPU
    #: here): filling it takes 50,000 attempts within one window, which the server checks one
    #: by one (attempts are counted before their check, so a burst is counted at once while
    #: its checks queue, and a real sign-in waits behind them).
    CAPACITY = 100_000

    def __init__(self, attempts: int, window: float, account_attempts: int | None = None) -> None:
        self._attempts = attempts
        self._account_attempts = account_attempts or attempts * 4
        self._window = window
        #: In the order of their last counted failure, oldest first.
        self._failures: OrderedDict[tuple[str, str | None], deque[float]] = OrderedDict()

    def _recent(self, key: tuple[str, str | None]) -> deque[float]:
        now = time.monotonic()
        failures = self._failures.get(key) or deque()
        # A failure ``window`` seconds old has left it (the wait below ends at that moment).
        while failures and now - failures[0] >= self._window:
            failures.popleft()
        return failures

    def _wait(self, key: tuple[str, str | None], limit: int) -> float:
        failures = self._recent(key)
        if len(failures) < limit:
            return 0.0
        return max(0.0, self._window - (time.monotonic() - failures[-limit]))

    def blocked(self, name: str, client: str) -> float:
        """Seconds until another attempt is allowed; 0 when it is."""
        account = name.lower()
        return max(
            self._wait((account, client), self._attempts),
            self._wait((account, None), self._account_attempts),
        )

    def attempt(self, name: str, client: str) -> tuple[float, float]:
        """Seconds until another attempt is allowed (0: go on), and the moment this attempt was
        counted at. An attempt counts as failed from the moment it is let through, before its
        password is checked: checked first and counted after, attempts sent together all
        passed the check while the first was still being checked."""
        wait = self.blocked(name, client)
        if wait:
            return wait, 0.0
        now = time.monotonic()
        account = name.lower()
        keys = ((account, client), (account, None))
        self._expire(now)
        new = sum(key not in self._failures for key in keys)
        if new and len(self._failures) + new > self.CAPACITY:
            # Full of counts with failures in their window: room for this one would be made by
            # forgetting one of them. It waits for the oldest to end instead.
            oldest = next(iter(self._failures.values()), None)
            since = now - oldest[-1] if oldest else 0.0
            return max(0.001, self._window - since), 0.0
        for key in keys:
            failures = self._recent(key)
            failures.append(now)
            self._failures[key] = failures
            self._failures.move_to_end(key)
        return 0.0, now

    def succeeded(self, name: str, client: str, counted_at: float) -> None:
        """The attempt counted at ``counted_at`` signed in: this client's count goes, and the
        attempt leaves the account-wide count (not the rest of it: a success must not reset
        the count that someone else's guesses built up)."""
        account = name.lower()
        self._failures.pop((account, client), None)
        everyone = self._failures.get((account, None))
        if everyone is not None and counted_at in everyone:
            everyone.remove(counted_at)
            if not everyone:  # nothing left to count: its place goes to whoever needs one
                del self._failures[(account, None)]

    def withdraw(self, name: str, client: str, counted_at: float) -> None:
        """The attempt counted at ``counted_at`` was refused after all (the count every
        process shares was at its limit): it leaves both of this process's counts."""
        account = name.lower()
        for key in ((account, client), (account, None)):
            failures = self._failures.get(key)
            if failures is not None and counted_at in failures:
                failures.remove(counted_at)
                if not failures:
                    del self._failures[key]

    def _expire(self, now: float) -> None:
        """Forget the counts whose last failure has left the window, from the oldest: the
        order is that of their last failure, so the first count still in its window ends the
        walk, and each count is walked past once. (A success takes its failure out of the
        account-wide count, which may then end before its place says: it is forgotten late,
        never early.)"""
        while self._failures:
            key, failures = next(iter(self._failures.items()))
            if failures and now - failures[-1] < self._window:
                return
            del self._failures[key]


class SecurityHeaders:
    """Adds the security headers to every response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        cacheable = str(scope.get("path", "")).startswith(CACHEABLE_PREFIXES)

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers.setdefault(name, value)
                if not cacheable:
                    # Pages and API answers show calls' arguments: no browser or proxy cache
                    # keeps a copy (the back button after sign-out, a shared machine).
                    headers.setdefault("cache-control", "no-store")
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
                (b"cache-control", b"no-store"),
                *((k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
