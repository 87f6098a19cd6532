"""OpenID Connect sign-in: the authorization code flow with PKCE (S256), as a FastAPI router.

``OidcLogin(...).router()`` serves two routes:

- ``GET /login/oidc`` discovers the provider (``{issuer}/.well-known/openid-configuration``),
  and redirects the browser to its authorization endpoint with a fresh ``state``, ``nonce`` and
  PKCE ``code_challenge``.
- ``GET /auth/oidc/callback`` (the ``redirect_uri``, ``{public_url}/auth/oidc/callback``) checks
  the ``state``, exchanges the code (with the PKCE ``code_verifier``) at the token endpoint,
  validates the ID token (signature against the provider's JWKS, issuer, audience, expiry,
  nonce) and hands a :class:`~approvals.principals.Principal` to ``on_login``.

No ``SessionMiddleware`` is needed. The flow's ``state``, ``nonce`` and ``code_verifier`` travel
in a short-lived (10 minutes), itsdangerous-signed, HttpOnly, SameSite=Lax cookie scoped to the
callback path; it is bound to the browser that started the flow (login CSRF) and deleted by the
callback whatever its outcome. Its signing key is derived from the client secret (with a salt of
its own), so every process of a deployment accepts the cookie another one issued. Starting a
second sign-in in the same browser supersedes the first.

Every failure, from a provider that says ``error=access_denied`` to one that cannot be reached,
ends in ``on_error(request, message, status)`` with a message for a human and a 4xx or 502
status, never in a 500. Tokens are never logged.
"""

from __future__ import annotations

import hmac
import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final
from urllib.parse import urlsplit

import httpx
from authlib.integrations.starlette_client import OAuth, OAuthError
from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response
from itsdangerous import BadSignature, SignatureExpired, URLSafeTimedSerializer
from joserfc.errors import JoseError

from approvals.principals import Principal

LOGIN_PATH: Final = "/login/oidc"
CALLBACK_PATH: Final = "/auth/oidc/callback"
FLOW_COOKIE: Final = "approvals_oidc_flow"
FLOW_TTL_SECONDS: Final = 600
#: Where ``on_login`` finds the Slack user id the ID token's ``slack_claim`` named (or None):
#: ``request.state.slack_user``.
SLACK_USER_STATE: Final = "slack_user"

OnLogin = Callable[[Request, Principal], Awaitable[Response]]
OnError = Callable[[Request, str, int], Awaitable[Response]]

_log = logging.getLogger(__name__)

# What the provider puts in ``error`` is untrusted text; only an OAuth error code is repeated.
_ERROR_CODE = re.compile(r"[a-z_]{1,64}")


def _transport_errors() -> tuple[type[Exception], ...]:
    """The HTTP client errors authlib may raise: it uses ``httpx2`` when installed, else httpx."""
    errors: list[type[Exception]] = [httpx.HTTPError]
    try:
        import httpx2
    except ImportError:  # pragma: no cover - depends on the environment
        pass
    else:
        errors.append(httpx2.HTTPError)
    return tuple(errors)


_TRANSPORT_ERRORS: Final = _transport_errors()


