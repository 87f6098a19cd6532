"""The user's run, not the host's (issue 33, item 1): an OpenAI-SDK agent registered with its
context factory, ``RunConfig``, ``RunHooks`` and session runs with them, before its pause and
after its resume in a worker; on real PostgreSQL, with scripted models.

The context object is made from the run input's ``"context"`` JSON at the start and made again
from the JSON the run's row keeps at each resume: nothing of it is in the stored ``RunState``.
A session kept by the engine (``session="postgres"``) holds a thread's conversation across its
runs and across a pause, each item once.
"""

from __future__ import annotations

import dataclasses
from typing import Any, cast

import pytest
import pytest_asyncio
from agents import (
    Agent,
    GuardrailFunctionOutput,
    InputGuardrail,
    RunConfig,
    RunContextWrapper,
    RunHooks,
    Tool,
    function_tool,
)
from agents.memory import Session, SessionSettings
from agents.models.interface import Model, ModelProvider

from approvals.errors import GraphLoadError, InvalidRunInput
from graphs.examples.openai_refund import ScriptedModel
from graphs.hosts.openai import OpenAIAgent
from graphs.hosts.openai.ports import OPENAI_SESSIONS
from graphs.hosts.openai.run_config import UserRun, run_config_for
from graphs.tool_call.deps import GraphDeps
from storage.openai_sessions import PgOpenAISessions
from tests.integration.helpers import scalar
from web.engine import Engine

pytestmark = pytest.mark.asyncio(loop_scope="session")

HERE = "tests.integration.test_openai_user_run"
#: Only in the context JSON: where it shows up, the context went.
TENANT = "tenant-7f3c"


@dataclasses.dataclass
class Account:
    """The user's own context type: not JSON, so only the factory can make it."""

    tenant: str
    serial: int


#: What the factories made and what the tools and hooks saw, in order (reset by each test).
made: list[dict[str, Any]] = []
seen: list[tuple[str, Any]] = []
user_sessions: dict[str, InMemorySession] = {}


@pytest.fixture(autouse=True)
def fresh() -> None:
    made.clear()
    seen.clear()
    user_sessions.clear()


def make_account(data: dict[str, Any]) -> Account:
    if "tenant" not in data:
        raise ValueError("a tenant is required")
    made.append(data)
    return Account(tenant=str(data["tenant"]), serial=len(made))


def send_script(text: str, outputs: dict[str, Any]) -> tuple[list[Any], str]:
    """Look the account up, then send (which needs approval), then answer."""
    if "l1" not in outputs:
        return [("l1", "lookup", {})], ""
    if "s1" not in outputs:
        return [("s1", "send", {"to": text})], ""
    return [], f"sent: {outputs['s1']}"


def tools() -> list[Any]:
    @function_tool
    async def lookup(ctx: RunContextWrapper[Any]) -> str:
        """Look the caller's account up."""
        seen.append(("lookup", ctx.context))
        return "found"

    @function_tool(needs_approval=True)
    async def send(ctx: RunContextWrapper[Any], to: str) -> str:
        """Send a message. Needs approval."""
        seen.append(("send", ctx.context))
        return f"sent to {to} as {getattr(ctx.context, 'tenant', None)}"

    return [lookup, send]


def with_context(deps: GraphDeps) -> OpenAIAgent:
    agent = Agent[Any](name="ctx_agent", model=ScriptedModel(send_script), tools=tools())
    return OpenAIAgent(agent, context=make_account)


def without_context(deps: GraphDeps) -> Agent[Any]:
    return Agent(name="plain_agent", model=ScriptedModel(send_script), tools=tools())


async def approve_all(engine: Engine, pending: tuple[str, ...] | list[str]) -> None:
    for request_id in pending:
        await engine.decide_as_operator(request_id, "approve", principal="bob")
    await engine.drain()


async def test_the_context_reaches_tools_before_the_pause_and_is_made_again_on_resume(
    engine: Engine,
) -> None:
    engine.registry._entries["ctx_agent"] = f"{HERE}:with_context"
    given = {"message": "x", "context": {"tenant": TENANT}}
    run = await engine.runner.start("ctx_agent", given, principal="alice")
    assert run.status == "waiting", run
    assert seen == [("lookup", Account(tenant=TENANT, serial=1))]
    # The run's row keeps the JSON; the stored state holds nothing of the context.
    row = await engine.runs.get(run.run_id)
    assert row is not None
    assert row.input["context"] == {"tenant": TENANT}
    state = await scalar(
        engine, "SELECT state FROM openai_run_states WHERE run_id = %s", run.run_id
    )
    assert TENANT not in state

    await approve_all(engine, run.pending)
    finished = await engine.runs.get(run.run_id)
    assert finished is not None
    assert finished.status == "completed", finished
    # Made again by the factory from the stored JSON (serial 2), in the worker's step.
    assert made == [{"tenant": TENANT}, {"tenant": TENANT}]
    assert seen[1:] == [("send", Account(tenant=TENANT, serial=2))]
    assert finished.answer == f"sent: sent to x as {TENANT}"


