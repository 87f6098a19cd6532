"""A stdio MCP server for the OpenAI host's MCP tests (``python -m
tests.integration.mcp_records_server``): ``read_record`` reads, ``delete_record`` deletes, and
every call of either is appended to the file ``MCP_CALLS_FILE`` names, one JSON line each, so
a test counts what ran in this separate process."""

from __future__ import annotations

import json
import os

from mcp.server.fastmcp import FastMCP

server = FastMCP("records")


def _log(tool: str, record_id: str) -> None:
    with open(os.environ["MCP_CALLS_FILE"], "a", encoding="utf-8") as calls:
        calls.write(json.dumps({"tool": tool, "record_id": record_id}) + "\n")


@server.tool()
def read_record(record_id: str) -> str:
    """Read one record."""
    _log("read_record", record_id)
    return f"record {record_id}: active"


@server.tool()
def delete_record(record_id: str) -> str:
    """Delete one record for good."""
    _log("delete_record", record_id)
    return f"record {record_id} deleted"


if __name__ == "__main__":
    server.run("stdio")