class _SignInFailed(Exception):
    """Ends a sign-in attempt: ``message`` is shown to the person signing in."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


class OidcLogin:
    """Sign-in with one OpenID provider; ``router()`` gives the login and callback routes.

    ``on_login(request, principal)`` answers a completed sign-in (the app starts its session and
    redirects); ``on_error(request, message, status)`` answers every failed one. Both return the
    response sent to the browser. ``redirect_uri`` must be the callback route's public URL.
    """

    def __init__(
        self,
        *,
        issuer: str,
        client_id: str,
        client_secret: str,
        redirect_uri: str,
        scopes: str = "openid profile email",
        groups_claim: str = "groups",
        slack_claim: str | None = None,
        on_login: OnLogin,
        on_error: OnError,
        http_timeout: float = 10.0,
    ) -> None:
        if "openid" not in scopes.split():
            raise ValueError(f"OpenID Connect needs the 'openid' scope; got {scopes!r}")
        self._issuer = issuer.rstrip("/")
        self._redirect_uri = redirect_uri
        self._groups_claim = groups_claim
        #: The ID token claim naming the user's Slack user id (``SLACK_USER_STATE``), if any.
        self._slack_claim = slack_claim
        self._on_login = on_login
        self._on_error = on_error
        target = urlsplit(redirect_uri)
        self._cookie_path = target.path or "/"
        self._cookie_secure = target.scheme == "https"
        self._flows = URLSafeTimedSerializer(client_secret, salt="approvals.oidc.flow")
        self._client: Any = OAuth().register(
            name="oidc",
            client_id=client_id,
            client_secret=client_secret,
            server_metadata_url=f"{self._issuer}/.well-known/openid-configuration",
            client_kwargs={
                "scope": scopes,
                "code_challenge_method": "S256",
                "timeout": http_timeout,
            },
        )

    def router(self) -> APIRouter:
        """``GET /login/oidc`` and ``GET /auth/oidc/callback``, to include in the app."""
        router = APIRouter()
        router.add_api_route(LOGIN_PATH, self._login, methods=["GET"], include_in_schema=False)
        router.add_api_route(
            CALLBACK_PATH, self._callback, methods=["GET"], include_in_schema=False
        )
        return router

    # ---- the two routes ----------------------------------------------------------------------

    async def _login(self, request: Request) -> Response:
        try:
            await self._discover()
            authorization = await self._client.create_authorization_url(self._redirect_uri)
        except _SignInFailed as failure:
            return await self._on_error(request, failure.message, failure.status)
        except Exception as exc:  # see _provider_failure
            unusable = _provider_failure(exc, "starting the sign-in")
            return await self._on_error(request, unusable.message, unusable.status)
        flow = {
            "state": authorization["state"],
            "nonce": authorization["nonce"],
            "code_verifier": authorization["code_verifier"],
        }
        response = RedirectResponse(authorization["url"], status_code=302)
        response.headers["cache-control"] = "no-store"
        response.set_cookie(
            FLOW_COOKIE,
            self._flows.dumps(flow),
            max_age=FLOW_TTL_SECONDS,
            path=self._cookie_path,
            secure=self._cookie_secure,
            httponly=True,
            samesite="lax",
        )
        return response

    async def _callback(self, request: Request) -> Response:
        try:
            principal, slack_user = await self._complete(
                request.query_params, request.cookies.get(FLOW_COOKIE)
            )
        except _SignInFailed as failure:
            response = await self._on_error(request, failure.message, failure.status)
        else:
            setattr(request.state, SLACK_USER_STATE, slack_user)
            response = await self._on_login(request, principal)
        # One flow, one callback: a replayed callback URL finds no cookie.
        response.delete_cookie(
            FLOW_COOKIE,
            path=self._cookie_path,
            secure=self._cookie_secure,
            httponly=True,
            samesite="lax",
        )
        return response

    # ---- the steps -----------------------------------------------------------------------------

    async def _discover(self) -> Mapping[str, Any]:
        metadata: Mapping[str, Any] = await self._client.load_server_metadata()
        announced = str(metadata.get("issuer", "")).rstrip("/")
        # OpenID Connect Discovery 1.0, section 4.3: the document must name the issuer we asked.
        if announced != self._issuer:
            raise _SignInFailed(
                f"The sign-in provider at {self._issuer} names a different issuer "
                f"({announced or 'none'}); ask an operator to check the OIDC settings.",
                502,
            )
        return metadata

    async def _complete(
        self, params: Mapping[str, str], cookie: str | None
    ) -> tuple[Principal, str | None]:
        error = params.get("error")
        if error:
            raise _provider_refusal(error)
        flow = self._read_flow(cookie)
        state = params.get("state", "")
        if not state or not hmac.compare_digest(state.encode(), str(flow["state"]).encode()):
            raise _SignInFailed(
                "This sign-in response does not belong to the sign-in started in this browser "
                "(state mismatch). Please sign in again.",
                400,
            )
        code = params.get("code")
        if not code:
            raise _SignInFailed("The sign-in provider sent no authorization code.", 400)
        try:
            metadata = await self._discover()
            token = await self._client.fetch_access_token(
                redirect_uri=self._redirect_uri,
                code=code,
                code_verifier=flow["code_verifier"],
            )
            # The issuer and this app's client id, both essential: authlib checks the audience
            # only when told to (without it, a token for another client with our azp passed).
            claims = await self._client.parse_id_token(
                token,
                nonce=flow["nonce"],
                claims_options={
                    "iss": {"essential": True, "values": [metadata["issuer"]]},
                    "aud": {"essential": True, "values": [self._client.client_id]},
                },
            )
            if claims is None:
                raise _SignInFailed("The sign-in provider returned no ID token.", 502)
            groups = claims.get(self._groups_claim)
            if self._groups_claim not in claims and metadata.get("userinfo_endpoint"):
                groups = await self._userinfo_claim(token, claims["sub"])
        except _SignInFailed:
            raise
        except OAuthError as exc:
            raise _token_refusal(exc) from None
        except Exception as exc:  # see _provider_failure
            raise _provider_failure(exc, "completing the sign-in") from None
        # Only from the ID token, which the provider signed (never from userinfo).
        slack_user = claims.get(self._slack_claim) if self._slack_claim else None
        return _principal(claims, groups), slack_user if isinstance(slack_user, str) else None

    def _read_flow(self, cookie: str | None) -> Mapping[str, Any]:
        if not cookie:
            raise _SignInFailed(
                "No sign-in was started in this browser, or cookies are blocked. "
                "Please sign in again.",
                400,
            )
        try:
            flow = self._flows.loads(cookie, max_age=FLOW_TTL_SECONDS)
        except SignatureExpired:
            raise _SignInFailed(
                "The sign-in took too long and expired. Please sign in again.", 400
            ) from None
        except BadSignature:
            raise _SignInFailed(
                "The sign-in could not be verified. Please sign in again.", 400
            ) from None
        if not isinstance(flow, dict) or not all(
            isinstance(flow.get(k), str) for k in ("state", "nonce", "code_verifier")
        ):
            raise _SignInFailed("The sign-in could not be verified. Please sign in again.", 400)
        return flow

    async def _userinfo_claim(self, token: Mapping[str, Any], subject: object) -> object:
        """The groups claim from the userinfo endpoint, for providers that keep it out of the
        ID token. Its ``sub`` must be the ID token's (OpenID Connect Core 1.0, 5.3.2)."""
        info: Mapping[str, Any] = await self._client.userinfo(token=token)
        if info.get("sub") != subject:
            raise _SignInFailed("The sign-in provider's user information names another user.", 502)
        return info.get(self._groups_claim)


