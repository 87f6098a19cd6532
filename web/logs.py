"""Logging for the long-running commands (``serve``, ``worker``).

``APPROVALS_LOG_FORMAT=json`` writes one JSON object per line: ``time`` (UTC, ISO 8601),
``level``, ``logger``, ``message``, then whatever the code passed as ``extra=`` (``run_id``,
``request_id``, ...) and ``exception`` with the traceback. The default is one readable line per
record. Either way records go to stderr, so JSON printed on stdout stays parseable.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

from web.settings import Settings

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

#: The attributes every LogRecord has: anything else on a record came from ``extra=``.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "taskName",
}


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_") and key not in entry:
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        # default=str: an extra that JSON cannot hold is logged as its text, never dropped.
        return json.dumps(entry, default=str, ensure_ascii=False)


def configure_logging(settings: Settings) -> None:
    """Send every record (the engine's, uvicorn's, libraries') through one stderr handler in
    the configured format, replacing whatever handlers the root logger had."""
    handler = logging.StreamHandler(sys.stderr)
    if settings.log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(settings.log_level)
