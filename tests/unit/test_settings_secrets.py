"""Secret settings (the database URLs, the app's secret key, the OIDC client secret) are
``SecretStr``: never in a repr, a log or a validation error; they may come from files in
``APPROVALS_SECRETS_DIR`` (mounted secrets), below the environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from approvals.errors import ConfigurationError
from web.settings import Settings, load_settings, revealed

URL = "postgresql://approvals:s3cr3t-pw@db.internal:5432/approvals"
KEY = "k" * 40


def test_secrets_are_kept_out_of_every_repr(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APPROVALS_DATABASE_URL", URL)
    monkeypatch.setenv("APPROVALS_MIGRATION_DATABASE_URL", URL)
    monkeypatch.setenv("APPROVALS_SECRET_KEY", KEY)
    monkeypatch.setenv("APPROVALS_OIDC_CLIENT_SECRET", "client-secret-value")
    settings = load_settings()
    shown = repr(settings) + str(settings.model_dump())
    for secret in ("s3cr3t-pw", KEY, "client-secret-value"):
        assert secret not in shown
    assert revealed(settings.database_url) == URL
    assert revealed(settings.migration_database_url) == URL
    assert revealed(settings.secret_key) == KEY
    assert revealed(settings.oidc_client_secret) == "client-secret-value"


def test_a_short_secret_key_is_refused_without_echoing_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("APPROVALS_SECRET_KEY", "too-short-key")
    with pytest.raises(ConfigurationError) as refused:
        load_settings()
    assert "APPROVALS_SECRET_KEY" in str(refused.value)
    assert "too-short-key" not in str(refused.value)


def test_mounted_secrets_are_read_from_the_secrets_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "approvals_secret_key").write_text(KEY + "\n")
    (tmp_path / "approvals_database_url").write_text(URL)
    monkeypatch.setenv("APPROVALS_SECRETS_DIR", str(tmp_path))
    monkeypatch.delenv("APPROVALS_SECRET_KEY", raising=False)
    monkeypatch.delenv("APPROVALS_DATABASE_URL", raising=False)
    settings = load_settings()
    assert revealed(settings.secret_key) == KEY
    assert revealed(settings.database_url) == URL
    # The environment wins over a file.
    monkeypatch.setenv("APPROVALS_DATABASE_URL", "postgresql://other@/x")
    assert revealed(load_settings().database_url) == "postgresql://other@/x"


def test_a_secrets_dir_that_is_not_a_directory_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("APPROVALS_SECRETS_DIR", str(tmp_path / "missing"))
    with pytest.raises(ConfigurationError, match="APPROVALS_SECRETS_DIR"):
        load_settings()


def test_a_model_copy_may_hold_the_text_itself() -> None:
    copied = Settings().model_copy(update={"database_url": URL})
    assert revealed(copied.database_url) == URL
