"""The JSON API over real HTTP: bearer tokens, who may see and decide, statuses, races."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from tests.integration.helpers import person_token, scalar, until
from tests.waiting import eventually
from tests.web.conftest import Server, failed_refund
from web.engine import Engine


async def token(engine: Engine, name: str, *groups: str) -> str:
    """A person's token: it belongs to a local account of the same name."""
    return await person_token(engine, name, *groups)


def client(server: Server, secret: str | None) -> httpx.AsyncClient:
    headers = {"authorization": f"Bearer {secret}"} if secret else {}
    return httpx.AsyncClient(base_url=server.url, headers=headers, timeout=60)


async def wait_for_run(api: httpx.AsyncClient, run_id: str, status: str) -> dict[str, object]:
    """The run's report over the API, once it says ``status``."""

    async def reached() -> dict[str, object] | None:
        report: dict[str, object] = (await api.get(f"/api/v1/runs/{run_id}")).json()
        return report if report.get("status") == status else None

    return await eventually(reached, what=f"run {run_id} to be {status} (GET /api/v1/runs)")


async def started_refund(
    server: Server, engine: Engine, shop: str | None = None
) -> tuple[str, str]:
    """A refund run started through the API by token ``shop`` (made here when not given);
    its pending request."""
    shop = shop or await token(engine, "shop", "agents")
    async with client(server, shop) as api:
        started = await api.post(
            "/api/v1/runs", json={"graph": "refund", "input": {"message": "refund 1001"}}
        )
    assert started.status_code == 200, started.text
    run = started.json()
    assert run["status"] == "waiting"
    return run["run_id"], run["pending"][0]


async def test_no_token_or_a_bad_or_revoked_token_is_401(server: Server, engine: Engine) -> None:
    secret = await token(engine, "bot", "support")
    async with client(server, None) as api:
        missing = await api.get("/api/v1/pending")
    async with client(server, "apv_" + "x" * 43) as api:
        wrong = await api.get("/api/v1/pending")
    async with client(server, secret) as api:
        assert (await api.get("/api/v1/pending")).status_code == 200
        await engine.accounts.revoke_token("bot")
        revoked = await api.get("/api/v1/pending")
    for response in (missing, wrong, revoked):
        assert response.status_code == 401
        assert response.headers["www-authenticate"] == "Bearer"
        assert response.json()["error"]["code"] == "unauthenticated"


async def test_an_approver_decides_once_and_the_run_completes(
    server: Server, engine: Engine
) -> None:
    run_id, request_id = await started_refund(server, engine)
    support = await token(engine, "lead", "support")
    async with client(server, support) as api:
        listed = (await api.get("/api/v1/pending")).json()
        assert [p["id"] for p in listed] == [request_id]
        shown = (await api.get(f"/api/v1/pending/{request_id}")).json()
        assert shown["tool"] == "issue_refund"
        assert shown["args"] == {"order_id": "1001", "amount": 25.0, "reason": "customer request"}
        assert shown["approvers"] == ["support"]
        assert shown["may_decide"] is True
        decided = await api.post(
            f"/api/v1/pending/{request_id}/decision", json={"decision": "approve"}
        )
        assert decided.status_code == 200, decided.text
        assert decided.json()["principal"] == "token:lead"
        again = await api.post(
            f"/api/v1/pending/{request_id}/decision", json={"decision": "approve"}
        )
        assert again.status_code == 409
        assert again.json()["error"]["code"] == "not_pending"
        report = await wait_for_run(api, run_id, "completed")
    assert report["status"] == "completed", report
    assert await scalar(engine, "select count(*) from demo_side_effects") == 1


