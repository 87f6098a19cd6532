"""An approver's edited arguments, checked against the run's policy and the tool's
preconditions before a decision takes them (``EditCheck.recheck_edit``, given to
``approvals.decisions.decide`` by the decide use cases; ``Engine.recheck_edit`` delegates here).
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from approvals.errors import EditedArgumentsInvalid, EditRefused, GraphNotFound, RequestNotFound
from approvals.identity import call_identity, idempotency_key
from approvals.model import PendingCall
from approvals.redaction import redacted_paths, restore
from storage.runs import PgRuns, PgToolLedger
from web.engine.agents import AgentSide


class EditCheck:
    """The engine's check of an approver's edit (this module's docstring)."""

    def __init__(self, runs: PgRuns, ledger: PgToolLedger, agents: AgentSide) -> None:
        self._runs = runs
        self._ledger = ledger
        self._agents = agents

    async def recheck_edit(self, request: PendingCall, args: dict[str, Any]) -> dict[str, Any]:
        """The edited ``args`` as the tool parses them, once the run's policy and the tool's
        preconditions accept them; ``EditRefused`` otherwise (the request stays pending)."""
        # Function-local for the same reason as agents.build_graphs': these import LangGraph.
        from graphs.tool_call.call import first_failure
        from graphs.tool_call.edits import EditOutcome, recheck_edit, successful_counts
        from graphs.tool_call.tools import ToolCall

        run = await self._runs.get(request.run_id)
        if run is None:
            raise RequestNotFound(request.id)
        registry = self._agents.graphs.registry
        try:
            await registry.load(run.graph)
            tool = {t.name: t for t in registry.tools(run.graph)}.get(request.tool)
            governance = registry.governance(run.graph)
        except GraphNotFound as exc:
            raise EditRefused(
                request.id, None, f"the graph {run.graph!r} is not known here"
            ) from exc
        if tool is None or governance is None:
            raise EditRefused(
                request.id, None, f"{request.tool} has no policy to check an edit against here"
            )
        withheld = redacted_paths(request.shown)
        checked = args
        if withheld:
            # The approver edited around values it was not shown: the policy judges the call as
            # it would run, with those values put back (read from the run's own state).
            original = await self._call_args(run.graph, request)
            if original is None:
                raise EditRefused(
                    request.id, None, "the call's withheld arguments cannot be read to check it"
                )
            checked = restore(args, original, withheld)
        try:
            parsed = tool.validate(checked).model_dump(mode="json")
        except ValidationError as exc:
            errors = [
                {"path": "/".join(str(p) for p in e["loc"]), "message": e["msg"]}
                for e in exc.errors()
            ]
            raise EditedArgumentsInvalid(request.id, errors) from exc
        call = ToolCall(
            run_id=request.run_id,
            call_id=request.call_id,
            tool=tool.name,
            idempotency_key=idempotency_key(run_id=request.run_id, call_id=request.call_id),
            principal=request.requested_by,
        )
        failed = await first_failure(tool.preconditions, parsed, call)
        if failed is not None:
            raise EditRefused(request.id, failed.condition, failed.message)
        check = await recheck_edit(
            governance=governance,
            graph=run.graph,
            tool=tool,
            request=request,
            args=parsed,
            tool_counts=successful_counts(await self._ledger.for_run(request.run_id)),
        )
        if check.outcome in (EditOutcome.DENIED, EditOutcome.REWRITTEN):
            raise EditRefused(request.id, check.rule, check.message or check.outcome.value)
        # NEEDS_APPROVAL (the edit lands in a rule that would not have offered this approver
        # approve and edit: approvals.edit_coverage) is taken as a proposal: when the call is
        # about to run it becomes a request under that rule, with its own offer and approvers,
        # which the editor may not decide. It never runs on this decision.
        # A redacted request's decision keeps the markers: the withheld values are put back
        # only when the call runs, and never stored with the decision.
        return args if withheld else parsed

    async def _call_args(self, graph: str, request: PendingCall) -> dict[str, Any] | None:
        """The arguments of ``request``'s call as its run holds them, when they are the ones
        the request's identity binds (``None`` otherwise, or when they cannot be found)."""
        registry = self._agents.graphs.registry
        await registry.load(graph)
        tool = {t.name: t for t in registry.tools(graph)}.get(request.tool)
        snapshot = await registry.get(graph).aget_state(
            {"configurable": {"thread_id": request.thread_id}}
        )
        for message in reversed(snapshot.values.get("messages") or []):
            for call in getattr(message, "tool_calls", None) or []:
                if call.get("id") != request.call_id or tool is None:
                    continue
                try:
                    args: dict[str, Any] = tool.validate(call.get("args") or {}).model_dump(
                        mode="json"
                    )
                except ValidationError:
                    return None
                bound = call_identity(
                    run_id=request.run_id, call_id=request.call_id, tool=tool.name, args=args
                )
                return args if bound == request.identity else None
        return None