# ---- turning answers into a principal or a message ---------------------------------------------


def _principal(claims: Mapping[str, Any], groups_value: object) -> Principal:
    issuer, subject = claims.get("iss"), claims.get("sub")
    if not isinstance(issuer, str) or not isinstance(subject, str) or not subject:
        raise _SignInFailed("The sign-in provider's ID token names no user.", 502)
    name = next(
        (
            value
            for key in ("preferred_username", "name", "email")
            if isinstance(value := claims.get(key), str) and value
        ),
        subject,
    )
    return Principal.oidc(issuer=issuer, subject=subject, name=name, groups=groups_of(groups_value))


def groups_of(value: object) -> frozenset[str]:
    """A groups claim as groups: a list of strings or one string; anything else is none."""
    if isinstance(value, str):
        return frozenset({value}) if value else frozenset()
    if isinstance(value, list) and all(isinstance(group, str) for group in value):
        return frozenset(group for group in value if group)
    return frozenset()


def _provider_refusal(error: str) -> _SignInFailed:
    """The provider redirected back with ``error=...`` instead of a code."""
    if error == "access_denied":
        return _SignInFailed("Sign-in was cancelled: consent was not given to this app.", 403)
    code = error if _ERROR_CODE.fullmatch(error) else "unknown error"
    if code in ("server_error", "temporarily_unavailable"):
        return _SignInFailed(
            f"The sign-in provider could not complete the sign-in ({code}). Try again later.",
            502,
        )
    return _SignInFailed(f"The sign-in provider refused the sign-in ({code}).", 400)


def _token_refusal(exc: OAuthError) -> _SignInFailed:
    """The token endpoint answered with an OAuth error instead of tokens."""
    error = str(exc.error or "")
    code = error if _ERROR_CODE.fullmatch(error) else "unknown error"
    _log.warning("OIDC token request refused: %s", code)
    if code == "invalid_grant":
        return _SignInFailed(
            "The sign-in code was invalid, expired or already used. Please sign in again.", 400
        )
    return _SignInFailed(
        f"The sign-in provider would not issue tokens ({code}); "
        "ask an operator to check the OIDC client settings.",
        502,
    )


def _provider_failure(exc: Exception, step: str) -> _SignInFailed:
    """Any other failure while talking to the provider.

    Its answers go through a JSON parser, a JWK importer, a JWS verifier and claim checks; any
    of them failing is the provider's (or the network's) fault and a 502, never a 500. Only the
    exception's type is logged: messages can quote what the provider sent.
    """
    if isinstance(exc, _TRANSPORT_ERRORS):
        _log.warning("OIDC provider unreachable while %s: %s", step, type(exc).__name__)
        return _SignInFailed(
            "The sign-in provider could not be reached. Try again later, or ask an operator "
            "to check the OIDC issuer setting.",
            502,
        )
    if isinstance(exc, JoseError):
        _log.warning("OIDC ID token rejected: %s", type(exc).__name__)
        return _SignInFailed("The sign-in provider's ID token was not valid.", 502)
    _log.warning("OIDC provider answer unusable while %s: %s", step, type(exc).__name__)
    return _SignInFailed("The sign-in provider's answer could not be used.", 502)
