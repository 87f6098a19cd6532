"""A paused OpenAI-SDK run's stored ``RunState`` is sealed with a keyed MAC under the app's
secret: an insider who can write every table, but does not hold the secret, rewrites what the
model reads next and recomputes every version as a plain hash, as the old versions were. The
resume is refused, the run fails visibly, nothing runs, and the audit log says why. A state
sealed under another secret (a worker with another key) and an old unkeyed version are refused
the same way; an untouched state resumes."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from tests.integration.helpers import scalar, side_effects
from tests.integration.test_openai_runs import start, stored_state
from web.engine import Engine, open_engine
from web.settings import Settings

pytestmark = pytest.mark.asyncio(loop_scope="session")


def plain_hash(text: str) -> str:
    """What anyone can compute for a text: the version as it was before it was keyed."""
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


async def sealed_version(engine: Engine, run_id: str, state: str) -> str:
    """The version the engine's own key gives ``state`` in place of a run's stored one (its
    waiting calls and standing kept): what an insider who also holds the app's secret could
    write, to test what holds even then."""
    from graphs.hosts.openai.ports import OPENAI_STATE_SEAL
    from graphs.hosts.openai.sealing import SealedRow

    stored = await stored_state(engine, run_id)
    seal = engine.registry.deps.provided(OPENAI_STATE_SEAL)
    return seal.version(
        SealedRow(
            run_id=run_id,
            agent=stored["agent"],
            state=state,
            waiting=tuple((w["call_id"], w["request_id"]) for w in stored["waiting"]),
            status=stored["status"],
            answer=stored["answer"],
            error=stored["error"],
        )
    )


async def rewrite(engine: Engine, run_id: str, state: str, version: str) -> None:
    """As an insider with write access: store ``state`` with ``version``, and bind every
    request of the run to it, so the versions agree everywhere."""
    async with engine.connection() as conn:
        await conn.execute(
            "UPDATE openai_run_states SET state = %s, version = %s WHERE run_id = %s",
            (state, version, run_id),
        )
        await conn.execute(
            "UPDATE approval_requests SET state_version = %s WHERE run_id = %s",
            (version, run_id),
        )


async def refusals(engine: Engine, run_id: str) -> list[dict[str, Any]]:
    async with engine.connection() as conn:
        rows = await (
            await conn.execute(
                "SELECT data FROM audit_events WHERE kind = 'run.state_tampered'"
                " AND run_id = %s ORDER BY id",
                (run_id,),
            )
        ).fetchall()
    return [dict(r["data"]) for r in rows]


async def assert_refused(engine: Engine, run_id: str, reason: str) -> dict[str, Any]:
    failed = await engine.runs.get(run_id)
    assert failed is not None
    assert failed.status == "failed", failed
    assert failed.error is not None
    assert "stored run state" in failed.error, failed.error
    assert "the resume was refused" in failed.error, failed.error
    assert await side_effects(engine, run_id, "refund-1001") == []
    jobs = await scalar(
        engine, "SELECT array_agg(status) FROM resume_queue WHERE run_id = %s", run_id
    )
    assert jobs == ["failed"]
    [refused] = await refusals(engine, run_id)
    assert refused["reason"] == reason, refused
    return refused


async def test_the_stored_version_is_a_keyed_mac_and_an_untouched_state_resumes(
    engine: Engine,
) -> None:
    run = await start(engine, "refund 1001")
    stored = await stored_state(engine, run.run_id)
    assert stored["version"].startswith("hmac-sha256:"), stored["version"]
    assert plain_hash(stored["state"]) not in stored["version"]
    await engine.decide_as_operator(run.pending[0], "approve", principal="bob")
    assert await engine.drain() == 1
    finished = await engine.runs.get(run.run_id)
    assert finished is not None
    assert finished.status == "completed", finished
    assert finished.answer == "Refunded 25.00 on order 1001."
    assert len(await side_effects(engine, run.run_id, "refund-1001")) == 1
    assert await refusals(engine, run.run_id) == []


async def test_a_conversation_rewritten_with_a_recomputed_plain_hash_is_refused_and_audited(
    engine: Engine,
) -> None:
    """The insider raises the refund in the stored conversation (the call the model reads as
    its own, and the SDK hands the tool) and recomputes the plain hash everywhere. Before the
    MAC the state passed, and the model read a call it never made (the run completed, telling
    it the 900.00 refund was not approved)."""
    run = await start(engine, "refund 1001")
    stored = await stored_state(engine, run.run_id)
    forged = stored["state"].replace('\\"amount\\": 25.0', '\\"amount\\": 900.0')
    assert forged != stored["state"]
    await rewrite(engine, run.run_id, forged, plain_hash(forged))
    await engine.decide_as_operator(run.pending[0], "approve", principal="bob")
    assert await engine.drain() == 1
    assert await engine.drain() == 0  # the job ended: it is not retried on every pass
    refused = await assert_refused(engine, run.run_id, "unkeyed")
    # What the log keeps identifies the refused text; it holds no MAC this key would accept.
    assert refused["found"] == plain_hash(forged)
    assert refused["state_sha256"] == plain_hash(forged).removeprefix("sha256:")
    # The model never read the forged state: it answered nothing.
    failed = await engine.runs.get(run.run_id)
    assert failed is not None
    assert failed.answer is None


async def test_a_state_rewritten_under_the_old_keyed_version_is_refused_as_altered(
    engine: Engine,
) -> None:
    """Keeping the stored MAC and changing the text does not pass either."""
    run = await start(engine, "refund 1001")
    stored = await stored_state(engine, run.run_id)
    forged = stored["state"].replace('\\"amount\\": 25.0', '\\"amount\\": 900.0')
    assert forged != stored["state"]
    await rewrite(engine, run.run_id, forged, stored["version"])
    await engine.decide_as_operator(run.pending[0], "approve", principal="bob")
    assert await engine.drain() == 1
    await assert_refused(engine, run.run_id, "altered")


async def test_a_run_moved_onto_another_runs_state_is_refused(engine: Engine) -> None:
    """A MAC covers the run it was made for: another run's state and version, copied over
    this run's (both wait on the same call id), do not pass."""
    first = await start(engine, "refund 1001")
    second = await start(engine, "refund 1001", agent="refund_openai")
    donor = await stored_state(engine, first.run_id)
    async with engine.connection() as conn:
        await conn.execute(
            "UPDATE openai_run_states SET state = %s, version = %s WHERE run_id = %s",
            (donor["state"], donor["version"], second.run_id),
        )
        await conn.execute(
            "UPDATE approval_requests SET state_version = %s WHERE run_id = %s",
            (donor["version"], second.run_id),
        )
    await engine.decide_as_operator(second.pending[0], "approve", principal="bob")
    assert await engine.drain() == 1
    await assert_refused(engine, second.run_id, "altered")