async def test_an_approver_reads_no_answer_or_error_of_the_run_its_starter_and_operators_do(
    server: Server, engine: Engine
) -> None:
    # The answer may quote an argument a policy redacts from approvers, as the stream's text.
    shop = await token(engine, "shop", "agents")
    run_id, request_id = await started_refund(server, engine, shop)
    support = await token(engine, "lead", "support")
    operator = await token(engine, "opal", "operators")
    async with client(server, support) as api:
        decided = await api.post(
            f"/api/v1/pending/{request_id}/decision", json={"decision": "approve"}
        )
        assert decided.status_code == 200, decided.text
        seen = await wait_for_run(api, run_id, "completed")
    async with client(server, shop) as api:
        own = (await api.get(f"/api/v1/runs/{run_id}")).json()
    async with client(server, operator) as api:
        operated = (await api.get(f"/api/v1/runs/{run_id}")).json()
    assert seen["status"] == own["status"] == "completed"
    assert isinstance(own["answer"], str)
    assert "1001" in own["answer"]
    assert operated["answer"] == own["answer"]
    assert seen["answer"] is None
    assert seen["error"] is None
    assert seen["tool_executions"] == [{**e, "error": None} for e in own["tool_executions"]]


async def test_who_may_not_see_gets_404_and_who_may_not_decide_gets_403(
    server: Server, engine: Engine
) -> None:
    run_id, request_id = await started_refund(server, engine)
    finance = await token(engine, "fin", "finance")  # the 25.00 refund goes to support
    async with client(server, finance) as api:
        assert (await api.get("/api/v1/pending")).json() == []
        hidden = await api.get(f"/api/v1/pending/{request_id}")
        hidden_post = await api.post(
            f"/api/v1/pending/{request_id}/decision", json={"decision": "approve"}
        )
        hidden_run = await api.get(f"/api/v1/runs/{run_id}")
    unknown_id = "00000000-0000-4000-8000-000000000000"
    async with client(server, finance) as api:
        unknown = await api.get(f"/api/v1/pending/{unknown_id}")
        forged = await api.get("/api/v1/pending/1%20OR%201=1")
    # Hidden, unknown and forged ids look the same.
    for response in (hidden, hidden_post, unknown, forged, hidden_run):
        assert response.status_code == 404, response.text
    assert hidden.json() == unknown.json() == forged.json() == hidden_post.json()
    assert await scalar(engine, "select count(*) from decisions") == 0


async def test_separation_of_duties(server: Server, engine: Engine) -> None:
    both = await token(engine, "both", "support", "agents")
    async with client(server, both) as api:
        started = (
            await api.post(
                "/api/v1/runs", json={"graph": "refund", "input": {"message": "refund 1001"}}
            )
        ).json()
        request_id = started["pending"][0]
        seen = (await api.get(f"/api/v1/pending/{request_id}")).json()
        assert seen["may_decide"] is False
        refused = await api.post(
            f"/api/v1/pending/{request_id}/decision", json={"decision": "approve"}
        )
        assert (await api.get(f"/api/v1/runs/{started['run_id']}")).status_code == 200
    assert refused.status_code == 403
    assert "separation of duties" in refused.json()["error"]["message"]
    assert await scalar(engine, "select count(*) from decisions") == 0


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"decision": "maybe"}, "decision"),
        ({"decision": "reject"}, "a rejection needs a reason"),
        ({"decision": "approve", "args": {"order_id": "1001", "amount": "lots"}}, "amount"),
        ({"decision": "approve", "extra": 1}, "extra"),
        ({"decision": "approve", "reason": "x" * 2001}, "reason"),
    ],
)
async def test_invalid_decisions_are_422_and_change_nothing(
    server: Server, engine: Engine, body: dict[str, object], message: str
) -> None:
    _, request_id = await started_refund(server, engine)
    support = await token(engine, "lead", "support")
    async with client(server, support) as api:
        response = await api.post(f"/api/v1/pending/{request_id}/decision", json=body)
        broken = await api.post(
            f"/api/v1/pending/{request_id}/decision",
            content=b"{not json",
            headers={"content-type": "application/json"},
        )
    assert response.status_code == 422, response.text
    assert message in response.text
    assert broken.status_code == 422
    assert await scalar(engine, "select count(*) from decisions") == 0


