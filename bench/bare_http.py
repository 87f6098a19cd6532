"""The bare HTTP floors of ``bench/http_load.py``: HTTP and Python with nothing of the engine.

    python bench/bare_http.py --port P --database-url URL --pool N --tokens FILE

A FastAPI app served as ``approvals serve`` serves the real app (the socket of
``web.serving.bind``, uvicorn configured by ``web.serving.server_config``, the same
middleware-free loop), on a pool opened as the engine opens its own (``storage.db.open_pool``).
FILE holds one approver a line, ``GROUP SECRET``; a bearer token is found by its secret's
SHA-256 in a dict (no lookup in the database), and its approver is ``bare:<line>`` of GROUP.

* ``POST /decide/{request_id}`` (the bare HTTP floor) and ``POST
  /api/v1/pending/{request_id}/decision`` (the bare workload floor; ``{"decision":
  "reject"}`` rejects) run the decide transaction of ``PgDecisions.decide`` (``lock_request_row``,
  then ``decide``, from ``storage/sql/requests.sql``) and answer the decision's id, or 409 when the
  request was no longer pending.
* ``GET /api/v1/pending?limit=N`` (the bare workload floor) runs the inbox's own statement
  (``pending_by_deadline``: the requests of the approver's group it may decide, soonest deadline
  first, planned for its parameters as ``storage.requests.custom_planned`` plans it) and
  answers the rows' id, run, call, tool, shown arguments, reason, approver groups and deadline
  as a JSON list (orjson), each ``may_decide``.

Whatever ``POST /api/v1/pending/{id}/decision`` and ``GET /api/v1/pending`` cost beyond this is
the engine's: the token lookup, visibility and the approver rules, the shown copy's digest,
the cursors, the models and the error handling. ``http_load.py`` starts two of these, as it
starts two servers.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import uuid
from pathlib import Path
from typing import Any

import orjson
import uvicorn
from fastapi import FastAPI, Header, Request
from fastapi.responses import JSONResponse, Response

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from storage.db import Database, open_pool, sql  # noqa: E402
from web.cli.command import run_loop  # noqa: E402
from web.serving import bind, server_config  # noqa: E402
from web.settings import Settings  # noqa: E402

#: The most rows a listing answers (the API's own limit).
MAX_PAGE = 500


def read_tokens(text: str) -> dict[bytes, tuple[str, str]]:
    """The approvers of a tokens file (``GROUP SECRET`` a line): (principal, group) by the
    SHA-256 of the secret."""
    approvers: dict[bytes, tuple[str, str]] = {}
    for n, line in enumerate(text.splitlines()):
        group, _, secret = line.strip().partition(" ")
        if not group or not secret.strip():
            raise SystemExit(f"tokens file line {n + 1}: expected 'GROUP SECRET'")
        approvers[hashlib.sha256(secret.strip().encode()).digest()] = (f"bare:{n}", group)
    return approvers


def bare_app(database: Database, approvers: dict[bytes, tuple[str, str]]) -> FastAPI:
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    unauthenticated = JSONResponse({"error": "unauthenticated"}, status_code=401)

    def approver_of(authorization: str) -> tuple[str, str] | None:
        scheme, _, secret = authorization.partition(" ")
        if scheme.lower() != "bearer":
            return None
        return approvers.get(hashlib.sha256(secret.strip().encode()).digest())

    async def decided(request_id: str, principal: str, status: str, kind: str) -> JSONResponse:
        params: dict[str, Any] = {
            "id": str(uuid.uuid4()),
            "request_id": request_id,
            "status": status,
            "kind": kind,
            "principal": principal,
            "reason": None,
            "args": None,
            "args_identity": None,
            "quorum_met": False,
            "override_by": None,
        }
        async with database.transaction() as conn:
            await database.one("lock_request_row", {"id": request_id}, conn)
            row = await database.one("decide", params, conn)
        if row is None:
            return JSONResponse({"error": "not pending"}, status_code=409)
        return JSONResponse({"id": str(row["id"]), "request_id": request_id})

    @app.get("/readyz")
    async def ready() -> dict[str, str]:
        return {"status": "ready"}

    @app.post("/decide/{request_id}")
    async def decide(request_id: str, authorization: str = Header("")) -> JSONResponse:
        who = approver_of(authorization)
        if who is None:
            return unauthenticated
        return await decided(request_id, who[0], "approved", "approve")

    @app.post("/api/v1/pending/{request_id}/decision")
    async def decision(
        request_id: str, request: Request, authorization: str = Header("")
    ) -> JSONResponse:
        who = approver_of(authorization)
        if who is None:
            return unauthenticated
        body = orjson.loads(await request.body())
        if body.get("decision") == "reject":
            return await decided(request_id, who[0], "rejected", "reject")
        return await decided(request_id, who[0], "approved", "approve")

    @app.get("/api/v1/pending")
    async def pending(limit: int = 50, authorization: str = Header("")) -> Response:
        who = approver_of(authorization)
        if who is None:
            return unauthenticated
        principal, group = who
        params: dict[str, Any] = {
            "principal": principal,
            "person": principal,
            "groups": [group],
            "default_member": False,
            "operator": False,
            "decidable": True,
            "tool": None,
            "group": None,
            "group_is_default": False,
            "run_id": None,
            "starter": None,
            "created_after": None,
            "created_before": None,
            "after_key": None,
            "after_id": None,
            "limit": max(1, min(limit, MAX_PAGE)),
        }
        async with database.pool.connection() as conn:
            cursor = await conn.execute(sql("pending_by_deadline"), params, prepare=False)
            rows = await cursor.fetchall()
        items = [
            {
                "id": r["id"],
                "run_id": r["run_id"],
                "call_id": r["call_id"],
                "tool": r["tool"],
                "shown": r["shown"],
                "reason": r["reason"],
                "approvers": r["approvers"],
                "expires_at": r["expires_at"],
                "may_decide": True,
            }
            for r in rows
        ]
        return Response(orjson.dumps(items), media_type="application/json")

    return app


async def serve(
    port: int, url: str, pool_size: int, approvers: dict[bytes, tuple[str, str]]
) -> None:
    sql("decide"), sql("pending_by_deadline")  # fail at once if a statement is not there
    pool = open_pool(url, max_size=pool_size)
    await pool.open(wait=True, timeout=15)
    try:
        app = bare_app(Database(pool), approvers)
        sock = bind("127.0.0.1", port)
        config = server_config(app, Settings(database_url=url), log_config=None)
        await uvicorn.Server(config).serve(sockets=[sock])
    finally:
        await pool.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--pool", type=int, default=10)
    parser.add_argument("--tokens", type=Path, required=True)
    args = parser.parse_args()
    approvers = read_tokens(args.tokens.read_text(encoding="utf-8"))
    # On the loop `approvals serve` runs on (uvloop where installed), as the real app is served.
    run_loop(serve(args.port, args.database_url, args.pool, approvers))


if __name__ == "__main__":
    main()
