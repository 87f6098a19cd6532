"""The bare HTTP floor of ``bench/http_load.py``: HTTP and Python with nothing of the engine.

    python bench/bare_http.py --port P --database-url URL --pool N --tokens FILE

A FastAPI app with one endpoint, ``POST /decide/{request_id}``, served as ``approvals serve``
serves the real app (the socket of ``web.serving.bind``, uvicorn configured by
``web.serving.server_config``, the same middleware-free loop), on a pool opened as the engine
opens its own (``storage.db.open_pool``). The endpoint checks the bearer token against the
secrets in FILE (one a line, compared in memory: no lookup), then runs the decide transaction
of ``PgDecisions.decide`` (``lock_request_row``, then ``decide``, from ``queries.sql``), and
answers the decision's id, or 409 when the request was no longer pending. Whatever
``POST /api/v1/pending/{id}/decision`` costs beyond this is the engine's: the token lookup,
visibility and the approver rules, the shown copy's digest, the models and the error
handling. ``http_load.py`` starts two of these, as it starts two servers.
"""

from __future__ import annotations

import argparse
import hmac
import sys
import uuid
from pathlib import Path
from typing import Any

import uvicorn
from fastapi import FastAPI, Header
from fastapi.responses import JSONResponse

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from storage.db import Database, open_pool, sql  # noqa: E402
from web.cli.command import run_loop  # noqa: E402
from web.serving import bind, server_config  # noqa: E402
from web.settings import Settings  # noqa: E402


def bare_app(database: Database, secrets: list[str]) -> FastAPI:
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    known = [s.encode() for s in secrets]

    @app.get("/readyz")
    async def ready() -> dict[str, str]:
        return {"status": "ready"}

    @app.post("/decide/{request_id}")
    async def decide(request_id: str, authorization: str = Header("")) -> JSONResponse:
        scheme, _, secret = authorization.partition(" ")
        given = secret.strip().encode()
        if scheme.lower() != "bearer" or not any(hmac.compare_digest(given, k) for k in known):
            return JSONResponse({"error": "unauthenticated"}, status_code=401)
        params: dict[str, Any] = {
            "id": str(uuid.uuid4()),
            "request_id": request_id,
            "status": "approved",
            "kind": "approve",
            "principal": "local:bare",
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

    return app


async def serve(port: int, url: str, pool_size: int, secrets: list[str]) -> None:
    sql("decide")  # fails at once if the statement is not there
    pool = open_pool(url, max_size=pool_size)
    await pool.open(wait=True, timeout=15)
    try:
        app = bare_app(Database(pool), secrets)
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
    secrets = args.tokens.read_text(encoding="utf-8").split()
    # On the loop `approvals serve` runs on (uvloop where installed), as the real app is served.
    run_loop(serve(args.port, args.database_url, args.pool, secrets))


if __name__ == "__main__":
    main()
