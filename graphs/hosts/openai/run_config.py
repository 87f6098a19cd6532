"""The user's run: what an ``OpenAIAgent`` registration gives the SDK's ``Runner.run`` beyond
the agent (its context, ``RunConfig``, ``RunHooks`` and session), checked when the agent is
registered, and the ``RunConfig`` each step runs with (``run_config_for``, the one place it is
built).

- **Context**: a function of the run input's ``"context"`` JSON object (``{}`` when the input
  has none) that returns the object tools see as ``ctx.context``. It is called when the run
  starts (a failure refuses the input) and again at each resume, from the JSON the run's row
  keeps: the object itself is never stored, pickled or serialized into the ``RunState``.
- **RunConfig**: the user's (or a function that makes one for each step), with the host's
  defaults where the user left the SDK's: the workflow name (the registered name) and the trace
  group (the thread). Without one, tracing is disabled, as before.
- **Hooks**: the user's ``RunHooks`` (or a function that makes them for each step).
- **Session**: ``"postgres"``, the thread's SDK session kept by the engine
  (``storage.openai_sessions``), or a function of the thread id that returns the user's own.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from agents import RunConfig, RunHooks
from agents.lifecycle import RunHooksBase
from agents.memory import Session

from graphs.hosts.openai.governed import OpenAIAgent, UngovernedAgent
from graphs.hosts.openai.ports import OPENAI_SESSIONS
from graphs.tool_call.deps import GraphDeps

#: ``OpenAIAgent(..., session=POSTGRES_SESSION)``: the thread's session, kept by the engine.
POSTGRES_SESSION = "postgres"
#: The SDK's default workflow name, which a run takes the registered name in place of.
_SDK_WORKFLOW = RunConfig().workflow_name

ContextFactory = Callable[[dict[str, Any]], Any]
SessionFactory = Callable[[str], Session]


class UserRunInvalid(UngovernedAgent):
    """What a registration gives for the user's run cannot be used (the registry refuses the
    entry, naming why)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class UserRun:
    """The user's pieces of an agent's runs, as registered (``OpenAIAgent``)."""

    context: ContextFactory | None = None
    run_config: RunConfig | Callable[[], RunConfig] | None = None
    hooks: RunHooks[Any] | Callable[[], RunHooks[Any]] | None = None
    session: Literal["postgres"] | SessionFactory | None = None

    @classmethod
    def of(cls, name: str, given: OpenAIAgent) -> UserRun:
        """The pieces ``given`` names, checked: ``UserRunInvalid`` says what is wrong."""
        if given.context is not None and not callable(given.context):
            raise UserRunInvalid(
                f"{name}: context= takes a function of the input's context JSON object that "
                "returns the context object (e.g. MyContext.model_validate)"
            )
        if given.run_config is not None and not (
            isinstance(given.run_config, RunConfig) or _factory(given.run_config)
        ):
            raise UserRunInvalid(f"{name}: run_config= takes an agents.RunConfig or a function")
        if isinstance(given.run_config, RunConfig):
            _check_config(name, given.run_config)
        if given.hooks is not None and not (
            isinstance(given.hooks, RunHooksBase) or _factory(given.hooks)
        ):
            raise UserRunInvalid(f"{name}: hooks= takes an agents.RunHooks or a function")
        session = given.session
        if session is not None and session != POSTGRES_SESSION and not _factory(session):
            raise UserRunInvalid(
                f"{name}: session= takes {POSTGRES_SESSION!r} (the thread's session, kept by "
                "the engine) or a function of the thread id that returns an SDK session; one "
                "session object would be shared by every thread"
            )
        return cls(
            context=given.context,
            run_config=given.run_config,
            hooks=given.hooks,
            session=session,
        )

    async def context_for(self, data: dict[str, Any] | None) -> Any:
        """The user's context object, made from the input's ``"context"`` JSON (``{}``
        without one); ``None`` when the agent takes no context."""
        if self.context is None:
            return None
        made = self.context(dict(data or {}))
        return await made if inspect.isawaitable(made) else made

    def hooks_for(self) -> RunHooks[Any] | None:
        """The hooks a step runs with."""
        if self.hooks is None or isinstance(self.hooks, RunHooksBase):
            return self.hooks
        made = self.hooks()
        if not isinstance(made, RunHooksBase):
            raise TypeError(f"the hooks function returned {type(made).__name__}, not RunHooks")
        return made

    def session_for(self, deps: GraphDeps, *, thread_id: str, run_id: str) -> Session | None:
        """The SDK session a step of ``run_id`` runs with: the thread's, the same object kind
        at the start and at each resume (the SDK refuses a resume whose session has another
        ``session_id`` than the one it paused with)."""
        if self.session is None:
            return None
        if self.session == POSTGRES_SESSION:
            try:
                store = deps.provided(OPENAI_SESSIONS)
            except LookupError as exc:
                raise LookupError(
                    "this host keeps no OpenAI sessions: give GraphDeps.extras "
                    "openai_extras(..., sessions=storage.openai_sessions.PgOpenAISessions(db))"
                ) from exc
            found: Session = store.session(thread_id=thread_id, run_id=run_id)
            return found
        assert callable(self.session)
        made = self.session(thread_id)
        if not isinstance(made, Session):
            raise TypeError(
                f"the session function returned {type(made).__name__}, not an SDK Session"
            )
        return made


def run_config_for(user: UserRun, *, workflow: str, run_id: str, thread_id: str) -> RunConfig:
    """The ``RunConfig`` one step of a run runs with: the user's, with the host's defaults
    where the user left the SDK's (the workflow is the registered name, the trace group the
    thread, the trace metadata names the run); without one, tracing is disabled."""
    given = user.run_config
    if given is None:
        return RunConfig(tracing_disabled=True, workflow_name=workflow)
    config = given if isinstance(given, RunConfig) else given()
    if not isinstance(config, RunConfig):
        raise TypeError(f"the run_config function returned {type(config).__name__}")
    _check_config(workflow, config)
    metadata = {"approvals_run_id": run_id, **(config.trace_metadata or {})}
    # A copy: the user's object may serve every run of the agent at once.
    return dataclasses.replace(
        config,
        workflow_name=workflow if config.workflow_name == _SDK_WORKFLOW else config.workflow_name,
        group_id=config.group_id or thread_id,
        trace_metadata=metadata,
    )


def _check_config(name: str, config: RunConfig) -> None:
    if config.sandbox is not None:
        # A sandbox runs tools the engine cannot govern (see GovernedAgent).
        raise UserRunInvalid(f"{name}: a RunConfig with a sandbox is not hosted")


def _factory(value: Any) -> bool:
    """Whether ``value`` can make the piece for each step (a function, or a class)."""
    return callable(value)
