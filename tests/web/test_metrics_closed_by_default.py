"""``/metrics`` is closed by default: with no ``APPROVALS_METRICS_TOKEN`` it is off (404), to
anyone and whatever they send; it is never open to whoever can reach the app (issue 30, item 3)."""

from __future__ import annotations

import httpx

from tests.web.conftest import Server


def test_metrics_are_off_without_a_configured_token(server: Server) -> None:
    assert server.settings.metrics_token is None
    anonymous = httpx.get(f"{server.url}/metrics", timeout=30)
    assert anonymous.status_code == 404, anonymous.text
    assert "approvals_" not in anonymous.text
    guessed = httpx.get(
        f"{server.url}/metrics", headers={"authorization": "Bearer anything-at-all"}, timeout=30
    )
    assert guessed.status_code == 404
    assert "approvals_" not in guessed.text


def test_health_probes_stay_open_when_metrics_are_off(server: Server) -> None:
    assert httpx.get(f"{server.url}/healthz", timeout=30).status_code == 200