async def test_fifty_concurrent_decisions_one_wins(server: Server, engine: Engine) -> None:
    run_id, request_id = await started_refund(server, engine)
    support = await token(engine, "lead", "support")
    limits = httpx.Limits(max_connections=50)
    async with httpx.AsyncClient(
        base_url=server.url,
        headers={"authorization": f"Bearer {support}"},
        timeout=60,
        limits=limits,
    ) as api:
        responses = await asyncio.gather(
            *(
                api.post(f"/api/v1/pending/{request_id}/decision", json={"decision": "approve"})
                for _ in range(50)
            )
        )
        statuses = sorted(r.status_code for r in responses)
        assert statuses == [200] + [409] * 49, statuses
        report = await wait_for_run(api, run_id, "completed")
    assert report["status"] == "completed"
    assert await scalar(engine, "select count(*) from demo_side_effects") == 1
    assert await scalar(engine, "select count(*) from decisions") == 1


async def test_a_body_over_the_limit_is_413(server: Server, engine: Engine) -> None:
    support = await token(engine, "lead", "support")
    async with client(server, support) as api:
        response = await api.post(
            "/api/v1/runs",
            content=b'{"graph": "refund", "input": {"message": "' + b"x" * 300_000 + b'"}}',
            headers={"content-type": "application/json"},
        )
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "body_too_large"


async def test_bad_run_input_is_422_or_404(server: Server, engine: Engine) -> None:
    shop = await token(engine, "shop", "agents")
    async with client(server, shop) as api:
        no_graph = await api.post("/api/v1/runs", json={"graph": "nope", "input": {"message": "x"}})
        bad_input = await api.post("/api/v1/runs", json={"graph": "refund", "input": {"msg": 1}})
        bad_run = await api.get("/api/v1/runs/not-a-uuid")
    assert no_graph.status_code == 404
    assert bad_input.status_code == 422
    assert bad_run.status_code == 404


async def test_the_openapi_document_lists_error_responses(server: Server) -> None:
    async with client(server, None) as api:
        doc = (await api.get("/api/openapi.json")).json()
    decision = doc["paths"]["/api/v1/pending/{request_id}/decision"]["post"]
    assert {"200", "401", "403", "404", "409", "422"} <= set(decision["responses"])
    assert "ErrorBody" in doc["components"]["schemas"]
    # The pages are not part of the API document.
    assert all(path.startswith("/api/v1/") for path in doc["paths"])


async def test_a_body_that_is_not_utf8_is_422(server: Server, engine: Engine) -> None:
    shop = await token(engine, "shop", "agents")
    async with client(server, shop) as api:
        response = await api.post(
            "/api/v1/runs", content=b"\xff", headers={"content-type": "application/json"}
        )
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "invalid_input"


async def test_an_operator_or_the_starter_cancels_a_run_and_nobody_else(
    server: Server, engine: Engine
) -> None:
    run_id, request_id = await started_refund(server, engine)
    support = await token(engine, "lead", "support")  # sees the request, may not cancel
    finance = await token(engine, "fin", "finance")  # sees nothing of this run
    ops = await token(engine, "olga", "operators")
    async with client(server, support) as api:
        refused = await api.post(f"/api/v1/runs/{run_id}/cancel", json={})
    async with client(server, finance) as api:
        hidden = await api.post(f"/api/v1/runs/{run_id}/cancel", json={})
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "forbidden"
    assert hidden.status_code == 404
    assert await scalar(engine, "select status from runs") == "waiting"

    async with client(server, ops) as api:
        malformed = await api.post("/api/v1/runs/not-a-uuid/cancel", json={})
        unknown = await api.post(
            "/api/v1/runs/00000000-0000-4000-8000-000000000000/cancel", json={}
        )
        extra = await api.post(f"/api/v1/runs/{run_id}/cancel", json={"reason": 1, "x": 2})
        cancelled = await api.post(
            f"/api/v1/runs/{run_id}/cancel", json={"reason": "customer withdrew"}
        )
        again = await api.post(f"/api/v1/runs/{run_id}/cancel")
    assert malformed.status_code == unknown.status_code == 404
    assert extra.status_code == 422
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json() == {
        "run_id": run_id,
        "status": "cancelled",
        "requests_cancelled": 1,
        "jobs_skipped": 0,
    }
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "run_ended"

    # The request can no longer be decided, and the log says who cancelled and why.
    async with client(server, support) as api:
        late = await api.post(
            f"/api/v1/pending/{request_id}/decision", json={"decision": "approve"}
        )
    assert late.status_code == 409
    assert await scalar(engine, "select count(*) from demo_side_effects") == 0
    assert (
        await scalar(
            engine,
            "select principal || ' ' || coalesce(data->>'reason', '') from audit_events"
            " where kind = 'run.cancelled' and principal is not null",
        )
        == "token:olga customer withdrew"
    )

    # The run's starter may cancel its own run without being an operator; nobody else may.
    starter = await token(engine, "shop2", "agents")
    other = await token(engine, "shop3", "agents")
    async with client(server, starter) as api:
        started = await api.post(
            "/api/v1/runs", json={"graph": "refund", "input": {"message": "refund 1002"}}
        )
        own = started.json()["run_id"]
        async with client(server, other) as stranger:
            assert (await stranger.post(f"/api/v1/runs/{own}/cancel")).status_code == 404
        mine = await api.post(f"/api/v1/runs/{own}/cancel")
        report = (await api.get(f"/api/v1/runs/{own}")).json()
    assert mine.status_code == 200, mine.text
    assert report["status"] == "cancelled"


