"""Settings from the environment (``APPROVALS_*``) and an optional ``approvals.toml``."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict, SettingsError

from approvals.errors import ConfigurationError


class Settings(BaseSettings):
    """Engine settings. ``database_url`` unset means: start the embedded PostgreSQL."""

    model_config = SettingsConfigDict(env_prefix="APPROVALS_", extra="ignore")

    database_url: str | None = None
    data_dir: Path = Path(".approvals")
    config_file: Path = Path("approvals.toml")
    request_ttl_seconds: int = Field(default=24 * 3600, gt=0)
    worker_concurrency: int = Field(default=4, ge=1, le=64)
    pool_max_size: int = Field(default=20, ge=2, le=500)
    graphs: dict[str, str] = Field(default_factory=dict)

    # ---- the web app -------------------------------------------------------------------
    #: Signs session cookies and CSRF tokens. Unset: a random key kept in ``<data_dir>/secret_key``
    #: (created on first use), so one machine's processes agree and restarts keep sessions.
    secret_key: str | None = Field(default=None, min_length=32)
    #: The URL approvers reach the app at (links in notifications, the OIDC redirect URI).
    public_url: str = "http://127.0.0.1:8000"
    session_ttl_seconds: int = Field(default=8 * 3600, gt=0, le=30 * 24 * 3600)
    #: Who may decide a request whose policy named no approver group.
    default_approver_group: str = "approvers"
    #: Members of this group see every request and the operators' views; they decide only what
    #: their other groups allow.
    operator_group: str = "operators"
    max_body_bytes: int = Field(default=256 * 1024, ge=1024)
    #: Failed sign-ins per user name and client address before a pause.
    login_attempts: int = Field(default=5, ge=1)
    login_window_seconds: int = Field(default=300, ge=1)
    #: OpenID Connect (all three set: the login page offers it). The principal is issuer + subject.
    oidc_issuer: str | None = None
    oidc_client_id: str | None = None
    oidc_client_secret: str | None = None
    oidc_groups_claim: str = "groups"
    oidc_scopes: str = "openid profile email"

    @property
    def oidc_enabled(self) -> bool:
        return bool(self.oidc_issuer and self.oidc_client_id and self.oidc_client_secret)

    @model_validator(mode="after")
    def _pool_fits_workers(self) -> Settings:
        check_pool_size(self.pool_max_size, self.worker_concurrency)
        return self

    def graph_entries(self) -> dict[str, str]:
        """Registry entries: ``[graphs]`` of the config file, then ``APPROVALS_GRAPHS``."""
        entries: dict[str, str] = {}
        if self.config_file.is_file():
            try:
                doc: dict[str, Any] = tomllib.loads(self.config_file.read_text(encoding="utf-8"))
            except (tomllib.TOMLDecodeError, OSError) as exc:
                raise ConfigurationError(f"{self.config_file}: {exc}") from exc
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
