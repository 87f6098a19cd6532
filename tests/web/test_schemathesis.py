"""The JSON API keeps the contract of its own OpenAPI document, whatever it is sent.

schemathesis sends every operation generated requests, valid and invalid, over real HTTP to
the app under uvicorn: no answer may be a 5xx, and every answer must have a documented status,
the documented content type and a body that fits its schema. Once as an approver who can see
things (with a refund waiting for a decision, so there is data to show), once with no token,
where every operation must answer its documented 401.

The run is bounded and deterministic (a fixed seed, derandomized generation, no example
database, no deadline), so CI sends the same requests every time.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.core.transport import DEFAULT_RESPONSE_TIMEOUT
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.integration.helpers import person_token
from tests.web.conftest import Server
from web.app import openapi
from web.engine import Engine
from web.faces.request_stream import KEEPALIVE_SECONDS
from web.settings import Settings

SEED = 20240611
MAX_EXAMPLES = 30

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]

# Built from the app itself (no database needed) so that pytest collects one test per operation
# before any server runs; test_the_fuzzed_document_is_the_one_the_server_serves proves it is
# the document /api/openapi.json serves.
DOCUMENT = openapi(Settings(secret_key="k" * 48, config_file=Path("/nonexistent/approvals.toml")))

schema = schemathesis.openapi.from_dict(
    DOCUMENT,
    # Explicit, so that no schemathesis.toml lying around changes what CI runs.
    config=schemathesis.Config.from_dict(
        {
            "seed": SEED,
            "generation": {
                "mode": "all",
                "max-examples": MAX_EXAMPLES,
                "deterministic": True,
                "database": "none",
            },
        }
    ),
)

# The server under test runs in a thread of this process, and its connection pool draws from
# the global ``random`` (psycopg_pool jitters each new connection's lifetime). When that happens
# while Hypothesis draws an example, Hypothesis takes it for a strategy using ``random`` and
# warns; the warning says nothing about the API, so it must not fail these tests.
pytestmark = pytest.mark.filterwarnings(
    "ignore:Do not use the `random` module inside strategies"
    ":hypothesis.errors.HypothesisDeprecationWarning"
)

# One server (and database) serves every example of an operation, as it would serve a real
# client: what earlier examples left behind (refused runs, say) is part of the test.
ONE_SERVER_PER_OPERATION = settings(
    deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@dataclass(frozen=True, slots=True)
class Approver:
    secret: str
    run_id: str
    request_id: str

    @property
    def headers(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self.secret}"}


@pytest_asyncio.fixture(loop_scope="session")
async def approver(engine: Engine) -> Approver:
    """A token for someone who sees pending calls and runs, and a refund waiting for them."""
    # The run pauses at the refund's approval (it does not hang), so GET /pending lists a real
    # PendingCallView for the schema check, not only an empty list.
    run = await engine.runner.start("refund", {"message": "refund 1001"}, principal="local:shop")
    assert run.pending, run
    secret = await person_token(engine, "fuzzer", "support", "operators")
    return Approver(secret=secret, run_id=run.run_id, request_id=run.pending[0])


def refused_before_authentication(
    case: schemathesis.Case[Any], response: schemathesis.Response
) -> bool:
    """Requests the framework refuses before any route runs, so before the token is looked at:
    a method the path does not have (405), a body that is not JSON at all (422)."""
    if case.method.upper() != case.operation.method.upper():
        return True
    sent = response.request.body
    if not isinstance(sent, bytes | str) or not sent:
        return False
    try:
        json.loads(sent)
    except ValueError:  # UnicodeDecodeError included
        return True
    return False


def test_the_fuzzed_document_is_the_one_the_server_serves(server: Server) -> None:
    served = httpx.get(f"{server.url}/api/openapi.json", timeout=30)
    assert served.status_code == 200
    assert served.json() == DOCUMENT


#: How long an accepted event stream is read before it is checked. The stream of an approver's
#: requests never ends; schemathesis reads one until its request timeout (10 s by default) and
#: checks what came. Nothing changes while these examples run and the first keepalive comes
#: after request_stream.KEEPALIVE_SECONDS (15 s), so all the stream sends is its headers and its
#: ``retry:`` line, at once: reading five seconds instead of ten sees the same bytes. Five, not
#: less: the timeout also bounds the wait for the headers, which a loaded machine can delay.
STREAM_SECONDS = 5.0
assert STREAM_SECONDS < DEFAULT_RESPONSE_TIMEOUT < KEEPALIVE_SECONDS


def reading(case: schemathesis.Case[Any]) -> float:
    """The request timeout for ``case``: ``STREAM_SECONDS`` for the one event stream whose
    accepted requests stay open, schemathesis' own default for the rest."""
    if case.operation.path == "/api/v1/pending/events" and case.method.upper() == "GET":
        return STREAM_SECONDS
    return DEFAULT_RESPONSE_TIMEOUT


@schema.parametrize()
@ONE_SERVER_PER_OPERATION
def test_an_approver_never_meets_a_5xx_or_an_undocumented_answer(
    case: schemathesis.Case[Any], server: Server, approver: Approver
) -> None:
    case.call_and_validate(
        base_url=server.url, headers=approver.headers, checks=CHECKS, timeout=reading(case)
    )


@schema.parametrize()
@ONE_SERVER_PER_OPERATION
def test_without_a_token_every_operation_answers_its_documented_401(
    case: schemathesis.Case[Any], server: Server
) -> None:
    response = case.call_and_validate(base_url=server.url, checks=CHECKS)
    if not refused_before_authentication(case, response):
        assert response.status_code == 401, f"{case.method} {case.formatted_path}: {response.text}"


def test_real_requests_and_runs_answer_within_their_schema(
    server: Server, approver: Approver
) -> None:
    # Generated ids never name the waiting refund: these cases do, so the success bodies
    # (a PendingCallView, a RunReport, a decision) are checked against the schema too.
    pending = schema["/api/v1/pending/{request_id}"]["GET"]
    decision = schema["/api/v1/pending/{request_id}/decision"]["POST"]
    run = schema["/api/v1/runs/{run_id}"]["GET"]
    cases = [
        (schema["/api/v1/pending"]["GET"].Case(), 200),
        (pending.Case(path_parameters={"request_id": approver.request_id}), 200),
        (run.Case(path_parameters={"run_id": approver.run_id}), 200),
        # A NUL that PostgreSQL cannot store: the documented 422, not a 500, and nothing decided
        # (the reject below still wins).
        (
            decision.Case(
                path_parameters={"request_id": approver.request_id},
                body={"decision": "reject", "reason": "no\x00"},
            ),
            422,
        ),
        (
            decision.Case(
                path_parameters={"request_id": approver.request_id},
                body={"decision": "reject", "reason": "schemathesis says no"},
            ),
            200,
        ),
        (
            decision.Case(
                path_parameters={"request_id": approver.request_id},
                body={"decision": "approve"},
            ),
            409,
        ),
    ]
    for case, status in cases:
        response = case.call_and_validate(
            base_url=server.url, headers=approver.headers, checks=CHECKS
        )
        assert response.status_code == status, f"{case.method} {case.formatted_path}"
    listed = httpx.get(f"{server.url}/api/v1/pending", headers=approver.headers, timeout=30)
    assert listed.json() == []
