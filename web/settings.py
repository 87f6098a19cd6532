"""Settings from the environment (``APPROVALS_*``) and an optional ``approvals.toml``."""

from __future__ import annotations

import base64
import binascii
import ipaddress
import json
import os
import tomllib
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SecretsSettingsSource,
    SettingsConfigDict,
    SettingsError,
)

from approvals.errors import ConfigurationError

#: The prefix of a Standard Webhooks secret: ``whsec_`` and the key, base64-encoded.
WHSEC_PREFIX = "whsec_"


def whsec_key(secret: str) -> bytes:
    """The key of a ``whsec_<base64>`` secret; ``ValueError`` when it is not one, or its key
    is shorter than 16 bytes."""
    if not secret.startswith(WHSEC_PREFIX):
        raise ValueError("a Standard Webhooks secret starts with whsec_")
    try:
        key = base64.b64decode(secret.removeprefix(WHSEC_PREFIX), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("the part after whsec_ is not base64") from None
    if len(key) < 16:
        raise ValueError("a Standard Webhooks key needs at least 16 bytes (use 32)")
    return key


class WebhookTarget(BaseModel):
    """A webhook notifications are posted to, and the secrets its bodies are signed with."""

    url: str = Field(pattern=r"^https?://")
    #: The secret of the old ``X-Approvals-Signature`` header (and, when ``secrets`` is empty,
    #: the key of the Standard Webhooks signature: its ``whsec_`` form is ``whsec_`` and the
    #: base64 of its UTF-8 bytes).
    secret: SecretStr | None = Field(default=None, min_length=16)
    #: Standard Webhooks secrets (``whsec_<base64>``), every one active: each delivery carries
    #: a ``v1,`` signature by each, so a secret is rotated without a gap.
    secrets: list[SecretStr] = Field(default_factory=list)
    #: How its deliveries are named in the log (default: its host and a digest of its URL).
    name: str | None = Field(default=None, min_length=1, max_length=100)

    @field_validator("secrets")
    @classmethod
    def _whsec(cls, value: list[SecretStr]) -> list[SecretStr]:
        for secret in value:
            whsec_key(secret.get_secret_value())
        return value

    @model_validator(mode="after")
    def _signed(self) -> WebhookTarget:
        if self.secret is None and not self.secrets:
            raise ValueError("a webhook needs a secret or secrets (whsec_...) to sign with")
        return self


def _langgraph_graphs(path: Path) -> dict[str, str]:
    """The ``graphs`` map of a LangGraph ``langgraph.json``, as registry entries: a file path
    (``./src/agent.py:graph``) is made absolute, relative to the file; a module path
    (``agent.graph:graph``) stays as it is."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"{path}: {exc}") from exc
    graphs = doc.get("graphs") if isinstance(doc, dict) else None
    if not isinstance(graphs, dict):
        raise ConfigurationError(f'{path}: no "graphs" object')
    entries: dict[str, str] = {}
    for name, spec in graphs.items():
        # Newer files may give {"path": "...", "description": "..."}.
        target = spec.get("path") if isinstance(spec, dict) else spec
        if not isinstance(name, str) or not isinstance(target, str) or ":" not in target:
            raise ConfigurationError(f'{path}: graphs entry {name!r} must be "path:attr"')
        location, _, attr = target.rpartition(":")
        if location.endswith(".py"):
            location = str((path.parent / location).resolve())
        entries[name] = f"{location}:{attr}"
    return entries


class Settings(BaseSettings):
    """Engine settings. ``database_url`` unset means: start the embedded PostgreSQL."""

    model_config = SettingsConfigDict(env_prefix="APPROVALS_", extra="ignore")

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Arguments, then the environment, then ``APPROVALS_SECRETS_DIR``'s files (mounted
        secrets: a file ``approvals_secret_key`` holds ``APPROVALS_SECRET_KEY``), read when the
        settings are made, not when this module is imported."""
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        directory = os.environ.get("APPROVALS_SECRETS_DIR")
        if directory:
            if not Path(directory).is_dir():
                raise ConfigurationError(f"APPROVALS_SECRETS_DIR: {directory} is not a directory")
            sources.append(SecretsSettingsSource(settings_cls, secrets_dir=directory))
        return tuple(sources)

    #: Secret (it may hold a password): never in a repr, a log or an error message.
    database_url: SecretStr | None = None
    data_dir: Path = Path(".approvals")
    config_file: Path = Path("approvals.toml")
    request_ttl_seconds: int = Field(default=24 * 3600, gt=0)
    worker_concurrency: int = Field(default=4, ge=1, le=64)
    pool_max_size: int = Field(default=20, ge=2, le=500)
    #: How long a start waits for a place among the runs a process starts at once (half the
    #: pool, docs/deployment.md "Pool sizing") before it is refused (``StartsBusy``, a 503
    #: with Retry-After), with nothing written. 0: refused at once when none is free.
    start_wait_seconds: float = Field(default=10.0, ge=0, le=600)
    #: Refuse a rejection without a reason (the web form, the API, the CLI). Off by default,
    #: as HumanInTheLoopMiddleware takes a reject without one (the model gets its default text).
    require_reject_reason: bool = False
    graphs: dict[str, str] = Field(default_factory=dict)
    #: Register the example agents (refund, email, refund_openai) beside ``graphs``:
    #: ``approvals demo`` does by itself; a deployment registers only its own.
    examples: bool = False

    # ---- the web app -------------------------------------------------------------------
    #: Signs session cookies and CSRF tokens. Unset: a random key kept in ``<data_dir>/secret_key``
    #: (created on first use), so one machine's processes agree and restarts keep sessions.
    secret_key: SecretStr | None = Field(default=None, min_length=32)
    #: The URL approvers reach the app at (links in notifications, the OIDC redirect URI).
    public_url: str = "http://127.0.0.1:8000"
    session_ttl_seconds: int = Field(default=8 * 3600, gt=0, le=30 * 24 * 3600)
    #: How long a process may reuse its last look at a session for a page view (sessions are
    #: rows in the database; state-changing requests always look again). 0: look every time.
    session_cache_seconds: float = Field(default=3.0, ge=0, le=10)
    #: Who may decide a request whose policy named no approver group.
    default_approver_group: str = "approvers"
    #: Members of this group see every request and the operators' views; they decide only what
    #: their other groups allow.
    operator_group: str = "operators"
    max_body_bytes: int = Field(default=256 * 1024, ge=1024)
    #: Failed sign-ins per user name and client address before a pause.
    login_attempts: int = Field(default=5, ge=1)
    #: Failed sign-ins per user name from all addresses together before a pause (bounds guessing
    #: from many addresses; see docs/security.md). Unset: four times ``login_attempts``.
    login_account_attempts: int | None = Field(default=None, ge=1)
    login_window_seconds: int = Field(default=300, ge=1)
    #: Addresses (or networks, ``10.0.0.0/8``) of the reverse proxies whose ``X-Forwarded-For``
    #: and ``X-Forwarded-Proto`` are believed: a JSON list or comma-separated. Empty (the
    #: default): none, the client address is the TCP peer's. ``*`` trusts every peer: only when
    #: nothing but the proxy can reach the app.
    trusted_proxies: Annotated[list[str], NoDecode] = Field(default_factory=list)
    #: OpenID Connect (all three set: the login page offers it). The principal is issuer + subject.
    oidc_issuer: str | None = None
    oidc_client_id: str | None = None
    oidc_client_secret: SecretStr | None = None
    oidc_groups_claim: str = "groups"
    oidc_scopes: str = "openid profile email"

    # ---- notifications (docs/notifications.md); nothing configured: nothing is sent -----
    #: Webhooks told when a call starts waiting or is escalated: a JSON list of
    #: ``{"url": ..., "secret": ..., "name": ...}`` (name optional). Bodies are signed with
    #: HMAC-SHA256 under the secret.
    notify_webhooks: list[WebhookTarget] = Field(default_factory=list)
    #: Also sign webhooks the old way (``X-Approvals-Timestamp``, ``X-Approvals-Signature``),
    #: beside the Standard Webhooks headers, for receivers not yet moved over. On for this
    #: release only (docs/notifications.md, "Migrating from X-Approvals-Signature").
    webhook_legacy_signature: bool = True
    #: A Slack-compatible incoming-webhook URL (itself a secret: whoever has it may post).
    notify_slack_webhook: SecretStr | None = None
    #: E-mail over SMTP: sent when the host and at least one recipient are set.
    notify_smtp_host: str | None = None
    notify_smtp_port: int = Field(default=25, ge=1, le=65535)
    notify_smtp_from: str = "approvals@localhost"
    #: Recipients (a JSON list or comma-separated) of requests whose approver groups have no
    #: addresses of their own in ``notify_smtp_group_to`` (``{"finance": ["f@example.com"]}``).
    notify_smtp_to: Annotated[list[str], NoDecode] = Field(default_factory=list)
    notify_smtp_group_to: dict[str, list[str]] = Field(default_factory=dict)
    notify_smtp_starttls: bool = False
    notify_smtp_user: str | None = None
    notify_smtp_password: SecretStr | None = None
    #: Local accounts' own addresses (``{"ada": "ada@example.com"}``): each enabled account
    #: that may decide a waiting request gets an e-mail of its own carrying one-time links
    #: that decide it (docs/notifications.md, "Deciding from an e-mail").
    notify_smtp_accounts: dict[str, str] = Field(default_factory=dict)
    #: How long a one-time e-mail link stays valid at most (never past its request's expiry).
    email_link_seconds: int = Field(default=24 * 3600, gt=0, le=30 * 24 * 3600)
    #: The Slack app (docs/notifications.md, "Deciding from Slack"): its bot token
    #: (``xoxb-...``) posts a waiting call's message, with buttons, and updates it once decided.
    slack_bot_token: SecretStr | None = None
    #: The app's signing secret: ``/integrations/slack/interactions`` answers only what it signs.
    slack_signing_secret: SecretStr | None = None
    #: The channel (its id, ``C0123ABCD``) of requests whose approver groups have none of
    #: their own in ``slack_group_channels`` (``{"finance": "C0456EFGH"}``).
    slack_channel: str | None = None
    slack_group_channels: dict[str, str] = Field(default_factory=dict)
    #: Slack's Web API (tests point it at a stand-in on loopback).
    slack_api_url: str = Field(default="https://slack.com/api/", pattern=r"^https?://")
    #: The ID token claim that names an OpenID Connect user's Slack user id (``slack_user_id``,
    #: or ``https://slack.com/user_id`` from Sign in with Slack): a sign-in with it links that
    #: Slack user to the principal, whose clicks then decide with its last sign-in's groups
    #: while that sign-in's web session lives. Unset: only ``approvals users link`` links.
    slack_oidc_claim: str | None = Field(default=None, min_length=1)
    #: Per attempt: connect, send and wait for the answer.
    notify_timeout_seconds: float = Field(default=10.0, gt=0, le=300)
    #: Attempts per notification before it is given up (logged as failed).
    notify_max_attempts: int = Field(default=6, ge=1, le=50)
    #: Wait before the second attempt; it doubles with each attempt, up to the maximum.
    notify_backoff_seconds: float = Field(default=10.0, gt=0)
    notify_backoff_max_seconds: float = Field(default=3600.0, gt=0)
    #: How often the notifier looks for pending requests and due retries.
    notify_poll_seconds: float = Field(default=2.0, gt=0, le=3600)

    @field_validator("notify_smtp_to", "trusted_proxies", mode="before")
    @classmethod
    def _addresses(cls, value: Any) -> Any:
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("["):
                return json.loads(text)
            return [a.strip() for a in text.split(",") if a.strip()]
        return value

    @field_validator("trusted_proxies")
    @classmethod
    def _proxies(cls, value: list[str]) -> list[str]:
        normal = []
        for entry in value:
            if entry == "*":
                normal.append(entry)
                continue
            try:
                # strict=False: 10.0.0.1/8 means 10.0.0.0/8, as uvicorn (strict) needs it.
                normal.append(str(ipaddress.ip_network(entry, strict=False)))
            except ValueError:
                raise ValueError(
                    f"{entry[:80]!r} is not an IP address or network (or '*')"
                ) from None
        return normal

    @property
    def oidc_enabled(self) -> bool:
        return bool(self.oidc_issuer and self.oidc_client_id and self.oidc_client_secret)

    @model_validator(mode="after")
    def _pool_fits_workers(self) -> Settings:
        check_pool_size(self.pool_max_size, self.worker_concurrency)
        return self

    def graph_entries(self) -> dict[str, str]:
        """Registry entries: the ``graphs`` of the ``langgraph.json`` the config file names
        (``langgraph_json = "langgraph.json"``), then its ``[graphs]``, then
        ``APPROVALS_GRAPHS``."""
        entries: dict[str, str] = {}
        if self.config_file.is_file():
            try:
                doc: dict[str, Any] = tomllib.loads(self.config_file.read_text(encoding="utf-8"))
            except (tomllib.TOMLDecodeError, OSError) as exc:
                raise ConfigurationError(f"{self.config_file}: {exc}") from exc
            named = doc.get("langgraph_json")
            if named is not None:
                if not isinstance(named, str) or not named:
                    raise ConfigurationError(
                        f"{self.config_file}: langgraph_json must name a langgraph.json file"
                    )
                entries.update(_langgraph_graphs(self.config_file.parent / named))
            table = doc.get("graphs", {})
            if not isinstance(table, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in table.items()
            ):
                raise ConfigurationError(
                    f'{self.config_file}: [graphs] entries must be name = "module:attr"'
                )
            entries.update(table)
        entries.update(self.graphs)
        return entries

    # ---- the expiry sweeper (docs/deployment.md) ----------------------------------------
    #: How often workers expire (or escalate) requests past their deadline.
    sweep_interval_seconds: float = Field(default=5.0, gt=0, le=3600)

    # ---- operations (docs/operations.md) ------------------------------------------------
    #: ``json``: the serve and worker commands log one JSON object per line (stderr).
    log_format: str = Field(default="text", pattern=r"^(text|json)$")
    log_level: str = Field(default="INFO", pattern=r"^(DEBUG|INFO|WARNING|ERROR)$")
    #: Set: ``/metrics`` requires ``Authorization: Bearer <token>``. Unset: ``/metrics`` is off
    #: (404), so metrics are never open to whoever can reach the app.
    metrics_token: SecretStr | None = Field(default=None, min_length=16)
    #: What ``approvals retention prune`` deletes by default: checkpoints of threads whose runs
    #: all ended longer ago than this (``90m``, ``12h``, ``30d``, ``8w``).
    retention_older_than: str = Field(default="30d", pattern=r"^[1-9][0-9]*[smhdw]$")

    # ---- database roles and the audit anchor (docs/deployment.md, docs/operations.md) ----
    #: The tables' owner, for ``db upgrade``, ``db grant`` and serve's start-up migration;
    #: unset: ``database_url``. Set it when ``database_url`` is the runtime role.
    migration_database_url: SecretStr | None = None
    #: The runtime role ``db upgrade`` grants again after migrating, so new tables are covered.
    runtime_role: str | None = Field(default=None, min_length=1, max_length=63)
    #: Signs ``audit anchor`` heads. Unset: a random key kept in ``<data_dir>/audit_anchor_key``.
    audit_anchor_key: SecretStr | None = Field(default=None, min_length=32)


def check_pool_size(pool_max_size: int, concurrency: int) -> None:
    """Each resume holds a connection for its claim and needs more for the run itself."""
    needed = 2 * concurrency + 2
    if pool_max_size < needed:
        raise ConfigurationError(
            f"a pool of {pool_max_size} connections is too small for {concurrency} concurrent "
            f"resumes; give APPROVALS_POOL_MAX_SIZE at least {needed}"
        )


def load_settings() -> Settings:
    try:
        return Settings()
    except SettingsError as exc:
        raise ConfigurationError(str(exc)) from None
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        raise ConfigurationError(f"APPROVALS_{field.upper()}: {first['msg']}") from None


def revealed(value: SecretStr | str | None) -> str | None:
    """A secret setting's text, where it is used (a ``model_copy`` update may hold the text
    itself)."""
    if value is None or isinstance(value, str):
        return value
    return value.get_secret_value()
