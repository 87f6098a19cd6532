"""The approval cycle as a DBOS workflow: the peer ``bench/approval_cycle.py`` times beside ours.

The workflow does what both LangGraph variants do, with DBOS's own primitives:

* the scripted model's turn is a step (``bench_script``, the same ``ScriptedChatModel``);
* the pause: the workflow publishes the proposed call (``DBOS.set_event``, "pending") and waits
  for the decision with ``DBOS.recv``;
* the approver reads the pending call (``DBOS.get_event``) and delivers the decision with
  ``DBOS.send``;
* the tool runs in a step: one ``demo_side_effects`` row in the bench's database, like the
  other variants' refund;
* the model's final turn is a step.

DBOS keeps its system tables in a database of its own on the same server (``system_url``);
the tool writes to the bench's database, as ours does. DBOS is in the optional ``bench``
extra (``pip install -e '.[bench]'``, which ``make bench`` runs); without it the variant is
left out and the report says why.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from graphs.examples.scripted import ScriptedChatModel

TOPIC = "decision"
PENDING = "pending"
#: The lowest values DBOS accepts: the variant is timed at its best, not at its defaults
#: (which coalesce event notifications for 10 ms).
NOTIFICATION_COALESCE = 0.001
LISTENER_POLL = 0.001


def import_error() -> str | None:
    """Why DBOS cannot be used here (``None``: it can)."""
    try:
        import dbos  # noqa: F401
    except ImportError as exc:
        return f"{type(exc).__name__}: {exc} (install the bench extra: pip install -e '.[bench]')"
    return None


class DbosCycle:
    """One DBOS instance for the bench's run, with the approval workflow registered."""

    def __init__(self, *, effects: Any, script: Any, message: str, approver: str) -> None:
        self._effects = effects
        self._model = ScriptedChatModel(script)
        self._message = message
        self._approver = approver
        self._workflow: Any = None

    @asynccontextmanager
    async def launched(self, system_url: str, pool_size: int) -> AsyncIterator[DbosCycle]:
        """DBOS configured on ``system_url`` (its system database), launched, and destroyed on
        exit."""
        from dbos import DBOS, DBOSConfig

        config: DBOSConfig = {
            "name": "approvals-bench",
            "system_database_url": system_url,
            "sys_db_pool_size": pool_size,
            "log_level": "WARNING",
            "notification_coalesce_sec": NOTIFICATION_COALESCE,
            "notification_listener_polling_interval_sec": LISTENER_POLL,
        }
        DBOS(config=config)
        self._register()
        DBOS.launch()
        try:
            yield self
        finally:
            DBOS.destroy(destroy_registry=True)

    def _register(self) -> None:
        from dbos import DBOS

        model = self._model
        effects = self._effects

        @DBOS.step(name="model_turn")
        async def model_turn(messages: list[BaseMessage]) -> AIMessage:
            reply = await model.ainvoke(messages)
            if not isinstance(reply, AIMessage):
                raise TypeError(f"the model answered {type(reply).__name__}")
            return reply

        @DBOS.step(name="issue_refund")
        async def issue_refund(run_id: str, call_id: str, args: dict[str, Any]) -> str:
            await effects.record(run_id=run_id, call_id=call_id, tool="issue_refund", args=args)
            key = uuid.uuid5(uuid.NAMESPACE_URL, f"{run_id}/{call_id}").hex
            result = {"refund_id": f"rf_{key[:12]}", **args}
            return json.dumps(result, sort_keys=True)

        @DBOS.workflow(name="approval_cycle")
        async def approval_cycle(run_id: str, message: str) -> str:
            messages: list[BaseMessage] = [HumanMessage(content=message)]
            reply = await model_turn(messages)
            messages.append(reply)
            for call in reply.tool_calls:
                shown = {"call_id": call["id"], "tool": call["name"], "args": call["args"]}
                await DBOS.set_event_async(PENDING, shown)
                decision = await DBOS.recv_async(TOPIC, timeout_seconds=60)
                if isinstance(decision, dict) and decision.get("verdict") == "approve":
                    content = await issue_refund(run_id, str(call["id"]), dict(call["args"]))
                else:
                    content = json.dumps({"error": {"code": "rejected"}})
                messages.append(
                    ToolMessage(content=content, tool_call_id=call["id"], name=call["name"])
                )
            final = await model_turn(messages)
            return str(final.content)

        self._workflow = approval_cycle

    async def cycle(self) -> tuple[float, dict[str, float]]:
        """One cycle: start (until the call is pending), decide (send), resume (until the
        workflow's result). Returns the total and the phases, in seconds."""
        from dbos import DBOS, SetWorkflowID

        run_id = str(uuid.uuid4())
        t0 = time.perf_counter()
        with SetWorkflowID(run_id):
            handle = await DBOS.start_workflow_async(self._workflow, run_id, self._message)
        pending = await DBOS.get_event_async(run_id, PENDING, timeout_seconds=60)
        t1 = time.perf_counter()
        if not isinstance(pending, dict) or not re.fullmatch(r"refund-\d{4}", pending["call_id"]):
            raise RuntimeError(f"the DBOS workflow did not pause on the refund: {pending!r}")
        await DBOS.send_async(
            run_id, {"verdict": "approve", "principal": self._approver}, topic=TOPIC
        )
        t2 = time.perf_counter()
        answer = await handle.get_result()
        t3 = time.perf_counter()
        if not str(answer).startswith("Refunded"):
            raise RuntimeError(f"the DBOS workflow did not finish: {answer!r}")
        return t3 - t0, {"start": t1 - t0, "decide": t2 - t1, "resume": t3 - t2}
