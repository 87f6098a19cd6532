"""Bytes no honest client sends, at every face (API, pages, CLI) and at the engine's own entry
points: NaN and Infinity, NUL characters, lone surrogates, keys that hold them, nesting deep
enough to exhaust a recursive walker. Each is a 422 (exit 2) naming the field, and nothing is
written; before, each was a 500, a traceback or a crash.
"""

from __future__ import annotations

import os

import pytest

from approvals.errors import InvalidValue
from tests.integration.helpers import scalar
from tests.integration.inprocess import invoke
from tests.web.conftest import Server, SignIn, add_user, csrf_of
from tests.web.test_api import client, started_refund, token
from tests.web.test_pages import refund_request
from web.engine import Engine
from web.security import SECURITY_HEADERS

JSON = {"content-type": "application/json"}
# Arguments of the refund the tests edit, as raw JSON text (Python's json would write NaN too,
# but these are the exact bytes a hostile client sends).
ORDER = b'"order_id": "1001", "reason": "partial"'
DEEP = b"[" * 900 + b"]" * 900  # under the JSON decoder's own limit, far over ours


async def nothing_decided(engine: Engine, request_id: str) -> None:
    assert await scalar(engine, "select count(*) from decisions") == 0
    status = await scalar(engine, "select status from approval_requests where id = %s", request_id)
    assert status == "pending"


@pytest.mark.parametrize(
    ("body", "path", "problem"),
    [
        (b'{"decision": "approve", "args": {' + ORDER + b', "amount": NaN}}', "args/amount", "NaN"),
        (
            b'{"decision": "approve", "args": {' + ORDER + b', "amount": Infinity}}',
            "args/amount",
            "Infinity",
        ),
        (
            b'{"decision": "approve", "args": {' + ORDER + b', "amount": -Infinity}}',
            "args/amount",
            "-Infinity",
        ),
        (
            b'{"decision": "approve", "args": {"order_id": "1001", "amount": 1e400}}',
            "args/amount",
            "Infinity",
        ),
        (b'{"decision": "reject", "reason": "fraud\\u0000"}', "reason", "NUL"),
        (
            b'{"decision": "approve", "args": {"order_id": "1001", "amount": 5,'
            b' "reason": "a\\u0000b"}}',
            "args/reason",
            "NUL",
        ),
        (
            b'{"decision": "approve", "args": {"order_id": "1001", "amount": 5,'
            b' "reason": "\\ud800"}}',
            "args/reason",
            "lone surrogate",
        ),
        (
            b'{"decision": "approve", "args": {' + ORDER + b', "amount": 5, "k\\u0000": 1}}',
            "args/k\\u0000",
            "is a key that contains a NUL",
        ),
        (
            b'{"decision": "approve", "args": {' + ORDER + b', "amount": 5, "\\udc00": 1}}',
            "args/\\udc00",
            "is a key that contains a lone surrogate",
        ),
        (
            b'{"decision": "approve", "args": {"order_id": ' + DEEP + b', "amount": 5}}',
            "args/order_id",
            "nested deeper",
        ),
    ],
)
async def test_a_decision_with_bytes_we_cannot_store_is_422_naming_the_field_and_decides_nothing(
    server: Server, engine: Engine, body: bytes, path: str, problem: str
) -> None:
    _, request_id = await started_refund(server, engine)
    support = await token(engine, "lead", "support")
    async with client(server, support) as api:
        response = await api.post(
            f"/api/v1/pending/{request_id}/decision", content=body, headers=JSON
        )
        still = await api.get(f"/api/v1/pending/{request_id}")
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_input"
    assert error["message"].startswith(path), error
    assert problem in error["message"]
    assert still.json()["status"] == "pending"
    await nothing_decided(engine, request_id)


