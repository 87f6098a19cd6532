"""The engine applies the approver rules to every signed-in decider, in the transaction that
consumes the request; the operator console's ``--as`` is an override, recorded as one."""

from __future__ import annotations

import asyncio
import getpass
import json

import pytest

from approvals.errors import InvalidDecision, NotAllowed, RequestNotFound, RequestNotPending
from approvals.model import DecisionKind, DecisionRecord, RequestStatus
from approvals.principals import Principal
from tests.integration.helpers import WAITS_FOR_A_LOCK, scalar, start_refund, until
from tests.integration.inprocess import invoke
from web.engine import Engine

#: The refund policy asks the support group to decide a small refund.
BOB = Principal.local("bob", frozenset({"support"}))
#: Operators see every request; seeing is not deciding.
OPAL = Principal.local("opal", frozenset({"operators", "support"}))


async def nothing_consumed(engine: Engine, request_id: str) -> None:
    request = await engine.requests.get(request_id)
    assert request is not None
    assert request.status is RequestStatus.PENDING
    assert await scalar(engine, "select count(*) from decisions") == 0
    assert await scalar(engine, "select count(*) from resume_queue") == 0


async def test_engine_decide_refuses_a_principal_outside_the_approver_groups(
    engine: Engine,
) -> None:
    request_id = (await start_refund(engine)).pending[0]
    outsider = Principal.local("sam", frozenset({"marketing", "approvers"}))
    # Not an approver of it, not an operator: it looks exactly like a request that does not
    # exist.
    with pytest.raises(RequestNotFound):
        await engine.decide(request_id, "approve", principal=outsider)
    # An operator outside the approver groups sees it, and is told why it may not decide.
    watcher = Principal.local("otto", frozenset({"operators"}))
    with pytest.raises(NotAllowed, match="only members of support may decide it"):
        await engine.decide(request_id, "approve", principal=watcher)
    await nothing_consumed(engine, request_id)


async def test_engine_decide_refuses_the_runs_starter(engine: Engine) -> None:
    request_id = (await start_refund(engine, principal="local:bob")).pending[0]
    with pytest.raises(NotAllowed, match="separation of duties"):
        await engine.decide(request_id, "approve", principal=BOB)
    await nothing_consumed(engine, request_id)


async def test_an_approver_in_the_group_decides_as_itself(engine: Engine) -> None:
    run = await start_refund(engine)
    decision = await engine.decide(run.pending[0], "approve", principal=BOB)
    assert isinstance(decision, DecisionRecord)
    assert decision.principal == "local:bob"
    [decided] = [
        e for e in await engine.audit.for_run(run.run_id) if e["kind"] == "request.decided"
    ]
    assert "override_by" not in decided["data"]


async def test_an_escalation_that_commits_while_a_decision_waits_is_judged_by_that_decision(
    engine: Engine,
) -> None:
    """No check-then-act window: the rules are applied to the row the decision locks."""
    request_id = (await start_refund(engine)).pending[0]
    async with engine.connection() as escalation, escalation.transaction():
        await escalation.execute(
            "update approval_requests set approvers = %s where id = %s",
            (["finance"], request_id),
        )
        # The decision reads the request as it was (the update is not committed) and passes
        # the early check; it must then wait for the row, and judge it as it is now.
        deciding = asyncio.create_task(engine.decide(request_id, "approve", principal=OPAL))
        await until(engine, WAITS_FOR_A_LOCK)  # the decision waits for the request's row
        assert not deciding.done()
    with pytest.raises(NotAllowed, match="only members of finance may decide it"):
        await deciding
    await nothing_consumed(engine, request_id)


async def test_an_operator_override_is_recorded_as_one_and_the_chain_holds(
    engine: Engine,
) -> None:
    run = await start_refund(engine)
    decision = await engine.decide_as_operator(
        run.pending[0], "approve", principal="demo:approver", override_by="cli:root"
    )
    assert isinstance(decision, DecisionRecord)
    assert decision.principal == "demo:approver"
    [decided] = [
        e for e in await engine.audit.for_run(run.run_id) if e["kind"] == "request.decided"
    ]
    assert decided["principal"] == "demo:approver"
    assert decided["data"]["override_by"] == "cli:root"
    assert decided["data"]["decision"] == "approve"
    verified = await engine.audit.verify()
    assert verified.ok, verified


