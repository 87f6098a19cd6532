"""A real OpenID provider (oidc-provider-mock) on a loopback port, for the sign-in tests.

The provider accepts any client id and secret and any redirect URI. Its authorization page is a
form: POST ``sub=<subject>`` to sign in as that user (with the claims given here or set later
with :meth:`RunningProvider.set_user`), or ``action=deny`` to refuse consent. Its ID tokens carry
every claim of the user, ``groups`` included.

It runs in a child process (``python -m tests.web.oidc_provider USERS_JSON``): the provider
drives deprecated authlib APIs, and in the test process, where every warning is an error
(``filterwarnings = error``), those warnings would turn its token endpoint into a 500.
"""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl

import httpx

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

ROOT = Path(__file__).resolve().parents[2]
#: Where the child serves what its token endpoint received (not a provider endpoint).
TOKEN_REQUESTS_PATH = "/_test/token-requests"


@dataclass(frozen=True)
class RunningProvider:
    """The provider's issuer URL (its base URL: ``http://127.0.0.1:PORT``)."""

    issuer: str

    def set_user(self, sub: str, claims: Mapping[str, Any]) -> None:
        """Create or replace a user and the claims its ID tokens carry."""
        httpx.put(f"{self.issuer}/users/{sub}", json=dict(claims)).raise_for_status()

    def token_requests(self) -> list[dict[str, str]]:
        """The form of every request its token endpoint received, oldest first."""
        answer = httpx.get(f"{self.issuer}{TOKEN_REQUESTS_PATH}")
        answer.raise_for_status()
        forms: list[dict[str, str]] = answer.json()
        return forms


@contextmanager
def run_oidc_provider(users: Mapping[str, Mapping[str, Any]]) -> Iterator[RunningProvider]:
    """Start the provider (``users``: subject -> claims) and stop it when the block ends."""
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.web.oidc_provider", json.dumps(users)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        # The child prints its port once the socket listens, so connections queue from then on.
        line = child.stdout.readline()
        if not line.strip().isdigit():
            raise RuntimeError(f"the OpenID provider did not start (said {line!r})")
        yield RunningProvider(issuer=f"http://127.0.0.1:{int(line)}")
    finally:
        child.terminate()
        try:
            child.wait(timeout=5)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        if child.stdout is not None:
            child.stdout.close()


class _TokenRequestRecorder:
    """Keeps each token request's form so a test can check what the client sent (PKCE)."""

    def __init__(self, app: WSGIApplication) -> None:
        self._app = app
        self._forms: list[dict[str, str]] = []

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO")
        if path == TOKEN_REQUESTS_PATH:
            start_response("200 OK", [("content-type", "application/json")])
            return [json.dumps(self._forms).encode()]
        if path == "/oauth2/token":
            body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
            self._forms.append(dict(parse_qsl(body.decode())))
            environ["wsgi.input"] = io.BytesIO(body)
        return self._app(environ, start_response)


def _serve(users: Mapping[str, Mapping[str, Any]]) -> None:
    # Imported here, not at the top: the test process imports this module too, and must not
    # import the provider (its import alone warns).
    import oidc_provider_mock
    import werkzeug.serving

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    app = oidc_provider_mock.app(
        user_claims=[oidc_provider_mock.User(sub=sub, claims=dict(c)) for sub, c in users.items()],
        require_nonce=True,
    )
    server = werkzeug.serving.make_server("127.0.0.1", 0, _TokenRequestRecorder(app), threaded=True)
    print(server.server_port, flush=True)
    server.serve_forever(poll_interval=0.05)


if __name__ == "__main__":
    _serve(json.loads(sys.argv[1]))
