"""The edit form (``POST /requests/{id}/edit``): the approver changes a request's arguments,
sees what changed, and confirms, which approves the edited call.

The form is built from the tool's JSON schema (``web.faces.pages.edit_form``); what the approver
typed stays in the form, even where it did not parse, and a redacted argument keeps the marker
it was shown with.
"""

from __future__ import annotations

import json

from fastapi import APIRouter, Request
from fastapi.responses import Response

from approvals.decision_kinds import DecisionKind, Ruling
from approvals.errors import EditedArgumentsInvalid, EditRefused, InvalidDecision
from approvals.redaction import keep_redacted_fields
from web.deps import EngineDep, SignedIn
from web.faces.pages.edit_form import diff, edit_fields, parse_edit, typed
from web.faces.pages.rendering import check_form, render, visible_request
from web.faces.pages.request_page import decide

#: The edit form (shown by ``web.faces.pages.request_page``'s page, answered here).
router = APIRouter(include_in_schema=False)


@router.post("/requests/{request_id}/edit")
async def edit(request: Request, request_id: str, session: SignedIn, engine: EngineDep) -> Response:
    form = {k: v for k, v in (await request.form()).items() if isinstance(v, str)}
    check_form(request, session, form.get("csrf"))
    found = await visible_request(engine, session.principal, request_id)
    engine.rules.check_decide(session.principal, found)
    if DecisionKind.EDIT not in found.offered_decisions:
        raise InvalidDecision(found.id, "this request cannot be edited")
    args, errors = parse_edit(found.args_schema, form)
    # A redacted argument has no input in the form: it keeps the marker it was shown with.
    args, errors = keep_redacted_fields(args, errors, found.shown)
    proposed = found.shown.get("args") or {}
    defaulted = frozenset(n for n in args if form.get(f"arg.{n}") == "")
    escaped_as_typed = frozenset(
        n
        for n in found.args_schema.get("properties") or {}
        if form.get(f"enc.{n}") == "json" and n not in args
    )
    if not errors and form.get("confirm") == "1":
        try:
            return await decide(request, session, found, Ruling.APPROVE, args=args)
        except EditedArgumentsInvalid as exc:
            errors = [{"path": e.get("path", ""), "message": e["message"]} for e in exc.errors]
        except EditRefused as exc:
            # The policy refuses these arguments: say which rule, keep the form as typed.
            errors = [{"path": "", "message": exc.detail}]
    return render(
        request,
        "edit.html",
        session,
        422 if errors else 200,
        req=found,
        # What the approver typed stays in the form, even where it did not parse.
        fields=edit_fields(
            found.args_schema, typed(found.args_schema, form, args), escaped_as_typed
        ),
        errors={e["path"]: e["message"] for e in errors},
        diff=diff(proposed, args, defaulted),
        preview=not errors,
        args_json=json.dumps(args, sort_keys=True),
    )