async def test_approvals_decide_as_is_an_override_in_the_audit_log(
    engine: Engine, cli_env: dict[str, str]
) -> None:
    # The console decides in the name it is given, whatever the approver rules say (it holds
    # the database), and the decision log says it was the console.
    run = await start_refund(engine)
    # --as NAME is the account NAME, recorded as the principal its web sign-in has.
    await engine.accounts.add_user("lead", "correct horse battery staple", ["support"])
    result = await invoke(cli_env, "decide", run.pending[0], "approve", "--as", "lead")
    assert result.code == 0, result.stderr
    assert json.loads(result.stdout)["principal"] == "local:lead"
    [decided] = [
        e for e in await engine.audit.for_run(run.run_id) if e["kind"] == "request.decided"
    ]
    assert decided["principal"] == "local:lead"
    assert decided["data"]["override_by"] == f"cli:{getpass.getuser()}"


async def test_engine_decide_reads_the_request_once_and_refuses_a_decided_one_at_once(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A decision reads its request once (to check who may see it, then every other check),
    and a request read in a final status is refused without opening the transaction: the
    usual lost race of two approvers. What each answers is unchanged."""
    request_id = (await start_refund(engine)).pending[0]
    reads: list[str] = []
    transactions: list[str] = []
    get, consume = engine.requests.get, engine.decisions.decide

    async def counted_get(request_id: str) -> object:
        reads.append(request_id)
        return await get(request_id)

    async def counted_decide(request_id: str, **kw: object) -> object:
        transactions.append(request_id)
        return await consume(request_id, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(engine.requests, "get", counted_get)
    monkeypatch.setattr(engine.decisions, "decide", counted_decide)
    decided = await engine.decide(request_id, "approve", principal=BOB)
    assert isinstance(decided, DecisionRecord)
    assert (reads, transactions) == ([request_id], [request_id])
    late = Principal.local("carol", frozenset({"support"}))
    with pytest.raises(RequestNotPending) as refused:
        await engine.decide(request_id, "approve", principal=late)
    assert refused.value.status == "approved"
    assert (reads, transactions) == ([request_id] * 2, [request_id])
    # An invalid decision on it is still refused as invalid first, as before.
    with pytest.raises(InvalidDecision):
        await engine.decide(request_id, "reject", principal=late, reason="x", args={"a": 1})
    assert await scalar(engine, "select count(*) from decisions") == 1


async def test_an_operator_decision_consumes_in_one_statement_without_a_transaction(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The console's decision has no approver rules to read under the row lock: its one
    all-or-nothing statement runs by itself (no BEGIN, no COMMIT). A refused one still says
    why, from a transaction of its own."""
    request_id = (await start_refund(engine)).pending[0]
    opened: list[str] = []
    transaction = engine._db.transaction

    def counted_transaction() -> object:
        opened.append("transaction")
        return transaction()

    monkeypatch.setattr(engine._db, "transaction", counted_transaction)
    decided = await engine.decide_as_operator(request_id, "approve", principal="demo:approver")
    assert isinstance(decided, DecisionRecord)
    assert opened == []
    assert await scalar(engine, "select count(*) from resume_queue") == 1
    # The same request, consumed: refused as decided, without a second decision or job (the
    # check before the statement is bypassed here, as a race past it would be).
    with pytest.raises(RequestNotPending) as refused:
        await engine.decisions.decide(
            request_id,
            kind=DecisionKind.APPROVE,
            principal="demo:other",
            reason=None,
            args=None,
            args_identity=None,
        )
    assert refused.value.status == "approved"
    assert opened == ["transaction"]
    assert await scalar(engine, "select count(*) from decisions") == 1
    assert await scalar(engine, "select count(*) from resume_queue") == 1
