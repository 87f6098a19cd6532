"""A graph whose state is declared with ``typing.TypedDict`` (on Python < 3.12, where pydantic
cannot describe one) takes its own input keys beside the message, through the runner's input
admission, as with ``typing_extensions.TypedDict``; on real PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from approvals.errors import InvalidRunInput
from tests.integration.helpers import scalar, thread_values
from web.engine import Engine, open_engine
from web.settings import Settings

GRAPHS = {
    "typed_graph": "tests.integration.item6_graphs:typed_state_graph",
    "typed_agent": "tests.integration.item6_graphs:typed_state_agent",
}


@pytest.fixture
async def engine(database_url: str, tmp_path: Path) -> Any:
    settings = Settings(
        database_url=database_url, config_file=tmp_path / "none.toml", graphs=GRAPHS
    )
    async with open_engine(database_url, settings) as engine:
        yield engine


_state = thread_values


async def test_a_typing_typeddict_state_takes_its_own_input_keys(engine: Engine) -> None:
    out = await engine.runner.start(
        "typed_graph",
        {"message": "hello", "customer_tier": "gold", "customer": {"tier": "platinum"}},
        principal="alice",
    )
    assert out.status == "completed", out
    assert out.answer == "tier gold / platinum"
    state = await _state(engine, "typed_graph", out.thread_id)
    assert state["customer_tier"] == "gold"
    assert state["customer"] == {"tier": "platinum"}


async def test_an_agent_state_with_a_typing_typeddict_field_takes_it(engine: Engine) -> None:
    out = await engine.runner.start(
        "typed_agent",
        {"messages": [{"role": "user", "content": "hi"}], "customer": {"tier": "gold"}},
        principal="alice",
    )
    assert out.status == "completed", out
    assert (await _state(engine, "typed_agent", out.thread_id))["customer"] == {"tier": "gold"}


async def test_a_key_the_typed_state_does_not_have_is_still_refused_naming_what_it_takes(
    engine: Engine,
) -> None:
    with pytest.raises(InvalidRunInput) as refused:
        await engine.runner.start(
            "typed_graph", {"message": "hello", "tier": "gold"}, principal="alice"
        )
    assert str(refused.value).endswith(
        "unknown input field(s): tier "
        "(this graph takes message, messages, customer, customer_tier, configurable)"
    )
    assert await scalar(engine, "select count(*) from runs") == 0