async def test_an_unkeyed_version_written_before_the_mac_is_refused(engine: Engine) -> None:
    """A row as the host stored it before versions were keyed (its text untouched, its plain
    hash): nothing tells it from an insider's forgery, so it is refused, visibly."""
    run = await start(engine, "refund 1001")
    stored = await stored_state(engine, run.run_id)
    await rewrite(engine, run.run_id, stored["state"], plain_hash(stored["state"]))
    await engine.decide_as_operator(run.pending[0], "approve", principal="bob")
    assert await engine.drain() == 1
    await assert_refused(engine, run.run_id, "unkeyed")
    failed = await engine.runs.get(run.run_id)
    assert failed is not None
    assert failed.error is not None
    assert "unkeyed" in failed.error


async def test_a_state_sealed_under_another_secret_is_refused(
    engine: Engine, database_url: str, tmp_path: Path
) -> None:
    """A worker whose secret is not the one the state was sealed under (another machine's
    generated key, or a rotated one) refuses the resume instead of trusting the state."""
    run = await start(engine, "refund 1001")
    other = Settings(
        database_url=database_url,
        data_dir=tmp_path / "other",
        config_file=tmp_path / "none.toml",
        secret_key="another-secret-key-of-at-least-32-characters",
    )
    async with open_engine(database_url, other) as elsewhere:
        await elsewhere.decide_as_operator(run.pending[0], "approve", principal="bob")
        assert await elsewhere.drain() == 1
    refused = await assert_refused(engine, run.run_id, "other_key")
    stored = await stored_state(engine, run.run_id)
    assert refused["found"] == stored["version"]
