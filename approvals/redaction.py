"""Redacted arguments: what an approver is shown of a call, apart from what its identity binds.

An escalate rule may name arguments to redact (``redact: [args.card_number]``); the approval
block of its verdict carries them as paths relative to the arguments (``card_number``,
``payment.card_number``). The request then shows :data:`MARKER` in their place and lists them
in ``shown["redacted"]``, so the approver sees that something was withheld, and notifications
and the audit export (which never carry arguments) have nothing to leak. The content identity
is still computed over the full arguments (by the tool step, before anything is shown), so a
decision stays bound to what will run.

A redacted argument cannot be edited: an edit must leave its marker as shown, and the approved
edit runs with the original value put back (:func:`restore`), never the marker.

Why not the SDK's approval redactor (``InterceptionEmitter.set_approval_redactor``, a
declaration's ``approval.redactor``): it is one function per emitter that sees the context
but not the escalating verdict, so it cannot apply the paths a particular rule names; it
redacts the context handed to the resolver, which here never leaves the process (the request
is built from the tool step's arguments); and the §9 identity it changes is the echo, not the
identity our decisions bind. Redaction therefore happens where the request is built, from the
verdict's approval block.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Sequence
from typing import Any

from approvals.errors import EditedArgumentsInvalid

#: What an approver is shown in place of a redacted value.
MARKER = "[redacted]"
#: The key of a request's shown copy that lists the redacted arguments.
SHOWN_KEY = "redacted"
#: How a policy file spells an argument path: ``args.`` then keys.
POLICY_PREFIX = "args."

_KEY = re.compile(r"[A-Za-z0-9_-]+")
_ABSENT: Any = object()


def policy_path(text: str) -> str:
    """The argument path a policy's ``redact`` entry names (``args.payment.card`` ->
    ``payment.card``). Raises ``ValueError`` saying what is wrong with it.

    Only keys of mappings can be named: a list item has no stable name (an edit or another
    call can reorder the list), so a list is redacted whole."""
    if not text.startswith(POLICY_PREFIX):
        raise ValueError(
            f"{text!r} does not name a tool argument: write args.<key>, such as "
            "args.card_number or args.payment.card_number"
        )
    relative = text.removeprefix(POLICY_PREFIX)
    for key in relative.split("."):
        if "[" in key or "]" in key:
            raise ValueError(
                f"{text!r} names a list item: list items cannot be redacted one by one, "
                "redact the whole list"
            )
        if not _KEY.fullmatch(key):
            raise ValueError(
                f"{text!r} is not a key path such as args.card_number or "
                "args.payment.card_number (keys: letters, digits, _ and -)"
            )
    return relative


def overlap(paths: Sequence[str]) -> tuple[str, str] | None:
    """The first pair (inner, outer) of relative paths where ``inner`` lies inside ``outer``
    (``payment.card`` inside ``payment``), or ``None``."""
    for inner in paths:
        for outer in paths:
            if inner != outer and inner.startswith(outer + "."):
                return inner, outer
    return None


def _segments(path: Any) -> tuple[str, ...] | None:
    if not isinstance(path, str) or not path:
        return None
    parts = tuple(path.split("."))
    return None if any(not p for p in parts) else parts


def _get(value: Any, segments: Sequence[str]) -> Any:
    node = value
    for segment in segments:
        if not isinstance(node, dict) or segment not in node:
            return _ABSENT
        node = node[segment]
    return node


def _put(target: dict[str, Any], segments: Sequence[str], value: Any) -> None:
    node = target
    for segment in segments[:-1]:
        child = node.get(segment)
        if not isinstance(child, dict):
            child = node[segment] = {}
        node = child
    node[segments[-1]] = value


def _delete(target: dict[str, Any], segments: Sequence[str]) -> None:
    parent = _get(target, segments[:-1]) if len(segments) > 1 else target
    if isinstance(parent, dict):
        parent.pop(segments[-1], None)


def _reach(args: dict[str, Any], segments: tuple[str, ...]) -> tuple[str, ...] | None:
    """What redacting ``segments`` hides: the path itself when the arguments have it; the
    value on the way when that value is not a mapping (a string or list the path cannot go
    into may hold the secret: fail closed); ``None`` when a key on the way is absent."""
    node: Any = args
    for index, segment in enumerate(segments):
        if not isinstance(node, dict):
            return segments[:index]
        if segment not in node:
            return None
        node = node[segment]
    return segments


def redact(args: dict[str, Any], paths: Iterable[str]) -> tuple[dict[str, Any], list[str]]:
    """A copy of ``args`` with the value at each path (relative, ``payment.card``) replaced by
    :data:`MARKER`, and the paths actually redacted, in order. A path the arguments do not
    have redacts nothing; one that runs into a value that is not a mapping redacts that value.
    Raises ``ValueError`` for a path that is not dotted keys."""
    shown = copy.deepcopy(args)
    done: list[str] = []
    for path in paths:
        segments = _segments(path)
        if segments is None:
            raise ValueError(f"not an argument path: {path!r}")
        reached = _reach(shown, segments)
        if not reached:
            continue
        _put(shown, reached, MARKER)
        spelled = ".".join(reached)
        if spelled not in done:
            done.append(spelled)
    return shown, done


def withheld(args: dict[str, Any], paths: Iterable[str]) -> list[Any]:
    """The values :func:`redact` hides in ``args`` for these paths (what the markers stand
    for), in order; a path that is not dotted keys, or that ``args`` lacks, gives none."""
    values = []
    for path in paths:
        segments = _segments(path)
        reached = _reach(args, segments) if segments is not None else None
        if reached:
            values.append(_get(args, reached))
    return values


def redact_shown(shown: dict[str, Any], spec: Any) -> dict[str, Any]:
    """``shown`` (a request's shown copy) as the approver may see it under an escalation's
    ``redact`` list (the approval block's ``redact``): the arguments it names replaced by
    :data:`MARKER`, and listed under ``shown["redacted"]``.

    No list (or nothing it names in these arguments): ``shown`` itself. A list that cannot be
    read (not a list of dotted key paths: another interceptor's block) redacts every argument,
    failing closed: the approver can still approve or reject, never read what was withheld."""
    args = shown.get("args")
    if spec is None or not isinstance(args, dict):
        return shown
    if isinstance(spec, list) and all(_segments(p) is not None for p in spec):
        redacted, done = redact(args, spec)
    else:
        redacted = {name: MARKER for name in args}
        done = list(args)
    if not done:
        return shown
    return {**shown, "args": redacted, SHOWN_KEY: done}


def redacted_paths(shown: dict[str, Any]) -> list[str]:
    """The argument paths a request's shown copy lists as redacted."""
    listed = shown.get(SHOWN_KEY)
    if not isinstance(listed, list):
        return []
    return [p for p in listed if _segments(p) is not None]


def _error_path(segments: Sequence[str]) -> str:
    # The decision API reports argument errors with "/"-joined paths (as the schema check does).
    return "/".join(segments)


def edit_errors(edited: dict[str, Any], shown: dict[str, Any]) -> list[dict[str, str]]:
    """One error per redacted argument whose value in ``edited`` is not the marker it was
    shown with (changed, removed): a redacted argument cannot be edited."""
    shown_args = shown.get("args")
    errors = []
    for path in redacted_paths(shown):
        segments = path.split(".")
        if _get(edited, segments) != _get(shown_args, segments):
            errors.append(
                {
                    "path": _error_path(segments),
                    "message": "is redacted by the policy and cannot be edited",
                }
            )
    return errors


def check_edit(request_id: str, edited: dict[str, Any], shown: dict[str, Any]) -> None:
    """Refuse an edit that changes a redacted argument (``EditedArgumentsInvalid``, 422, one
    error per argument, so the edit form shows it beside the field)."""
    errors = edit_errors(edited, shown)
    if errors:
        raise EditedArgumentsInvalid(request_id, errors)


def visible_errors(errors: list[dict[str, Any]], shown: dict[str, Any]) -> list[dict[str, Any]]:
    """Schema errors without those at or under a redacted argument: its marker stands for a
    value the approver cannot see or change, which was valid and is checked again, restored,
    before the tool runs."""
    hidden = [tuple(p.split(".")) for p in redacted_paths(shown)]

    def under(error: dict[str, Any]) -> bool:
        path = error.get("path")
        parts = tuple(path.split("/")) if isinstance(path, str) and path else ()
        return any(parts[: len(h)] == h for h in hidden)

    return [e for e in errors if not under(e)]


def keep_redacted_fields(
    args: dict[str, Any], errors: list[dict[str, str]], shown: dict[str, Any]
) -> tuple[dict[str, Any], list[dict[str, str]]]:
    """For the edit form, which shows a redacted top-level argument read-only and sends no
    input for it: the arguments with that argument's marker as shown, and the form's errors
    without the one its missing input caused."""
    shown_args = shown.get("args") or {}
    names = {p for p in redacted_paths(shown) if "." not in p and p in shown_args}
    kept = {**args, **{name: shown_args[name] for name in names}}
    return kept, [e for e in errors if e.get("path") not in names]


def restore(
    edited: dict[str, Any], original: dict[str, Any], paths: Iterable[str]
) -> dict[str, Any]:
    """``edited`` with each redacted path's original value put back: what an approved edit
    runs. Whatever ``edited`` holds there (the marker, or anything a check missed) is replaced;
    a path ``original`` does not have is removed."""
    out = copy.deepcopy(edited)
    for path in paths:
        segments = _segments(path)
        if segments is None:
            continue
        value = _get(original, segments)
        if value is _ABSENT:
            _delete(out, segments)
        else:
            _put(out, segments, copy.deepcopy(value))
    return out
