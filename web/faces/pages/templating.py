"""The web app's Jinja templates and the filters its pages use (times shown relative to now,
JSON shown indented)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from fastapi.templating import Jinja2Templates

#: ``web/templates``, where the pages' templates are.
TEMPLATES_DIR = Path(__file__).resolve().parents[2] / "templates"
templates = Jinja2Templates(directory=str(TEMPLATES_DIR))


def time_left(expires_at: datetime) -> str:
    seconds = int((expires_at - datetime.now(UTC)).total_seconds())
    if seconds <= 0:
        return "expired"
    hours, rest = divmod(seconds, 3600)
    minutes = rest // 60
    return f"{hours} h {minutes} min" if hours else f"{minutes} min"


def age(created_at: datetime) -> str:
    seconds = int((datetime.now(UTC) - created_at).total_seconds())
    if seconds < 60:
        return "just now"
    if seconds < 3600:
        return f"{seconds // 60} min ago"
    if seconds < 86400:
        return f"{seconds // 3600} h ago"
    return f"{seconds // 86400} d ago"


templates.env.filters["time_left"] = time_left
templates.env.filters["age"] = age
templates.env.filters["pretty"] = lambda v: json.dumps(v, indent=2, sort_keys=True)


def compile_templates() -> int:
    """Compile every page template now (Jinja compiles each on its first render); how many."""
    names = templates.env.list_templates(extensions=["html"])
    for name in names:
        templates.env.get_template(name)
    return len(names)