async def test_only_an_operator_retries_a_failed_resume_over_the_api(
    server: Server, engine: Engine
) -> None:
    starter = await token(engine, "shop", "agents")  # starts it; retries are an operator's
    run_id, _ = await failed_refund(server, engine, starter)
    support = await token(engine, "lead", "support")  # sees the request, may not retry
    finance = await token(engine, "fin", "finance")  # sees nothing of this run
    ops = await token(engine, "olga", "operators")
    for secret, status in ((starter, 403), (support, 403), (finance, 404)):
        async with client(server, secret) as api:
            refused = await api.post(f"/api/v1/runs/{run_id}/retry", json={})
        assert refused.status_code == status, refused.text
    async with client(server, ops) as api:
        malformed = await api.post("/api/v1/runs/not-a-uuid/retry", json={})
        unknown = await api.post("/api/v1/runs/00000000-0000-4000-8000-000000000000/retry", json={})
        extra = await api.post(f"/api/v1/runs/{run_id}/retry", json={"reason": "x", "y": 1})
        nul = await api.post(f"/api/v1/runs/{run_id}/retry", json={"reason": "fixed\u0000"})
        assert await scalar(engine, "select status from resume_queue") == "failed"
        retried = await api.post(f"/api/v1/runs/{run_id}/retry", json={"reason": "fixed"})
        again = await api.post(f"/api/v1/runs/{run_id}/retry")
    assert malformed.status_code == unknown.status_code == 404
    assert extra.status_code == nul.status_code == 422
    assert retried.status_code == 200, retried.text
    assert retried.json() == {"run_id": run_id, "status": "waiting", "jobs_requeued": 1}
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "nothing_to_retry"
    assert (
        await scalar(
            engine,
            "select principal || ' ' || (data->>'reason') from audit_events"
            " where kind = 'resume.retried'",
        )
        == "token:olga fixed"
    )
    # The retry woke the served app's worker, which resumes the run: the refund is made once.
    await until(engine, "select status = 'completed' from runs")
    assert await scalar(engine, "select count(*) from demo_side_effects") == 1


async def test_only_a_threads_owner_or_an_operator_may_add_to_it(
    server: Server, engine: Engine
) -> None:
    owner = await token(engine, "shop", "agents")
    other = await token(engine, "rival", "agents")
    ops = await token(engine, "olga", "operators")
    body = {"graph": "refund", "input": {"message": "refund 1001"}, "thread_id": "conv-1"}
    async with client(server, owner) as api:
        first = await api.post("/api/v1/runs", json=body)
        assert first.status_code == 200, first.text
        # The owner is let through (and told the thread still waits).
        again = await api.post("/api/v1/runs", json=body)
    async with client(server, other) as api:
        refused = await api.post("/api/v1/runs", json=body)
    async with client(server, ops) as api:
        operator = await api.post("/api/v1/runs", json=body)
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "thread_busy"
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "forbidden"
    assert operator.status_code == 409
    assert await scalar(engine, "select count(*) from runs") == 1
