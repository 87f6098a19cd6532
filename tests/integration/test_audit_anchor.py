"""The chain's head, anchored outside the database, catches what the chain alone cannot: an
owner who disabled the triggers, rewrote an event, recomputed every later hash and moved the
head."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from approvals.notify import SIGNATURE_HEADER, TIMESTAMP_HEADER, verify_signature
from tests.integration.helpers import scalar
from tests.integration.inprocess import invoke
from tests.integration.receivers import http_receiver
from tests.integration.test_audit import refund_flow
from web.engine import Engine


async def rewrite_history(database_url: str, target: int) -> None:
    """The attack, as the tables' owner: triggers off, event ``target`` changed, every hash
    from it on recomputed the way the chain trigger computes them, the head moved, triggers
    on again. The chain is sound again afterwards."""
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        await conn.execute("ALTER TABLE audit_events DISABLE TRIGGER audit_events_append_only_v1")
        await conn.execute("ALTER TABLE audit_chain_head DISABLE TRIGGER audit_chain_head_guard_v1")
        await conn.execute("UPDATE audit_events SET principal = 'mallory' WHERE id = %s", (target,))
        # A DO block takes no parameters: the target travels in a session setting.
        await conn.execute("SELECT set_config('attack.target', %s, false)", (str(target),))
        await conn.execute(
            """
            DO $$
            DECLARE
                target bigint := current_setting('attack.target')::bigint;
                e audit_events;
                prev text := (SELECT prev_hash FROM audit_events WHERE id = target);
            BEGIN
                FOR e IN SELECT * FROM audit_events WHERE id >= target ORDER BY id LOOP
                    e.hash := approvals_audit_hash_v1(prev, e);
                    UPDATE audit_events SET prev_hash = prev, hash = e.hash WHERE id = e.id;
                    prev := e.hash;
                END LOOP;
                UPDATE audit_chain_head SET hash = prev;
            END
            $$
            """
        )
        await conn.execute("ALTER TABLE audit_events ENABLE TRIGGER audit_events_append_only_v1")
        await conn.execute("ALTER TABLE audit_chain_head ENABLE TRIGGER audit_chain_head_guard_v1")
        await conn.commit()


async def test_a_rewritten_chain_passes_verify_but_not_its_anchor(
    engine: Engine, cli_env: dict[str, str], tmp_path: Path
) -> None:
    await refund_flow(engine)
    anchors = tmp_path / "anchors.jsonl"
    first = await invoke(cli_env, "audit", "anchor", "--to", str(anchors), "--json")
    assert first.code == 0, first.stderr
    anchored = first.json()
    head = await scalar(engine, "SELECT last_id FROM audit_chain_head")
    assert anchored["event_id"] == head
    assert anchored["hash"] == await scalar(engine, "SELECT hash FROM audit_chain_head")
    await refund_flow(engine)
    assert (await invoke(cli_env, "audit", "anchor", "--to", str(anchors))).code == 0
    assert len(anchors.read_text().splitlines()) == 2
    held = await invoke(cli_env, "audit", "verify", "--anchor", str(anchors))
    assert held.code == 0, held.stderr
    assert held.stdout.strip().endswith("2 anchors hold")

    target = await scalar(engine, "SELECT min(id) FROM audit_events WHERE kind = 'request.decided'")
    await rewrite_history(cli_env["APPROVALS_DATABASE_URL"], target)

    # The hole: the chain alone verifies.
    assert (await invoke(cli_env, "audit", "verify")).code == 0
    caught = await invoke(cli_env, "audit", "verify", "--anchor", str(anchors))
    assert caught.code == 1
    assert caught.stdout == ""
    assert (
        f"event {anchored['event_id']} was changed: its hash is not the one anchored at"
        f" {anchored['anchored_at']}" in caught.stderr
    )
    as_json = await invoke(cli_env, "audit", "verify", "--anchor", str(anchors), "--json")
    assert as_json.code == 1
    assert as_json.json()["finding"]["event_id"] == anchored["event_id"]
    # Nor is the rewritten head anchored: the anchor run checks the anchors it appends to.
    refused = await invoke(cli_env, "audit", "anchor", "--to", str(anchors))
    assert refused.code == 1
    assert "nothing anchored" in refused.stderr
    assert len(anchors.read_text().splitlines()) == 2


def edit_hash(lines: list[str]) -> list[str]:
    doc = json.loads(lines[0])
    doc["hash"] = "0" * 64
    return [json.dumps(doc), *lines[1:]]


@pytest.mark.parametrize(
    ("forge", "message"),
    [
        (edit_hash, "anchors.jsonl:1 is not valid: its signature does not match"),
        (lambda lines: lines[1:], "anchors.jsonl:1 is not valid: it does not link"),
        (lambda lines: [lines[1], lines[0]], "anchors.jsonl:1 is not valid: it does not link"),
        (lambda lines: ["{not json", *lines], "anchors.jsonl:1 is not valid: it is not JSON"),
    ],
)
async def test_a_forged_or_edited_anchor_file_fails_verify(
    engine: Engine,
    cli_env: dict[str, str],
    tmp_path: Path,
    forge: Callable[[list[str]], list[str]],
    message: str,
) -> None:
    await refund_flow(engine)
    anchors = tmp_path / "anchors.jsonl"
    for _ in range(2):
        assert (await invoke(cli_env, "audit", "anchor", "--to", str(anchors))).code == 0
    anchors.write_text("\n".join(forge(anchors.read_text().splitlines())) + "\n")
    result = await invoke(cli_env, "audit", "verify", "--anchor", str(anchors))
    assert result.code == 1
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


async def test_anchors_signed_with_another_key_fail(
    engine: Engine, cli_env: dict[str, str], tmp_path: Path
) -> None:
    await refund_flow(engine)
    anchors = tmp_path / "anchors.jsonl"
    own_key = cli_env | {"APPROVALS_AUDIT_ANCHOR_KEY": "k" * 40}
    assert (await invoke(own_key, "audit", "anchor", "--to", str(anchors))).code == 0
    assert (await invoke(own_key, "audit", "verify", "--anchor", str(anchors))).code == 0
    other = await invoke(
        cli_env | {"APPROVALS_AUDIT_ANCHOR_KEY": "m" * 40},
        "audit",
        "verify",
        "--anchor",
        str(anchors),
    )
    assert other.code == 1
    assert "signature does not match" in other.stderr
    # Verifying never makes a key up: without one there is nothing to check against.
    keyless = await invoke(cli_env, "audit", "verify", "--anchor", str(anchors))
    assert keyless.code == 1
    assert "no anchor key" in keyless.stderr


async def test_an_anchor_beyond_the_chain_names_the_missing_event(
    engine: Engine, cli_env: dict[str, str], tmp_path: Path
) -> None:
    await refund_flow(engine)
    anchors = tmp_path / "anchors.jsonl"
    assert (await invoke(cli_env, "audit", "anchor", "--to", str(anchors))).code == 0
    last = await scalar(engine, "SELECT last_id FROM audit_chain_head")
    # The owner drops the newest events and moves the head back: the chain verifies again.
    async with await psycopg.AsyncConnection.connect(cli_env["APPROVALS_DATABASE_URL"]) as conn:
        await conn.execute("SET session_replication_role = replica")
        await conn.execute("DELETE FROM audit_events WHERE id > %s", (last - 3,))
        await conn.execute(
            "UPDATE audit_chain_head SET last_id = e.id, hash = e.hash"
            " FROM audit_events e WHERE e.id = %s",
            (last - 3,),
        )
        await conn.commit()
    assert (await invoke(cli_env, "audit", "verify")).code == 0
    caught = await invoke(cli_env, "audit", "verify", "--anchor", str(anchors))
    assert caught.code == 1
    assert f"event {last} is missing (removed)" in caught.stderr


async def test_anchor_posts_the_signed_head_to_a_webhook(
    engine: Engine, cli_env: dict[str, str], tmp_path: Path
) -> None:
    await refund_flow(engine)
    anchors = tmp_path / "anchors.jsonl"
    env = cli_env | {"APPROVALS_AUDIT_ANCHOR_KEY": "s" * 40}
    with http_receiver() as receiver:
        sent = await invoke(env, "audit", "anchor", "--to", str(anchors), "--webhook", receiver.url)
    assert sent.code == 0, sent.stderr
    [received] = receiver.requests
    assert received.body.decode() == anchors.read_text().strip()
    headers = {k.lower(): v for k, v in received.headers.items()}
    assert verify_signature(
        "s" * 40,
        headers[TIMESTAMP_HEADER.lower()],
        received.body,
        headers[SIGNATURE_HEADER.lower()],
    )
    with http_receiver(fail_first=None, fail_status=503) as down:
        failed = await invoke(env, "audit", "anchor", "--webhook", down.url)
    assert failed.code == 1
    assert "answered 503" in failed.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["audit", "anchor"], "give --to FILE, --webhook URL or both"),
        (["audit", "anchor", "--webhook", "ftp://x"], "--webhook is not an http(s) URL"),
        (["audit", "verify", "--anchor", "/nonexistent/anchors"], "--anchor: no such file"),
        (["audit", "anchor", "--to", "/nonexistent/anchors"], "--to is not a file in an"),
    ],
)
async def test_anchor_options_are_checked(
    cli_env: dict[str, str], args: list[str], message: str
) -> None:
    result = await invoke(cli_env, *args)
    assert result.code == 2
    assert message in result.stderr