@pytest.mark.parametrize(
    ("body", "key"),
    [
        # Last-one-wins would approve what a reader of the first key logged as a rejection.
        (b'{"decision": "reject", "decision": "approve"}', "decision"),
        (
            b'{"decision": "approve", "args": {' + ORDER + b', "amount": 5, "amount": 9000}}',
            "amount",
        ),
        (b'{"decision": "reject", "reason": "a", "reason": "b"}', "reason"),
    ],
)
async def test_a_body_naming_a_key_twice_is_422_and_decides_nothing(
    server: Server, engine: Engine, body: bytes, key: str
) -> None:
    _, request_id = await started_refund(server, engine)
    support = await token(engine, "lead", "support")
    async with client(server, support) as api:
        response = await api.post(
            f"/api/v1/pending/{request_id}/decision", content=body, headers=JSON
        )
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_input"
    assert f'the key "{key}" appears twice in one object' in error["message"], error
    await nothing_decided(engine, request_id)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'{"graph": "refund", "input": {"message": "refund 1001\\u0000"}}', "input/message"),
        (b'{"graph": "refund", "input": {"message": "refund 1001\\udbff"}}', "input/message"),
        (
            b'{"graph": "refund", "input": {"message": "refund 1001"}, "thread_id": "t\\u0000"}',
            "thread_id",
        ),
    ],
)
async def test_a_run_input_or_thread_we_cannot_store_is_422_and_starts_nothing(
    server: Server, engine: Engine, body: bytes, message: str
) -> None:
    shop = await token(engine, "shop", "agents")
    async with client(server, shop) as api:
        response = await api.post("/api/v1/runs", content=body, headers=JSON)
    assert response.status_code == 422, response.text
    assert response.json()["error"]["code"] == "invalid_input"
    assert response.json()["error"]["message"].startswith(message)
    assert await scalar(engine, "select count(*) from runs") == 0


async def test_a_cancellation_reason_with_a_nul_is_422_and_the_run_still_waits(
    server: Server, engine: Engine
) -> None:
    shop = await token(engine, "shop", "agents")
    async with client(server, shop) as api:
        run = (
            await api.post(
                "/api/v1/runs", json={"graph": "refund", "input": {"message": "refund 1001"}}
            )
        ).json()
        response = await api.post(
            f"/api/v1/runs/{run['run_id']}/cancel",
            content=b'{"reason": "stop\\u0000"}',
            headers=JSON,
        )
        report = (await api.get(f"/api/v1/runs/{run['run_id']}")).json()
    assert response.status_code == 422, response.text
    assert response.json()["error"]["message"].startswith("reason contains a NUL")
    assert report["status"] == "waiting"


async def test_the_engine_refuses_them_to_a_python_caller_before_writing_anything(
    engine: Engine,
) -> None:
    run = await engine.runner.start("refund", {"message": "refund 1001"}, principal="local:shop")
    request_id = run.pending[0]
    args = {"order_id": "1001", "amount": float("nan"), "reason": "x"}
    with pytest.raises(InvalidValue) as nan:
        await engine.decide_as_operator(request_id, "approve", principal="local:ann", args=args)
    assert nan.value.field == "args/amount"
    with pytest.raises(InvalidValue) as nul:
        await engine.decide_as_operator(
            request_id, "reject", principal="local:ann", reason="no\x00"
        )
    assert nul.value.field == "reason"
    await nothing_decided(engine, request_id)
    with pytest.raises(InvalidValue) as message:
        await engine.runner.start("refund", {"message": "hi\ud800"}, principal="local:shop")
    assert message.value.field == "input/message"
    with pytest.raises(InvalidValue) as thread:
        await engine.runner.start(
            "refund", {"message": "hi"}, principal="local:shop", thread_id="t\x00"
        )
    assert thread.value.field == "thread_id"
    assert await scalar(engine, "select count(*) from runs") == 1


def assert_html_with_security_headers(response_headers: dict[str, str]) -> None:
    assert response_headers["content-type"].startswith("text/html")
    for name, value in SECURITY_HEADERS.items():
        assert response_headers[name] == value


@pytest.mark.parametrize(
    ("amount", "shown"),
    [("nan", "is NaN"), ("inf", "is Infinity"), ("-Infinity", "is -Infinity"), ("1e999", "is Inf")],
)
async def test_the_edit_form_refuses_a_number_that_is_not_finite_on_the_form(
    server: Server, engine: Engine, sign_in: SignIn, amount: str, shown: str
) -> None:
    await add_user(engine, "ann", "support")
    _, request_id = await refund_request(engine)
    c = sign_in("ann")
    csrf = csrf_of(c.get(f"/requests/{request_id}").text)
    form = {"csrf": csrf, "arg.order_id": "1001", "arg.reason": "partial", "arg.amount": amount}
    preview = c.post(f"/requests/{request_id}/edit", data=form)
    confirmed = c.post(f"/requests/{request_id}/edit", data={**form, "confirm": "1"})
    for response in (preview, confirmed):
        assert response.status_code == 422, response.text
        assert_html_with_security_headers(dict(response.headers))
        assert f"Amount {shown}" in response.text
    await nothing_decided(engine, request_id)


