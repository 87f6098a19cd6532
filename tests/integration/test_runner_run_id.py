"""A run's id chosen by the caller of ``Runner.start`` (which follows the run before its row
is written, as the LangGraph face's background start does): the run gets that id, and an id
the runner could never have made is refused before anything is written."""

from __future__ import annotations

import uuid

import pytest

from approvals.errors import InvalidRunId
from tests.integration.helpers import scalar
from web.engine import Engine

pytestmark = pytest.mark.asyncio(loop_scope="session")

REFUND = {"message": "refund 1001"}
SOME_ID = "5f0c2f1e-9a7b-4c3d-8e2f-1a2b3c4d5e6f"


async def test_a_run_gets_the_id_its_caller_chose(engine: Engine) -> None:
    chosen = str(uuid.uuid4())
    out = await engine.runner.start("refund", REFUND, principal="alice", run_id=chosen)
    assert out.run_id == chosen
    run = await engine.runs.get(chosen)
    assert run is not None
    # A run without a thread of its own names its thread after itself, as a made-up id does.
    assert (run.thread_id, run.started_by) == (chosen, "alice")
    made = await engine.runner.start("refund", REFUND, principal="alice")
    assert made.run_id != chosen
    assert str(uuid.UUID(made.run_id)) == made.run_id


@pytest.mark.parametrize(
    "wrong",
    [
        "run-1",
        "",
        SOME_ID.upper(),
        "{" + SOME_ID + "}",
        SOME_ID.replace("-", ""),
    ],
)
async def test_a_run_id_not_in_canonical_uuid_form_is_refused_before_anything_is_written(
    engine: Engine, wrong: str
) -> None:
    with pytest.raises(InvalidRunId):
        await engine.runner.start("refund", REFUND, principal="alice", run_id=wrong)
    assert await scalar(engine, "select count(*) from runs") == 0
    assert await scalar(engine, "select count(*) from checkpoints") == 0
