"""Where anchors of the decision log's head are kept: the anchor key, anchor files (appended
to, under a lock) and webhooks (the anchor posted, signed like the notification webhooks).

Keep both the key and the anchors out of the database owner's reach (another host, an
append-only bucket, a webhook to another team's service): whoever holds the key and the file can
rewrite the log and the anchors alike (docs/operations.md).
"""

from __future__ import annotations

import fcntl
import os
import secrets
from pathlib import Path

import httpx

from approvals import anchor as anchors
from approvals.anchor import Anchor
from approvals.errors import ConfigurationError
from approvals.notify import signature_headers
from web.settings import Settings

KEY_FILE = "audit_anchor_key"
USER_AGENT = "approvals-anchor/1"


def anchor_key(settings: Settings, *, create: bool) -> bytes:
    """``APPROVALS_AUDIT_ANCHOR_KEY``, or the one kept in the data dir (generated once when
    ``create``: anchoring may start a key, verifying never does)."""
    if settings.audit_anchor_key is not None:
        return settings.audit_anchor_key.get_secret_value().encode("utf-8")
    path = settings.data_dir / KEY_FILE
    if not path.is_file() and not create:
        raise ConfigurationError(
            f"no anchor key: set APPROVALS_AUDIT_ANCHOR_KEY or keep the key {path} that"
            " `approvals audit anchor` created"
        )
    if not path.is_file():
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        # O_EXCL: of two first anchors at once, both sign with the key written first.
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass
        else:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(secrets.token_urlsafe(48))
    return path.read_text(encoding="utf-8").strip().encode("utf-8")


def read_file(path: Path, key: bytes) -> list[Anchor]:
    """Every anchor in ``path``, each checked (``AnchorInvalid`` names the first bad line)."""
    try:
        with path.open(encoding="utf-8", newline="") as f:
            return anchors.read(f, key, source=str(path))
    except UnicodeDecodeError:
        raise ConfigurationError(f"{path} is not a UTF-8 anchor file") from None


class AnchorFile:
    """An anchor file held under an exclusive lock: its anchors, read and checked, and an
    append that links to the last of them. Two anchor runs at once append one after the other."""

    def __init__(self, path: Path, key: bytes) -> None:
        self.path = path
        self._key = key
        self._fd = -1
        self.anchors: list[Anchor] = []
        self._last_line: str | None = None

    def __enter__(self) -> AnchorFile:
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        with open(self._fd, encoding="utf-8", newline="", closefd=False) as f:
            lines = f.readlines()
        self.anchors = anchors.read(lines, self._key, source=str(self.path))
        self._last_line = lines[-1].rstrip("\n") if lines else None
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self._fd)

    def append(self, event_id: int, head: str) -> Anchor:
        previous = None if self._last_line is None else anchors.line_digest(self._last_line)
        anchor = anchors.sign(self._key, event_id=event_id, hash=head, previous=previous)
        os.write(self._fd, (anchor.line() + "\n").encode("utf-8"))
        os.fsync(self._fd)
        return anchor


async def post(url: str, anchor: Anchor, key: bytes, *, seconds: float) -> None:
    """POST the anchor as JSON, signed (``X-Approvals-Timestamp``, ``X-Approvals-Signature``)
    with the anchor key; anything but a 2xx answer is a failure."""
    body = anchor.line().encode("utf-8")
    headers = {
        "content-type": "application/json",
        "user-agent": USER_AGENT,
        **signature_headers(key, body),
    }
    try:
        async with httpx.AsyncClient(timeout=seconds) as client:
            response = await client.post(url, content=body, headers=headers)
    except httpx.HTTPError as exc:
        raise ConfigurationError(f"anchor webhook {url}: {type(exc).__name__}: {exc}") from None
    if not 200 <= response.status_code < 300:
        raise ConfigurationError(f"anchor webhook {url} answered {response.status_code}")
