from web.engine import Engine


async def test_refund_pauses_and_resumes(engine: Engine) -> None:
    out = await engine.runner.start("refund", {"message": "refund 1001"}, principal="alice")
    assert out.status == "waiting"
    await engine.decide(out.pending[0], "approve", principal="bob")
    assert await engine.worker.drain() == 1
    run = await engine.runs.get(out.run_id)
    assert run is not None and run.status == "completed"