def with_mapping_context(deps: GraphDeps) -> OpenAIAgent:
    agent = Agent[Any](name="map_agent", model=ScriptedModel(send_script), tools=tools())
    # A mapping the SDK would copy into the state as it is; a client no JSON can hold.
    return OpenAIAgent(agent, context=lambda data: {**data, "client": object()})


async def test_a_mapping_context_is_not_stored_in_the_state_either(engine: Engine) -> None:
    engine.registry._entries["map_agent"] = f"{HERE}:with_mapping_context"
    given = {"message": "x", "context": {"tenant": TENANT}}
    run = await engine.runner.start("map_agent", given, principal="alice")
    assert run.status == "waiting", run
    state = await scalar(
        engine, "SELECT state FROM openai_run_states WHERE run_id = %s", run.run_id
    )
    assert TENANT not in state
    await approve_all(engine, run.pending)
    finished = await engine.runs.get(run.run_id)
    assert finished is not None
    assert finished.answer == "sent: sent to x as None", finished
    assert [(name, ctx["tenant"]) for name, ctx in seen] == [("lookup", TENANT), ("send", TENANT)]


async def test_context_for_an_agent_without_a_factory_is_refused_with_nothing_written(
    engine: Engine,
) -> None:
    engine.registry._entries["plain_agent"] = f"{HERE}:without_context"
    engine.registry._entries["ctx_agent"] = f"{HERE}:with_context"
    given = {"message": "x", "context": {"tenant": TENANT}}
    with pytest.raises(InvalidRunInput, match='"context" is given, but this agent takes none'):
        await engine.runner.start("plain_agent", given, principal="alice")
    # A context its factory refuses, and one that is no JSON object, are refused the same way.
    with pytest.raises(InvalidRunInput, match=r"context factory refused.*a tenant is required"):
        await engine.runner.start("ctx_agent", {"message": "x", "context": {}}, principal="a")
    with pytest.raises(InvalidRunInput, match='"context" must be a JSON object'):
        await engine.runner.start("ctx_agent", {"message": "x", "context": [1]}, principal="a")
    for table in ("runs", "approval_requests", "openai_run_states", "interception_records"):
        assert await scalar(engine, f"SELECT count(*) FROM {table}") == 0, table  # noqa: S608
    assert seen == []


class RecordingHooks(RunHooks[Any]):
    """The user's hooks: every agent and tool event, with the context it saw."""

    async def on_agent_start(self, context: RunContextWrapper[Any], agent: Agent[Any]) -> None:
        seen.append(("agent_start", context.context))

    async def on_tool_end(
        self, context: RunContextWrapper[Any], agent: Agent[Any], tool: Tool, result: object
    ) -> None:
        seen.append((f"tool_end:{tool.name}", result))

    async def on_agent_end(
        self, context: RunContextWrapper[Any], agent: Agent[Any], output: Any
    ) -> None:
        seen.append(("agent_end", output))


class ScriptedProvider(ModelProvider):
    """The user's model provider: the agent names its model, the provider makes it."""

    def get_model(self, model_name: str | None) -> Model:
        seen.append(("get_model", model_name))
        return ScriptedModel(send_script)


def hooked(deps: GraphDeps) -> OpenAIAgent:
    agent = Agent[Any](name="hooked_agent", model="scripted-send", tools=tools())
    return OpenAIAgent(
        agent,
        context=make_account,
        run_config=RunConfig(model_provider=ScriptedProvider(), tracing_disabled=True),
        hooks=RecordingHooks,
    )


async def test_user_hooks_and_model_provider_see_the_run_across_the_pause(
    engine: Engine,
) -> None:
    engine.registry._entries["hooked_agent"] = f"{HERE}:hooked"
    given = {"message": "x", "context": {"tenant": TENANT}}
    run = await engine.runner.start("hooked_agent", given, principal="alice")
    assert run.status == "waiting", run
    first = Account(tenant=TENANT, serial=1)
    assert seen == [
        ("agent_start", first),
        ("get_model", "scripted-send"),
        ("lookup", first),
        ("tool_end:lookup", "found"),
        ("get_model", "scripted-send"),
    ]
    seen.clear()
    await approve_all(engine, run.pending)
    finished = await engine.runs.get(run.run_id)
    assert finished is not None
    assert finished.status == "completed", finished
    again = Account(tenant=TENANT, serial=2)
    answer = f"sent: sent to x as {TENANT}"
    # The approved call runs first (the turn it paused in), then the agent's next turn.
    assert [e for e in seen if e[0] != "get_model"] == [
        ("send", again),
        ("tool_end:send", f"sent to x as {TENANT}"),
        ("agent_start", again),
        ("agent_end", answer),
    ]


