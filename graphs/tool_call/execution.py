"""Running a governed tool at most once per call, as the ledger records it, and what the model
sees when a call ends in a control error.

A call the ledger already holds is answered from its row, never run again; a call whose
outcome is unknown (its process died mid-call) goes to an operator to reconcile.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from langchain_core.messages import ToolMessage
from langgraph.errors import GraphBubbleUp

from approvals.identity import call_identity
from approvals.masking import Withheld, mask_shown
from approvals.model import DecisionKind, ExecutionStatus, RequestStatus, ToolExecution
from approvals.ports import NewRequest
from approvals.redaction import SHOWN_KEY, redact, withheld
from approvals.tracing import annotate, run_span
from graphs.hooks.approval import pause
from graphs.hooks.withheld import earlier_withheld, redacted_calls
from graphs.tool_call.call import first_failure
from graphs.tool_call.deps import GraphDeps
from graphs.tool_call.faults import pause_at
from graphs.tool_call.storable import storable, storable_text
from graphs.tool_call.tools import GovernedTool, ToolCall


def control_error(call_id: str, tool: str, error: dict[str, Any]) -> ToolMessage:
    """A control error the model sees; the loop continues."""
    return ToolMessage(
        content=json.dumps({"error": error}, sort_keys=True),
        tool_call_id=call_id,
        name=tool,
        status="error",
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class WithStateUpdate:
    """What a tool answered when it also asks the graph's state to change (a LangChain tool's
    ``Command(update=...)``): ``result`` is recorded and released as any tool's result, and
    ``state_update`` is kept with it in the ledger, serialized by the graph's checkpointer, so
    the graph gets it again whenever the ledger answers for the call (the step that ran it was
    re-run: another call of its task paused, or its process died before it was checkpointed)."""

    result: Any
    state_update: Any


class LedgerExecution:
    """The execution half of the tool step: :class:`graphs.tool_call.step.ToolStep` inherits it."""

    _deps: GraphDeps

    async def _reconcile(
        self,
        tool: GovernedTool,
        args_json: dict[str, Any],
        call: ToolCall,
        where: tuple[str, str | None],
    ) -> ToolMessage:
        """A call whose outcome is unknown (its process died mid-call) is never run again: an
        operator says whether it took effect, and the run goes on with that answer."""
        run_id, call_id = call.run_id, call.call_id
        thread_id, state_version = where
        kind = f"@reconcile:{tool.name}"
        new = NewRequest(
            run_id=run_id,
            thread_id=thread_id,
            call_id=call_id,
            tool=kind,
            shown=await self._reconcile_shown(tool, args_json, call, thread_id),
            args_schema={},
            identity=call_identity(run_id=run_id, call_id=call_id, tool=kind, args=args_json),
            reason="outcome unknown: say whether the call took effect",
            requested_by=call.principal,
            expires_at=datetime.now(UTC) + self._deps.reconcile_ttl,
            state_version=state_version,
            approvers=(self._deps.reconcile_group,),
            allow_edit=False,
        )
        request, decision = await self._deps.requests.open(new)
        ledger = self._deps.ledger
        if decision is None:
            if request.status is RequestStatus.PENDING:
                pause(request)
            return control_error(
                call_id,
                tool.name,
                {
                    "code": "outcome_unknown",
                    "message": "the call started earlier and its outcome was never recorded; "
                    "nobody reconciled it in time",
                },
            )
        if decision.kind is DecisionKind.REJECT:
            note = f"it did not take effect (reconciled by {decision.principal}"
            note += f": {decision.reason})" if decision.reason else ")"
            row = await ledger.reconcile(
                run_id=run_id, call_id=call_id, status=ExecutionStatus.FAILED, error=note
            )
            return control_error(call_id, tool.name, {"code": "not_executed", "message": row.error})
        result = {
            "reconciled": "took effect",
            "by": decision.principal,
            "note": decision.reason,
            "args": args_json,
        }
        row = await ledger.reconcile(
            run_id=run_id, call_id=call_id, status=ExecutionStatus.SUCCEEDED, result=result
        )
        return ToolMessage(
            content=json.dumps(row.result, sort_keys=True), tool_call_id=call_id, name=tool.name
        )

    async def _reconcile_shown(
        self, tool: GovernedTool, args_json: dict[str, Any], call: ToolCall, thread_id: str
    ) -> dict[str, Any]:
        """What the operator reconciling the call is shown: the call's arguments redacted as
        its own requests redacted them (markers, never the values), and the run's withheld
        values masked everywhere else in it."""
        redacted = await redacted_calls(self._deps.requests, call.run_id)
        args, done = redact(args_json, redacted.get(call.call_id, []))
        shown: dict[str, Any] = {
            "tool": tool.name,
            "description": (
                f"{tool.name} started but its outcome was never recorded: the process "
                "running it stopped. It will not be run again. Did it take effect? "
                "Approve: it did. Reject: it did not."
            ),
            "args": args,
            **({SHOWN_KEY: done} if done else {}),
        }
        values = withheld(args_json, done)
        if redacted.keys() - {call.call_id}:
            values += await earlier_withheld(
                self._deps.requests, self._deps.checkpointer, call.run_id, thread_id
            )
        return mask_shown(shown, Withheld(values))

    async def execute_once(
        self,
        tool: GovernedTool,
        parsed: Any,
        args_json: dict[str, Any],
        args_identity: str,
        call: ToolCall,
        where: tuple[str, str | None],
    ) -> ToolMessage:
        """Run the tool at most once for ``call``, with ``args_json`` (identity
        ``args_identity``), as recorded by the ledger. ``where``: the thread and the state
        version the step runs from."""
        ledger = self._deps.ledger
        run_id, call_id, key = call.run_id, call.call_id, call.idempotency_key
        owned, row = await ledger.begin(
            run_id=run_id, call_id=call_id, tool=tool.name, key=key, args_identity=args_identity
        )
        if not owned and row.args_identity != args_identity:
            # Another call under this call's id (a model that reused it with other arguments):
            # it never runs, and the first call's outcome is not its answer either.
            return control_error(
                call_id,
                tool.name,
                {
                    "code": "call_id_reused",
                    "call_id": call_id,
                    "message": f"call id {call_id!r} already ran with other arguments in "
                    "this run; this call did not run. Propose it again with a new id.",
                },
            )
        if not owned:
            return await self._answer_from_ledger(tool, row, args_json, call, where)
        with run_span("approvals.tool", run_id, tool=tool.name, call_id=call_id) as span:
            answer = await self._run(tool, parsed, args_json, call)
            annotate(span, status=answer.status)
        return answer

    async def _answer_from_ledger(
        self,
        tool: GovernedTool,
        row: ToolExecution,
        args_json: dict[str, Any],
        call: ToolCall,
        where: tuple[str, str | None],
    ) -> ToolMessage:
        """The answer for a call the ledger already holds (``row``), which never runs again."""
        run_id, call_id = call.run_id, call.call_id
        if row.status is ExecutionStatus.STARTED:
            # Started before and never finished: the process died mid-call. We cannot
            # know whether the effect happened, so we never run it again.
            row = await self._deps.ledger.finish(
                run_id=run_id, call_id=call_id, status=ExecutionStatus.OUTCOME_UNKNOWN
            )
        if row.status is ExecutionStatus.SUCCEEDED and row.error:
            return control_error(
                call_id,
                tool.name,
                {"code": "postcondition_failed", "message": row.error, "result": row.result},
            )
        if row.status is ExecutionStatus.SUCCEEDED:
            return ToolMessage(
                content=json.dumps(row.result, sort_keys=True),
                tool_call_id=call_id,
                name=tool.name,
            )
        if row.status is ExecutionStatus.FAILED:
            return control_error(call_id, tool.name, {"code": "tool_failed", "message": row.error})
        return await self._reconcile(tool, args_json, call, where)

    async def _run(
        self, tool: GovernedTool, parsed: Any, args_json: dict[str, Any], call: ToolCall
    ) -> ToolMessage:
        """Run the tool, the ledger's row for the call being ours, and record what it did."""
        ledger = self._deps.ledger
        run_id, call_id = call.run_id, call.call_id
        try:
            result = await tool.fn(parsed, call)
            update: tuple[str, bytes] | None = None
            if isinstance(result, WithStateUpdate):
                if result.state_update is not None:
                    update = self._deps.checkpointer.serde.dumps_typed(result.state_update)
                result = result.result
            json.dumps(result)
        except GraphBubbleUp:
            raise
        except Exception as exc:  # a tool's own failure is reported to the model
            message = storable_text(f"{type(exc).__name__}: {exc}"[:500])
            await ledger.finish(
                run_id=run_id, call_id=call_id, status=ExecutionStatus.FAILED, error=message
            )
            return control_error(call_id, tool.name, {"code": "tool_failed", "message": message})
        # The effect happened: from here on nothing may fail for what the result holds. A NUL
        # or a lone surrogate (a page someone else wrote) is kept as a visible escape, so the
        # ledger, the postconditions and the model all see the same storable value.
        result = storable(result)
        # A postcondition that does not hold is recorded with the result and reported, never
        # a reason to run the tool again.
        failed = await first_failure(tool.postconditions, args_json, call, result)
        problem = (
            storable_text(f"postcondition {failed.condition} failed: {failed.message}")
            if failed
            else None
        )
        await ledger.finish(
            run_id=run_id,
            call_id=call_id,
            status=ExecutionStatus.SUCCEEDED,
            result=result,
            error=problem,
            state_update=update,
        )
        await pause_at("AFTER_TOOL")
        if problem is not None:
            return control_error(
                call_id,
                tool.name,
                {"code": "postcondition_failed", "message": problem, "result": result},
            )
        return ToolMessage(
            content=json.dumps(result, sort_keys=True), tool_call_id=call_id, name=tool.name
        )
