"""Lists of requests are selected in SQL by what their viewer may see, and paged by cursor:
whoever follows the pages reaches every request the approver rules give it (no more, no
less), whatever else is in the table, while requests keep arriving; a cursor the engine did
not issue for the listing is refused; and every page is an index scan, never a sequential
scan of approval_requests."""

from __future__ import annotations

import base64
import itertools
import json
import random
import re
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from approvals.authz import ApproverRules
from approvals.errors import InvalidCursor, InvalidValue
from approvals.listing import PendingOrder, RequestFilter, Scope
from approvals.model import PendingCall, RequestStatus, Run
from approvals.principals import Principal
from bench.inbox_scale import COPY_REQUESTS, GROUPS, load_requests, request_rows
from storage.queries import QUERIES
from storage.requests import list_params
from tests.integration.inprocess import invoke
from web.engine import Engine

#: Bulk rows: 20 groups, so that any one group's requests have many others' in between.
BULK = 3000
RULES = ApproverRules()
TEAM = GROUPS[3]

#: Who pages, and why each is here (the seeded rows below give each rule something to do).
PRINCIPALS = {
    "approver": Principal.local("ann", frozenset({TEAM})),
    "two groups": Principal.local("bea", frozenset({TEAM, GROUPS[7]})),
    # Requests that name no group fall to the default group.
    "default member": Principal.local("dan", frozenset({"approvers"})),
    "operator": Principal.local("opal", frozenset({"operators"})),
    "operator and approver": Principal.local("olga", frozenset({"operators", GROUPS[5]})),
    # Started runs of its own: sees their requests (its group's), decides none of them.
    "starter": Principal.local("starter-7", frozenset({TEAM})),
    # A token acts for its owner, who started runs: separation of duties counts the person.
    "owned token": Principal.token("bot", frozenset({TEAM}), owner="starter-8"),
    # A service token decides nothing.
    "service token": Principal.token("svc", frozenset({TEAM})),
    # Edited some arguments into requests of its own group: may not decide those.
    "editor": Principal.local("ed", frozenset({TEAM})),
    "outsider": Principal.local("zed", frozenset({"marketing"})),
}