def refuse_forbidden(
    ctx: RunContextWrapper[Any], agent: Agent[Any], given: Any
) -> GuardrailFunctionOutput:
    return GuardrailFunctionOutput(output_info=None, tripwire_triggered="forbidden" in str(given))


def guarded(deps: GraphDeps) -> OpenAIAgent:
    agent = Agent[Any](name="guarded_agent", model=ScriptedModel(send_script), tools=tools())
    config = RunConfig(
        input_guardrails=[InputGuardrail(refuse_forbidden, name="no_forbidden")],
        tracing_disabled=True,
    )
    return OpenAIAgent(agent, run_config=lambda: config)


async def test_a_user_input_guardrail_blocks_the_run_and_runs_no_tool(engine: Engine) -> None:
    engine.registry._entries["guarded_agent"] = f"{HERE}:guarded"
    run = await engine.runner.start("guarded_agent", {"message": "forbidden"}, principal="a")
    assert run.status == "blocked", run
    assert run.error == "blocked by the input guardrail no_forbidden"
    assert seen == []


async def test_the_run_config_keeps_the_users_settings_and_fills_in_the_hosts() -> None:
    agent = Agent[Any](name="a")
    bare = run_config_for(UserRun(), workflow="reg", run_id="r1", thread_id="t1")
    assert bare.tracing_disabled is True
    assert bare.workflow_name == "reg"
    user = RunConfig(trace_metadata={"team": "x"})
    made = run_config_for(
        UserRun.of("reg", OpenAIAgent(agent, run_config=user)),
        workflow="reg",
        run_id="r1",
        thread_id="t1",
    )
    # The user's tracing is the user's (on, as the SDK's default), grouped by thread.
    assert made.tracing_disabled is False
    assert (made.workflow_name, made.group_id) == ("reg", "t1")
    assert made.trace_metadata == {"approvals_run_id": "r1", "team": "x"}
    assert user.trace_metadata == {"team": "x"}  # the user's object is left as it was
    named = RunConfig(workflow_name="mine", group_id="g")
    kept = run_config_for(UserRun(run_config=named), workflow="reg", run_id="r1", thread_id="t1")
    assert (kept.workflow_name, kept.group_id) == ("mine", "g")


# ---- sessions -------------------------------------------------------------------------------


class HistoryModel(ScriptedModel):
    """A scripted model that records how many items of history each call was given."""

    async def get_response(self, system_instructions: Any, input: Any, *a: Any, **k: Any) -> Any:
        seen.append(("model_input", [_kind(i) for i in input] if isinstance(input, list) else []))
        return await super().get_response(system_instructions, input, *a, **k)


def _kind(item: Any) -> str:
    data = item if isinstance(item, dict) else item.model_dump()
    if data.get("role") == "user":
        return f"user:{data['content']}"
    return str(data.get("type") or data.get("role"))


def chat_script(text: str, outputs: dict[str, Any]) -> tuple[list[Any], str]:
    """ "send ..." sends (needing approval) and then answers; anything else is answered."""
    if text.startswith("send") and "s1" not in outputs:
        return [("s1", "send", {"to": text})], ""
    return [], f"answered {text}"


def kept_in_postgres(deps: GraphDeps) -> OpenAIAgent:
    agent = Agent[Any](name="chat_agent", model=HistoryModel(chat_script), tools=tools())
    return OpenAIAgent(agent, session="postgres")


@pytest_asyncio.fixture(loop_scope="session")
async def sessions_kept(engine: Engine) -> None:
    # The composition root gives the store (web.engine.agents: openai_extras(sessions=...)):
    # the tests use it as the app does, not one of their own.
    extras = cast(dict[str, object], engine.registry.deps.extras)
    assert isinstance(extras.get(OPENAI_SESSIONS.name), PgOpenAISessions)


async def session_rows(engine: Engine, thread_id: str) -> list[str]:
    async with engine.connection() as conn:
        rows = await (
            await conn.execute(
                "SELECT item FROM openai_session_items WHERE thread_id = %s ORDER BY id",
                (thread_id,),
            )
        ).fetchall()
    return [_kind(row["item"]) for row in rows]


