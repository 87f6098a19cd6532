"""A web process builds every registered graph and runs the inbox's queries before it serves
(``web.engine.warm_up``, from the app's lifespan), so that its first approver does not wait
for them; a graph that cannot be built is logged and does not stop the others."""

from __future__ import annotations

import pytest

from web.engine import Engine
from web.engine.warm_up import warm_up
from web.faces.pages.templating import compile_templates, templates

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_every_graph_is_built_and_a_broken_one_is_named(engine: Engine) -> None:
    engine.registry._entries["broken"] = "tests.integration.no_such_module:agent"
    assert engine.registry.loaded() == []
    assert await warm_up(engine) == ["broken"]
    assert engine.registry.loaded() == sorted(set(engine.agent_names()) - {"broken"})
    assert "refund" in engine.registry.loaded()


async def test_every_page_template_is_compiled() -> None:
    assert compile_templates() >= 10
    cache = templates.env.cache
    assert cache is not None
    assert any(key[1] == "inbox.html" for key in cache)