async def seed(engine: Engine) -> None:
    """The bulk rows, then the cases the rules tell apart: requests naming no group, requests
    an editor proposed, and decided requests (for the history, never in a pending list)."""
    await load_requests(engine.url, rows=BULK, runs=BULK // 10)
    async with engine.connection() as conn:
        # The bulk rows' call ids are call-0, call-1, ...: substr(call_id, 6) is the number.
        await conn.execute(
            "UPDATE approval_requests SET approvers = '{}' WHERE substr(call_id, 6)::int < 40"
        )
        await conn.execute(
            "UPDATE approval_requests SET proposed_by = 'local:ed', approvers = %s"
            " WHERE substr(call_id, 6)::int BETWEEN 40 AND 59",
            ([TEAM],),
        )
        await conn.execute(
            "UPDATE approval_requests SET status = 'approved',"
            " decided_at = now() - substr(call_id, 6)::int * interval '1 second'"
            " WHERE substr(call_id, 6)::int BETWEEN 60 AND 459"
        )
        await conn.execute("ANALYZE approval_requests")


async def all_requests(engine: Engine) -> list[PendingCall]:
    async with engine.connection() as conn:
        cursor = await conn.execute("SELECT * FROM approval_requests")
        return [PendingCall.from_row(row) for row in await cursor.fetchall()]


async def walk(
    engine: Engine,
    principal: Principal | None,
    *,
    scope: Scope = Scope.SEE,
    order: PendingOrder = PendingOrder.DEADLINE,
    filters: RequestFilter = RequestFilter(),  # noqa: B008 - frozen
    limit: int = 97,
) -> list[PendingCall]:
    """Every request of a listing, page by page, in the order the pages gave them."""
    seen: list[PendingCall] = []
    cursor = None
    while True:
        page = await engine.pending_page(
            principal, scope=scope, order=order, filters=filters, cursor=cursor, limit=limit
        )
        assert len(page.items) <= limit
        seen.extend(r for r, _ in page.items)
        if page.next_cursor is None:
            return seen
        assert page.items, "a page with a next page was empty"
        cursor = page.next_cursor


def by_deadline(requests: list[PendingCall]) -> list[str]:
    return [r.id for r in sorted(requests, key=lambda r: (r.expires_at, uuid.UUID(r.id)))]


def pending(requests: list[PendingCall]) -> list[PendingCall]:
    return [r for r in requests if r.status is RequestStatus.PENDING]


@pytest.mark.parametrize("who", list(PRINCIPALS))
async def test_every_principal_pages_through_exactly_what_the_approver_rules_give_it(
    engine: Engine, who: str
) -> None:
    await seed(engine)
    principal = PRINCIPALS[who]
    rows = pending(await all_requests(engine))
    may_see = [r for r in rows if RULES.may_see(principal, r)]
    may_decide = [r for r in may_see if RULES.may_decide(principal, r)]
    others = [r for r in may_see if not RULES.may_decide(principal, r)]
    for scope, expected in (
        (Scope.SEE, may_see),
        (Scope.DECIDE, may_decide),
        (Scope.OTHERS, others),
    ):
        listed = await walk(engine, principal, scope=scope)
        # The same requests, each once, soonest deadline first across the pages.
        assert [r.id for r in listed] == by_deadline(expected), (who, scope)
    newest = await walk(engine, principal, order=PendingOrder.NEWEST, limit=211)
    assert [r.id for r in newest] == [
        r.id for r in sorted(may_see, key=lambda r: (r.created_at, uuid.UUID(r.id)), reverse=True)
    ]


async def test_the_cases_the_rules_tell_apart_are_all_in_the_data(engine: Engine) -> None:
    # Guards the test above: each principal there has something to be shown or refused.
    await seed(engine)
    rows = pending(await all_requests(engine))
    for who, principal in PRINCIPALS.items():
        seen = [r for r in rows if RULES.may_see(principal, r)]
        decide = [r for r in seen if RULES.may_decide(principal, r)]
        if who == "outsider":
            assert seen == []
        else:
            assert len(seen) > 20, who
        if who in ("starter", "owned token", "service token", "editor", "operator"):
            assert len(decide) < len(seen), who
    approver = PRINCIPALS["approver"]
    mine = [r for r in rows if RULES.may_decide(approver, r)]
    # Many other groups' requests lie between two of the approver's in the inbox's order.
    order = by_deadline(rows)
    positions = sorted(order.index(r.id) for r in mine)
    assert max(b - a for a, b in itertools.pairwise(positions)) > 20


async def test_an_operator_pages_through_every_pending_request_and_the_console_too(
    engine: Engine,
) -> None:
    await seed(engine)
    rows = pending(await all_requests(engine))
    everything = by_deadline(rows)
    assert [r.id for r in await walk(engine, PRINCIPALS["operator"], limit=500)] == everything
    assert [r.id for r in await walk(engine, None, limit=333)] == everything


async def test_the_history_pages_through_what_the_principal_may_see(engine: Engine) -> None:
    await seed(engine)
    decided = [r for r in await all_requests(engine) if r.status is not RequestStatus.PENDING]
    for principal in (PRINCIPALS["approver"], PRINCIPALS["operator"], PRINCIPALS["outsider"]):
        expected = sorted(
            (r for r in decided if RULES.may_see(principal, r)),
            key=lambda r: (r.decided_at, uuid.UUID(r.id)),
            reverse=True,
        )
        seen: list[str] = []
        cursor = None
        while True:
            page = await engine.history_page(principal, cursor=cursor, limit=13)
            seen.extend(r.id for r, outcome in page.items)
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        assert seen == [r.id for r in expected]


async def all_runs(engine: Engine) -> list[Run]:
    async with engine.connection() as conn:
        cursor = await conn.execute("SELECT * FROM runs")
        return [Run.from_row(row) for row in await cursor.fetchall()]


@pytest.mark.parametrize("who", ["approver", "operator", "starter", "default member", "outsider"])
async def test_the_runs_list_pages_through_the_runs_the_principal_may_see(
    engine: Engine, who: str
) -> None:
    await seed(engine)
    principal = PRINCIPALS[who]
    requests = await all_requests(engine)
    of_run: dict[str, list[PendingCall]] = {}
    for r in requests:
        of_run.setdefault(r.run_id, []).append(r)
    expected = [
        run.id
        for run in sorted(
            await all_runs(engine), key=lambda r: (r.created_at, uuid.UUID(r.id)), reverse=True
        )
        if RULES.may_see_run(principal, run, of_run.get(run.id, []))
    ]
    seen: list[str] = []
    cursor = None
    for _ in range(100):
        page = await engine.runs_page(principal, cursor=cursor, limit=37)
        seen.extend(run.id for run in page.items)
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert seen == expected
    if who == "starter":
        # Its own runs, though no request of theirs is its group's, and its group's runs.
        assert {run.id for run in await all_runs(engine) if run.started_by == principal.id} <= set(
            seen
        )


FILTERS: dict[str, tuple[RequestFilter, Callable[[PendingCall], bool]]] = {
    "tool": (RequestFilter(tool="send_email"), lambda r: r.tool == "send_email"),
    "group": (RequestFilter(group=GROUPS[11]), lambda r: GROUPS[11] in r.approvers),
    "default group": (RequestFilter(group="approvers"), lambda r: not r.approvers),
    "starter": (
        RequestFilter(starter="local:starter-42"),
        lambda r: r.requested_by == "local:starter-42",
    ),
    "tool and group": (
        RequestFilter(tool="issue_refund", group=TEAM),
        lambda r: r.tool == "issue_refund" and TEAM in r.approvers,
    ),
}


@pytest.mark.parametrize("name", list(FILTERS))
async def test_filters_narrow_the_pages(engine: Engine, name: str) -> None:
    await seed(engine)
    filters, keep = FILTERS[name]
    rows = pending(await all_requests(engine))
    expected = [r for r in rows if keep(r)]
    assert expected, "the filter matches nothing here"
    listed = await walk(engine, PRINCIPALS["operator"], filters=filters, limit=41)
    assert [r.id for r in listed] == by_deadline(expected)


async def test_a_run_filter_and_the_age_filters(engine: Engine) -> None:
    await seed(engine)
    rows = pending(await all_requests(engine))
    run_id = rows[100].run_id
    listed = await walk(engine, PRINCIPALS["operator"], filters=RequestFilter(run_id=run_id))
    assert [r.id for r in listed] == by_deadline([r for r in rows if r.run_id == run_id])
    # The ages count from the first page's moment, somewhere between before and after.
    before = datetime.now(UTC)
    older = await walk(
        engine, PRINCIPALS["operator"], filters=RequestFilter(min_age=timedelta(hours=12))
    )
    newer = await walk(
        engine, PRINCIPALS["operator"], filters=RequestFilter(max_age=timedelta(hours=12))
    )
    after = datetime.now(UTC)
    cut = timedelta(hours=12)
    assert {r.id for r in rows if r.created_at < before - cut} <= {r.id for r in older}
    assert all(r.created_at < after - cut for r in older)
    assert {r.id for r in rows if r.created_at >= after - cut} <= {r.id for r in newer}
    assert all(r.created_at >= before - cut for r in newer)
    assert len(older) + len(newer) == len(rows)


async def test_counts_per_group_are_those_of_what_the_principal_may_see(
    engine: Engine,
) -> None:
    await seed(engine)
    rows = pending(await all_requests(engine))
    for principal in PRINCIPALS.values():
        visible = [r for r in rows if RULES.may_see(principal, r)]
        expected: dict[str, int] = {}
        for r in visible:
            for group in RULES.deciders(r):
                expected[group] = expected.get(group, 0) + 1
        assert await engine.pending_counts(principal) == (len(visible), expected)


async def add_requests(engine: Engine, count: int, rng: random.Random) -> list[str]:
    """``count`` new pending requests on a new run, with deadlines all over the week."""
    run_id = uuid.UUID(int=rng.getrandbits(128), version=4)
    async with engine.connection() as conn:
        await conn.execute(
            "INSERT INTO runs (id, thread_id, graph, status, started_by, input)"
            " VALUES (%s, %s, 'bench', 'waiting', 'local:late', '{}')",
            (run_id, f"late-{run_id}"),
        )
        rows = list(
            request_rows(
                count, [(run_id, "local:late")], rng, datetime.now(UTC), calls=f"late-{run_id}-"
            )
        )
        async with conn.cursor() as cur, cur.copy(COPY_REQUESTS) as copy:
            for row in rows:
                await copy.write_row(row)
    return [str(row[0]) for row in rows]


async def test_cursors_stay_stable_while_new_requests_arrive(engine: Engine) -> None:
    await seed(engine)
    rng = random.Random(7)
    operator = PRINCIPALS["operator"]
    at_start = set(by_deadline(pending(await all_requests(engine))))
    seen: list[PendingCall] = []
    arrived: list[str] = []
    cursor = None
    while True:
        page = await engine.pending_page(operator, cursor=cursor, limit=200)
        seen.extend(r for r, _ in page.items)
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
        # Requests arrive between pages, due before and after where the pages stand.
        arrived.extend(await add_requests(engine, 15, rng))
    ids = [r.id for r in seen]
    assert len(ids) == len(set(ids)), "a request was shown twice"
    assert at_start <= set(ids), "a request that was there all along was skipped"
    # The pages kept their order; new requests show up only after where the pages stood.
    assert ids == by_deadline(seen)
    late = set(arrived) & set(ids)
    assert late, "no request that arrived after the pages' place was shown"
    assert late != set(arrived), "requests due before the pages' place were shown"


def _forged(payload: Any) -> str:
    raw = json.dumps(payload).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


async def test_a_cursor_the_engine_did_not_issue_for_the_listing_is_refused(
    engine: Engine,
) -> None:
    await seed(engine)
    approver = PRINCIPALS["approver"]
    page = await engine.pending_page(approver, scope=Scope.DECIDE, limit=10)
    assert page.next_cursor is not None
    issued = json.loads(
        base64.urlsafe_b64decode(page.next_cursor + "=" * (-len(page.next_cursor) % 4))
    )
    forged = [
        "",
        "garbage",
        "%%%",
        "é" * 10,
        "A" * 5000,
        _forged([1, 2]),
        _forged({**issued, "v": 2}),
        _forged({**issued, "k": "yesterday"}),
        _forged({**issued, "k": True}),
        _forged({**issued, "k": 10**30}),
        _forged({**issued, "i": "1 OR 1=1"}),
        _forged({**issued, "extra": 1}),
        page.next_cursor[:-4],
    ]
    for text in forged:
        with pytest.raises(InvalidCursor):
            await engine.pending_page(approver, scope=Scope.DECIDE, cursor=text, limit=10)
    # Issued for another listing: another scope, order, filter or principal.
    for other in (
        {"scope": Scope.SEE},
        {"order": PendingOrder.NEWEST},
        {"filters": RequestFilter(tool="send_email")},
    ):
        with pytest.raises(InvalidCursor, match="another listing"):
            await engine.pending_page(
                approver,
                **{"scope": Scope.DECIDE, **other},  # type: ignore[arg-type]
                cursor=page.next_cursor,
                limit=10,
            )
    with pytest.raises(InvalidCursor, match="another listing"):
        await engine.pending_page(
            PRINCIPALS["two groups"], scope=Scope.DECIDE, cursor=page.next_cursor
        )
    with pytest.raises(InvalidCursor):
        await engine.history_page(approver, cursor=page.next_cursor)
    # Well formed and issued for this listing, at a made-up place: just a place in the list.
    far = _forged({**issued, "k": issued["k"] + 10**15})
    assert (await engine.pending_page(approver, scope=Scope.DECIDE, cursor=far)).items == []
    with pytest.raises(InvalidValue):
        await engine.pending_page(approver, limit=0)
    with pytest.raises(InvalidValue):
        await engine.pending_page(approver, filters=RequestFilter(run_id="not-a-run"))
    with pytest.raises(InvalidValue):
        await engine.pending_page(approver, filters=RequestFilter(tool="a\x00b"))


# -- Plan shapes -------------------------------------------------------------------------------

PLAN_ROWS = 50_000


def _nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    found = [plan]
    for child in plan.get("Plans", []):
        found.extend(_nodes(child))
    return found


async def _plan(conn: psycopg.AsyncConnection[Any], name: str, params: dict[str, Any]) -> Any:
    cursor = await conn.execute("EXPLAIN (FORMAT JSON) " + QUERIES[name], params)
    row = await cursor.fetchone()
    assert row is not None
    return row["QUERY PLAN"][0]["Plan"]


async def test_every_list_query_is_an_index_scan_on_a_large_table(engine: Engine) -> None:
    await load_requests(engine.url, rows=PLAN_ROWS, runs=PLAN_ROWS // 10)
    async with engine.connection() as conn:
        # A decided tail for the history, and a group with few requests (the GIN's case).
        await conn.execute(
            "UPDATE approval_requests SET status = 'approved', decided_at = created_at"
            " WHERE substr(call_id, 6)::int < 2000"
        )
        await conn.execute(
            "UPDATE approval_requests SET approvers = '{rare}'"
            " WHERE substr(call_id, 6)::int BETWEEN 2000 AND 2019"
        )
        await conn.execute("VACUUM ANALYZE approval_requests")
        middle = await (
            await conn.execute(
                "SELECT expires_at, id::text AS id FROM approval_requests"
                " WHERE status = 'pending' ORDER BY expires_at, id OFFSET 20000 LIMIT 1"
            )
        ).fetchone()
        decided = await (
            await conn.execute(
                "SELECT decided_at, id::text AS id FROM approval_requests"
                " WHERE status <> 'pending' ORDER BY decided_at DESC, id DESC OFFSET 900 LIMIT 1"
            )
        ).fetchone()
    assert middle is not None
    assert decided is not None
    now = datetime.now(UTC)
    viewers = {
        "approver": engine.viewer(PRINCIPALS["approver"]),
        "rare group": engine.viewer(Principal.local("rae", frozenset({"rare"}))),
        "operator": engine.viewer(PRINCIPALS["operator"]),
        "default member": engine.viewer(PRINCIPALS["default member"]),
    }
    cases: list[tuple[str, str, dict[str, Any]]] = []
    for who, viewer in viewers.items():
        for decidable in (None, True):
            for after in (None, (middle["expires_at"], middle["id"])):
                params = list_params(viewer, RequestFilter(), now, after, 51)
                cases.append(
                    (
                        f"{who} {decidable} {after is not None}",
                        "pending_by_deadline",
                        params | {"decidable": decidable},
                    )
                )
        newest = list_params(viewer, RequestFilter(), now, None, 51) | {"decidable": None}
        cases.append((f"{who} newest", "pending_newest", newest))
        for after in (None, (decided["decided_at"], decided["id"])):
            params = list_params(viewer, RequestFilter(), now, after, 51)
            cases.append((f"{who} history {after is not None}", "decided_page", params))
        cases.append((f"{who} counts", "pending_counts", viewer.params()))
        runs = viewer.params() | {"status": None, "graph": None, "limit": 51}
        cases.append((f"{who} runs", "runs_page", runs | {"after_key": None, "after_id": None}))
        cases.append(
            (
                f"{who} runs page",
                "runs_page",
                runs | {"after_key": middle["expires_at"], "after_id": middle["id"]},
            )
        )
    async with await psycopg.AsyncConnection.connect(engine.url, row_factory=dict_row) as conn:
        for label, name, params in cases:
            plan = await _plan(conn, name, params)
            # The listed table, and for the runs list the runs too (the history joins its page
            # of 51 rows to runs, which the planner may hash on a table this small).
            listed = (
                ("approval_requests", "runs") if name == "runs_page" else ("approval_requests",)
            )
            scans = [n for n in _nodes(plan) if n.get("Relation Name") in listed]
            assert scans, (label, plan)
            for node in scans:
                assert node["Node Type"] != "Seq Scan", (label, json.dumps(plan, indent=1))
                assert "Index" in node["Node Type"] or node["Node Type"] == "Bitmap Heap Scan"


async def test_the_console_lists_pending_requests_a_page_at_a_time(
    engine: Engine, cli_env: dict[str, str]
) -> None:
    await load_requests(engine.url, rows=250, runs=25)
    expected = by_deadline(pending(await all_requests(engine)))
    seen: list[str] = []
    args = ["pending", "list", "--json", "--limit", "100"]
    for _ in range(10):
        result = await invoke(cli_env, *args)
        assert result.code == 0, result.stderr
        seen.extend(item["id"] for item in result.json())
        more = re.search(r"--cursor (\S+)", result.stderr)
        if more is None:
            break
        args = ["pending", "list", "--json", "--limit", "100", "--cursor", more.group(1)]
    assert seen == expected
    refund = await invoke(cli_env, "pending", "list", "--json", "--tool", "issue_refund")
    assert {item["tool"] for item in refund.json()} == {"issue_refund"}
    forged = await invoke(cli_env, "pending", "list", "--cursor", "garbage")
    assert forged.code == 2
    assert "not a valid cursor" in forged.stderr
    both = await invoke(cli_env, "pending", "list", "--all", "--cursor", "x")
    assert both.code == 2
