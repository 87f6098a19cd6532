"""The conformance harness's approval path: a liftable deny pauses the graph, and a scripted
"human" answers it between invocations.

The graph asks an ``ApprovalSlot`` for every emission that may escalate (``GraphDeps.slots``).
A ``DeskSlot`` has no answer the first time it is consulted: it notes the question (the
``ApprovalRequest`` the emitter built) and answers ``unresolved``, so the node withdraws the
record and pauses with ``interrupt()``. The harness then plays the human: it hands the noted
request to the vector's scripted resolver and keeps what it said (or the exception it raised).
On resume the node runs again and emits the same question again, and the slot answers with the
kept resolution, or raises the kept exception.

The repeated emission is a new emission with its own sequence number (interceptors see it, and
a session's sequence never repeats), so its context identity differs from the one the human
echoed. Like the production resolver, which binds a decision to the call it was made for, the
slot carries the decision over only to the same question: the same point, the same escalating
verdict and the same context as presented (after redaction) apart from ``sequence`` and
``timestamp``, and only when the human echoed the identity of what it was shown. Then it echoes
the identity of the repeated request. Anything else is passed through as the human answered, so
the emitter's echo check denies it (``approval_identity_mismatch``).

Answers are keyed by (emission, consult index): under ``sequential/first_deny`` with
``on_approval=resume`` one emission may consult the seam several times, each time in its own
pause/resume round.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from agent_hooks import (
    ApprovalOutcome,
    ApprovalRequest,
    ApprovalResolution,
    ApprovalResolver,
)
from langgraph.types import interrupt

from approvals.ports import NewRequest

Answer = ApprovalResolution | Exception
#: What two emissions of one question may differ in: the envelope every emission gets anew.
ENVELOPE = ("sequence", "timestamp")


@dataclass(frozen=True, slots=True)
class Question:
    """What one paused emission asks: the emission's key and which consult of it."""

    emission: str
    consult: int

    def payload(self) -> dict[str, Any]:
        return {"emission": self.emission, "consult": self.consult}

    @classmethod
    def from_payload(cls, value: Any) -> Question:
        if not isinstance(value, dict):
            raise TypeError(f"an interrupt the harness did not raise: {value!r}")
        return cls(emission=str(value["emission"]), consult=int(value["consult"]))


@dataclass(frozen=True, slots=True)
class Decided:
    """What the human was shown and what it answered."""

    shown: ApprovalRequest
    answer: Answer


class ApprovalDesk:
    """The questions and answers of one harness run; ``slot`` is the graph's slot factory."""

    def __init__(self, human: ApprovalResolver | None) -> None:
        self._human = human
        self._asked: dict[Question, ApprovalRequest] = {}
        self._decided: dict[Question, Decided] = {}
        #: The questions answered in each pause of the run, in order.
        self.rounds: list[tuple[Question, ...]] = []

    def slot(self, new: NewRequest) -> DeskSlot:
        # (call id, tool) names one emission of a run: the tool call's id at the tool seam,
        # the point and the turn elsewhere (``pre_model_call:2`` / ``@pre_model_call``).
        return DeskSlot(self, f"{new.call_id}|{new.tool}")

    def decided(self, question: Question) -> Decided | None:
        return self._decided.get(question)

    def ask(self, question: Question, request: ApprovalRequest) -> None:
        self._asked[question] = request

    async def answer(self, questions: Sequence[Question]) -> None:
        """Play the human for the questions one pause of the run left open."""
        self.rounds.append(tuple(questions))
        for question in questions:
            await self._decide(question)

    async def _decide(self, question: Question) -> None:
        """Ask the scripted resolver, and keep its answer (or the exception it raised)."""
        if question in self._decided:
            return
        request = self._asked.pop(question)
        if self._human is None:
            raise RuntimeError(f"{question} paused for a human, but no resolver is configured")
        try:
            raw = self._human.resolve(request)
            answer: Answer = await raw if inspect.isawaitable(raw) else raw
        except Exception as exc:  # the resolver's failure is its answer: the seam fails closed
            answer = exc
        self._decided[question] = Decided(shown=request, answer=answer)


class DeskSlot:
    """The ``ApprovalSlot`` of one emission: asks the desk, pauses when nobody answered yet."""

    def __init__(self, desk: ApprovalDesk, emission: str) -> None:
        self._desk = desk
        self._emission = emission
        self._consults = 0
        self._waiting: Question | None = None

    @property
    def awaiting_human(self) -> bool:
        return self._waiting is not None

    @property
    def failed(self) -> bool:
        # Reading a kept answer cannot fail here; a resolver that raised is an answer.
        return False

    async def resolve(self, request: ApprovalRequest, /) -> ApprovalResolution:
        question = Question(self._emission, self._consults)
        self._consults += 1
        decided = self._desk.decided(question)
        if decided is None:
            self._desk.ask(question, request)
            self._waiting = question
            return ApprovalResolution(
                outcome=ApprovalOutcome.UNRESOLVED, context_identity=request.context_identity
            )
        answer = decided.answer
        if isinstance(answer, Exception):
            raise answer
        if answer.context_identity == decided.shown.context_identity and _same_question(
            decided.shown, request
        ):
            return dataclasses.replace(answer, context_identity=request.context_identity)
        return answer

    def suspend(self, context: dict[str, Any]) -> NoReturn:
        assert self._waiting is not None, "suspend() without an unanswered consult"
        payload = self._waiting.payload()
        # interrupt() returns the resume values of the earlier rounds of this task (one per
        # earlier pause of this emission); the first call without one pauses.
        while True:
            interrupt(payload)


def _same_question(shown: ApprovalRequest, repeated: ApprovalRequest) -> bool:
    def content(request: ApprovalRequest) -> dict[str, Any]:
        return {k: v for k, v in request.context.items() if k not in ENVELOPE}

    return (
        shown.interception_point == repeated.interception_point
        and shown.verdict == repeated.verdict
        and content(shown) == content(repeated)
    )