async def test_the_edit_form_and_the_reject_form_refuse_a_nul_on_the_form(
    server: Server, engine: Engine, sign_in: SignIn
) -> None:
    await add_user(engine, "ann", "support")
    _, request_id = await refund_request(engine)
    c = sign_in("ann")
    csrf = csrf_of(c.get(f"/requests/{request_id}").text)
    form = {"csrf": csrf, "arg.order_id": "1001", "arg.amount": "5", "arg.reason": "a\x00b"}
    edited = c.post(f"/requests/{request_id}/edit", data={**form, "confirm": "1"})
    assert edited.status_code == 422, edited.text
    assert_html_with_security_headers(dict(edited.headers))
    assert "Reason contains a NUL character" in edited.text
    rejected = c.post(f"/requests/{request_id}/reject", data={"csrf": csrf, "reason": "no\x00"})
    assert rejected.status_code == 422, rejected.text
    assert_html_with_security_headers(dict(rejected.headers))
    assert "The reason contains a NUL character" in rejected.text
    await nothing_decided(engine, request_id)


@pytest.mark.parametrize(
    ("query", "shown"),
    [
        ("tool=refund%00", "tool: contains a NUL character"),
        ("principal=local%3Aann%00", "principal: contains a NUL character"),
    ],
)
async def test_an_audit_filter_with_a_nul_is_422_on_the_page(
    server: Server, engine: Engine, sign_in: SignIn, query: str, shown: str
) -> None:
    await add_user(engine, "op", "operators")
    c = sign_in("op")
    response = c.get(f"/audit?{query}")
    assert response.status_code == 422, response.text
    assert_html_with_security_headers(dict(response.headers))
    assert shown in response.text


async def test_an_audit_page_cursor_of_unicode_digits_is_ignored_not_a_500(
    server: Server, engine: Engine, sign_in: SignIn
) -> None:
    await add_user(engine, "op", "operators")
    c = sign_in("op")
    # "²" is a digit to str.isdigit() but not to int().
    response = c.get("/audit?before=%C2%B2")
    assert response.status_code == 200, response.text


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--args", '{"order_id": "1001", "amount": NaN, "reason": "x"}'],
            "--args is not valid JSON: NaN is not a JSON number",
        ),
        (["--args", "[" * 100_000], "--args is nested deeper than"),
        (
            ["--args", '{"order_id": "1001", "amount": 5, "reason": "\\u0000"}'],
            "--args/reason contains a NUL",
        ),
        # Bytes that are not UTF-8 reach Python as lone surrogates (surrogateescape).
        (["--reason", os.fsdecode(b"no \xff")], "reason contains a lone surrogate"),
    ],
)
async def test_the_cli_decide_refuses_them_with_exit_2_and_one_line(
    engine: Engine, cli_env: dict[str, str], args: list[str], message: str
) -> None:
    run = await engine.runner.start("refund", {"message": "refund 1001"}, principal="local:shop")
    verdict = "reject" if "--reason" in args else "approve"
    await add_user(engine, "bob", "support")  # --as bob: the account bob
    result = await invoke(cli_env, "decide", run.pending[0], verdict, "--as", "bob", *args)
    assert result.code == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert message in lines[0]
    await nothing_decided(engine, run.pending[0])


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--input", '{"message": "refund 1001\\u0000"}'], "--input/message contains a NUL"),
        (["--input", '{"message": "refund 1001\\ud800"}'], "--input/message contains a lone"),
        (["--input", "[" * 100_000], "--input is nested deeper than"),
        (
            ["--input", '{"message": "refund 1001"}', "--thread-id", os.fsdecode(b"t\xff")],
            "thread_id contains a lone surrogate",
        ),
    ],
)
async def test_the_cli_runs_start_refuses_them_with_exit_2_and_one_line(
    engine: Engine, cli_env: dict[str, str], args: list[str], message: str
) -> None:
    result = await invoke(cli_env, "runs", "start", "refund", *args)
    assert result.code == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert message in lines[0]
    assert await scalar(engine, "select count(*) from runs") == 0


@pytest.mark.slow
async def test_the_cli_runs_cancel_refuses_a_reason_that_is_not_text_and_the_run_still_waits(
    engine: Engine, cli_env: dict[str, str]
) -> None:
    run = await engine.runner.start("refund", {"message": "refund 1001"}, principal="local:shop")
    reason = os.fsdecode(b"stop \xfe")
    result = await invoke(cli_env, "runs", "cancel", run.run_id, "--reason", reason)
    assert result.code == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "reason contains a lone surrogate (U+DCFE)" in lines[0]
    found = await engine.runs.get(run.run_id)
    assert found is not None
    assert found.status == "waiting"
