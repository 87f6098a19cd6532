"""Over HTTP: an edit the policy refuses is a 422 naming the rule (API and edit form) and the
request stays pending; a request whose shown copy was changed in the database is not shown."""

from __future__ import annotations

import httpx

from tests.integration.helpers import person_token, scalar
from tests.web.conftest import Server, SignIn, add_user, csrf_of
from web.engine import Engine

EMAIL = {"message": "Email bob@example.com about the quarterly report"}


def client(server: Server, secret: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=server.url, headers={"authorization": f"Bearer {secret}"}, timeout=60
    )


async def _email_request(engine: Engine) -> tuple[str, str, dict[str, object]]:
    out = await engine.runner.start("email", EMAIL, principal="local:ann")
    request = await engine.requests.get(out.pending[0])
    assert request is not None
    return out.run_id, request.id, dict(request.shown["args"])


async def test_an_edit_to_an_outside_recipient_is_422_naming_the_rule(
    server: Server, engine: Engine
) -> None:
    run_id, request_id, args = await _email_request(engine)
    secret = await person_token(engine, "cora", "communications")
    async with client(server, secret) as api:
        refused = await api.post(
            f"/api/v1/pending/{request_id}/decision",
            json={"decision": "approve", "args": {**args, "to": "mallory@evil.test"}},
        )
        assert refused.status_code == 422, refused.text
        error = refused.json()["error"]
        assert error["code"] == "edit_refused"
        assert "no-external-mail" in error["message"]
        # An outside address before one of ours: the tool's schema takes one address only.
        listed = await api.post(
            f"/api/v1/pending/{request_id}/decision",
            json={
                "decision": "approve",
                "args": {**args, "to": "mallory@evil.test, bob@example.com"},
            },
        )
        assert listed.status_code == 422, listed.text
        still = await api.get(f"/api/v1/pending/{request_id}")
        assert still.json()["status"] == "pending"
    assert await scalar(engine, "select count(*) from decisions") == 0
    assert await engine.effects.for_call(run_id, "send-1") == []


async def test_the_edit_form_names_the_rule_that_refuses_the_edit(
    server: Server, engine: Engine, sign_in: SignIn
) -> None:
    _, request_id, args = await _email_request(engine)
    await add_user(engine, "cora", "communications")
    c = sign_in("cora")
    csrf = csrf_of(c.get(f"/requests/{request_id}").text)
    form = {f"arg.{k}": str(v) for k, v in args.items()}
    page = c.post(
        f"/requests/{request_id}/edit",
        data={**form, "arg.to": "mallory@evil.test", "csrf": csrf, "confirm": "1"},
    )
    assert page.status_code == 422
    assert "no-external-mail" in page.text
    assert await scalar(engine, "select count(*) from decisions") == 0


async def test_a_request_changed_in_the_database_is_409_and_audited(
    server: Server, engine: Engine
) -> None:
    _, request_id, _ = await _email_request(engine)
    async with engine.connection() as conn:
        await conn.execute(
            "update approval_requests set shown = jsonb_set(shown, '{args,to}', "
            """'"alice@example.com"') where id = %s""",
            (request_id,),
        )
    secret = await person_token(engine, "cora", "communications")
    async with client(server, secret) as api:
        shown = await api.get(f"/api/v1/pending/{request_id}")
        assert shown.status_code == 409
        assert shown.json()["error"]["code"] == "shown_copy_changed"
        assert (await api.get("/api/v1/pending")).json() == []
        decided = await api.post(
            f"/api/v1/pending/{request_id}/decision", json={"decision": "approve"}
        )
        assert decided.status_code == 409
    assert await scalar(engine, "select count(*) from decisions") == 0
    kinds = await scalar(
        engine,
        "select array_agg(kind) from audit_events where request_id = %s",
        request_id,
    )
    assert "request.tampered" in kinds