@pytest.mark.usefixtures("sessions_kept")
async def test_a_postgres_session_keeps_the_threads_conversation_across_runs_and_a_pause(
    engine: Engine,
) -> None:
    engine.registry._entries["chat_agent"] = f"{HERE}:kept_in_postgres"
    run = await engine.runner.start("chat_agent", {"message": "send hi"}, principal="alice")
    assert run.status == "waiting", run
    thread = run.thread_id
    # Kept as the pause left it: the input and the call waiting for its approval.
    assert await session_rows(engine, thread) == ["user:send hi", "function_call"]
    await approve_all(engine, run.pending)
    finished = await engine.runs.get(run.run_id)
    assert finished is not None
    assert finished.status == "completed", finished
    first_run = ["user:send hi", "function_call", "function_call_output", "message"]
    # Each item once: the resume adds what the run went on to, not the input again.
    assert await session_rows(engine, thread) == first_run

    seen.clear()
    second = await engine.runner.start(
        "chat_agent", {"message": "and then?"}, principal="alice", thread_id=thread
    )
    assert second.status == "completed", second
    # The model was given the thread's conversation before the new message.
    assert seen == [("model_input", [*first_run, "user:and then?"])]
    assert await session_rows(engine, thread) == [*first_run, "user:and then?", "message"]
    # Another thread's session is its own.
    other = await engine.runner.start("chat_agent", {"message": "hello"}, principal="alice")
    assert await session_rows(engine, other.thread_id) == ["user:hello", "message"]


class InMemorySession:
    """The user's own session (the SDK's ``Session`` protocol), one per thread."""

    session_settings: SessionSettings | None = None

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.items: list[Any] = []

    async def get_items(self, limit: int | None = None) -> list[Any]:
        return list(self.items[-limit:] if limit else self.items)

    async def add_items(self, items: list[Any]) -> None:
        self.items.extend(items)

    async def pop_item(self) -> Any | None:
        return self.items.pop() if self.items else None

    async def clear_session(self) -> None:
        self.items.clear()


def session_of(thread_id: str) -> Session:
    return user_sessions.setdefault(thread_id, InMemorySession(thread_id))


def own_session(deps: GraphDeps) -> OpenAIAgent:
    agent = Agent[Any](name="own_agent", model=HistoryModel(chat_script), tools=tools())
    return OpenAIAgent(agent, session=session_of)


def one_session_for_all(deps: GraphDeps) -> OpenAIAgent:
    agent = Agent[Any](name="shared_agent", model=HistoryModel(chat_script), tools=tools())
    return OpenAIAgent(agent, session=InMemorySession("everyone"))


async def test_a_session_object_shared_by_every_thread_is_refused_when_loaded(
    engine: Engine,
) -> None:
    engine.registry._entries["shared_agent"] = f"{HERE}:one_session_for_all"
    with pytest.raises(GraphLoadError, match="shared by every thread"):
        await engine.runner.start("shared_agent", {"message": "hi"}, principal="alice")
    assert await scalar(engine, "SELECT count(*) FROM runs") == 0


async def test_the_users_own_session_factory_is_given_the_thread(engine: Engine) -> None:
    engine.registry._entries["own_agent"] = f"{HERE}:own_session"
    run = await engine.runner.start("own_agent", {"message": "send hi"}, principal="alice")
    assert list(user_sessions) == [run.thread_id]
    await approve_all(engine, run.pending)
    kinds = [_kind(i) for i in user_sessions[run.thread_id].items]
    assert kinds == ["user:send hi", "function_call", "function_call_output", "message"]
    assert await scalar(engine, "SELECT count(*) FROM openai_session_items") == 0


async def test_a_postgres_session_keeps_items_in_order_and_pops_the_latest(
    engine: Engine,
) -> None:
    run = await engine.runner.start("refund_openai", {"message": "hello"}, principal="alice")
    session = PgOpenAISessions(engine._db).session(thread_id="t-1", run_id=run.run_id)
    assert isinstance(session, Session)
    assert session.session_id == "t-1"
    await session.add_items([{"role": "user", "content": str(n)} for n in range(3)])
    await session.add_items([])
    assert [i["content"] for i in await session.get_items()] == ["0", "1", "2"]
    assert [i["content"] for i in await session.get_items(limit=2)] == ["1", "2"]
    assert await session.pop_item() == {"role": "user", "content": "2"}
    await session.clear_session()
    assert await session.get_items() == []
    assert await session.pop_item() is None
