"""What the Slack app shows, in Block Kit: a waiting call's message and its buttons
(``waiting_message``), the same message once decided (``settled_message``), and the modal
that asks for a rejection's reason or an answer (``text_modal``).

The tool, the reason and the shown arguments are untrusted text: the arguments go in
``plain_text`` (never interpreted), the rest is escaped for mrkdwn, so none of it can make a
link or a mention. The arguments are the request's shown copy, redactions applied, as the
request's page shows them.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from approvals.decision_kinds import KIND_RULES, DecisionKind
from approvals.model import DecisionRecord, PendingCall
from approvals.states import RequestStatus

#: A button's ``action_id`` names its decision: ``approvals.approve``, ``approvals.reject``,
#: ``approvals.respond``; its ``value`` is the request's id.
ACTION_PREFIX = "approvals."
#: The block of the buttons; the modal's text input.
ACTIONS_BLOCK = "approvals.decide"
TEXT_BLOCK = "approvals.text"
TEXT_ACTION = "text"
#: A section's text is at most 3,000 characters; the arguments get what is left of that.
MAX_ARGS = 2800
LABELS = {
    DecisionKind.APPROVE: "Approve",
    DecisionKind.REJECT: "Reject",
    DecisionKind.RESPOND: "Respond",
}
PAST = {
    DecisionKind.APPROVE: "Approved",
    DecisionKind.REJECT: "Rejected",
    DecisionKind.RESPOND: "Answered",
    DecisionKind.EDIT: "Approved with edits",
}


def escape(text: str) -> str:
    """``text`` shown, never interpreted, in mrkdwn (``&``, ``<`` and ``>`` make links and
    mentions)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def when(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def action_id(kind: DecisionKind) -> str:
    return f"{ACTION_PREFIX}{kind.value}"


def slack_kinds(request: PendingCall) -> list[DecisionKind]:
    """The decisions the request offers that a button may make."""
    return [r.kind for r in request.offered_rules if r.in_slack]


def _arguments(request: PendingCall) -> str:
    text = json.dumps(request.shown, indent=2, sort_keys=True, ensure_ascii=False, default=str)
    return text if len(text) <= MAX_ARGS else text[: MAX_ARGS - 1] + "…"


def _facts(request: PendingCall, headline: str) -> list[dict[str, Any]]:
    groups = ", ".join(request.approvers) or "the default approvers"
    return [
        {"type": "section", "text": {"type": "mrkdwn", "text": escape(headline)}},
        {
            "type": "section",
            "fields": [
                {"type": "mrkdwn", "text": f"*Tool*\n{escape(request.tool)}"},
                {"type": "mrkdwn", "text": f"*Decide by*\n{when(request.expires_at)}"},
                {"type": "mrkdwn", "text": f"*Reason*\n{escape(request.reason or 'not given')}"},
                {"type": "mrkdwn", "text": f"*Approvers*\n{escape(groups)}"},
            ],
        },
        {"type": "section", "text": {"type": "plain_text", "text": _arguments(request)}},
    ]


def _buttons(request: PendingCall, link: str) -> dict[str, Any]:
    elements: list[dict[str, Any]] = []
    for kind in slack_kinds(request):
        button: dict[str, Any] = {
            "type": "button",
            "action_id": action_id(kind),
            "text": {"type": "plain_text", "text": LABELS.get(kind, kind.value.capitalize())},
            "value": request.id,
        }
        if kind is DecisionKind.APPROVE:
            button["style"] = "primary"
        elif kind is DecisionKind.REJECT:
            button["style"] = "danger"
        elements.append(button)
    offered = {r.kind for r in request.offered_rules}
    # No arguments can be typed in Slack: an edit is the request page's form.
    label = "Edit on the web" if DecisionKind.EDIT in offered else "Open the request"
    elements.append(
        {
            "type": "button",
            "action_id": f"{ACTION_PREFIX}open",
            "text": {"type": "plain_text", "text": label},
            "url": link,
        }
    )
    return {"type": "actions", "block_id": ACTIONS_BLOCK, "elements": elements}


def waiting_message(request: PendingCall, link: str) -> tuple[str, list[dict[str, Any]]]:
    """A waiting call's message: its fallback text and its blocks, with a button per decision
    it offers in Slack and one to its page."""
    if request.escalation_level:
        headline = f"Escalated (level {request.escalation_level}): {request.tool} needs approval"
    else:
        headline = f"Waiting: {request.tool} needs approval"
    return headline, [*_facts(request, f"*{headline}*"), _buttons(request, link)]


def settled_message(
    request: PendingCall, link: str, line: str, *, still_waiting: bool
) -> tuple[str, list[dict[str, Any]]]:
    """The message with ``line`` (who decided what, when) under its facts; its buttons stay
    while the request still waits (a quorum's vote), else only the link to its page does."""
    text, blocks = waiting_message(request, link)
    if not still_waiting:
        blocks = blocks[:-1]
        blocks.append(
            {
                "type": "actions",
                "block_id": ACTIONS_BLOCK,
                "elements": [
                    {
                        "type": "button",
                        "action_id": f"{ACTION_PREFIX}open",
                        "text": {"type": "plain_text", "text": "Open the request"},
                        "url": link,
                    }
                ],
            }
        )
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": line}]})
    return f"{text}: {line}", blocks


def ending_line(request: PendingCall, decision: DecisionRecord | None, who: str) -> str:
    """The line of a request that no longer waits: who decided what, and when (``who``: the
    decider as ``decider`` names them), or how else it ended, whichever route ended it."""
    at = decision.decided_at if decision is not None else request.decided_at
    stamp = f" at {when(at)}" if at is not None else ""
    if request.status is RequestStatus.EXPIRED:
        return f"Expired{stamp}: nobody decided it in time"
    if request.status is RequestStatus.CANCELLED:
        return f"Cancelled{stamp}: its run was cancelled"
    if request.status is RequestStatus.SUPERSEDED:
        return f"Superseded{stamp}: the call changed, and a new request replaces this one"
    if decision is None:
        return f"No longer waiting: {request.status.value}"
    line = f"{PAST.get(decision.kind, 'Decided')} by {who}{stamp}"
    if decision.reason and decision.kind is not DecisionKind.APPROVE:
        line += f": {escape(decision.reason[:500])}"
    return line


def escalated_line(request: PendingCall) -> str:
    """The line of a message whose approvers the request was escalated past."""
    groups = ", ".join(request.approvers) or "the default approvers"
    return (
        f"Escalated to {escape(groups)} (level {request.escalation_level}):"
        " these buttons no longer decide it"
    )


def text_modal(
    kind: DecisionKind, request: PendingCall, metadata: str, *, required: bool
) -> dict[str, Any]:
    """The modal a reject or respond button opens: the reason, or the answer the model gets
    in the tool's place. ``metadata``: what its submission needs to decide and update the
    message (``private_metadata``)."""
    takes_message = KIND_RULES[kind].takes_message
    label = "Your answer (the model receives it)" if takes_message else "Reason"
    return {
        "type": "modal",
        "callback_id": action_id(kind),
        "private_metadata": metadata,
        "title": {"type": "plain_text", "text": LABELS.get(kind, "Decide")},
        "submit": {"type": "plain_text", "text": LABELS.get(kind, "Decide")},
        "close": {"type": "plain_text", "text": "Cancel"},
        "blocks": [
            {
                "type": "section",
                "text": {"type": "mrkdwn", "text": f"*{escape(request.tool)}*"},
            },
            {
                "type": "input",
                "block_id": TEXT_BLOCK,
                "optional": not (required or takes_message),
                "label": {"type": "plain_text", "text": label},
                "element": {
                    "type": "plain_text_input",
                    "action_id": TEXT_ACTION,
                    "multiline": True,
                    "max_length": 2000,
                },
            },
        ],
    }
