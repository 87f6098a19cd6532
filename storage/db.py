"""The connection pool and the one place where psycopg errors become engine errors."""

from __future__ import annotations

import json as stdlib_json
import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import orjson
import psycopg
from psycopg.adapt import AdaptersMap
from psycopg.rows import DictRow, dict_row
from psycopg.types.json import (
    Jsonb,
    JsonbBinaryLoader,
    JsonbLoader,
    set_json_dumps,
    set_json_loads,
)
from psycopg_pool import AsyncConnectionPool

from approvals.errors import DatabaseUnavailable, StoredValueUnreadable
from approvals.identity import Unreadable
from storage.queries import QUERIES

log = logging.getLogger("approvals.storage")

Row = dict[str, Any]
Connection = psycopg.AsyncConnection[DictRow]


@contextmanager
def translated_errors() -> Iterator[None]:
    """Turn connection-level psycopg failures into ``DatabaseUnavailable``."""
    try:
        yield
    except psycopg.OperationalError as exc:
        raise DatabaseUnavailable(str(exc).strip().splitlines()[0] if str(exc) else "") from exc
    except (
        psycopg.errors.UndefinedTable,
        psycopg.errors.UndefinedColumn,
        psycopg.errors.UndefinedFunction,
    ) as exc:
        raise DatabaseUnavailable(
            "the database schema is missing or out of date; run `approvals db upgrade`"
            f" ({str(exc).splitlines()[0]})"
        ) from exc


def is_transient(exc: BaseException) -> bool:
    """Whether a failure is the database being unreachable (worth retrying), whoever raised it
    (the engine's repositories or LangGraph's saver)."""
    return isinstance(exc, psycopg.OperationalError | DatabaseUnavailable)


def json(value: Any) -> Jsonb:
    """Wrap a value for a jsonb parameter."""
    return Jsonb(value)


#: Every byte to b"0", digits to b"1": text with 19 digits in a row (an integer orjson would
#: read as a float, as it keeps 64 bits, or a long fraction) has _LONG_RUN once translated, and
#: is left to the standard library, which reads it as it always did. A translation and a find
#: are ~1 us on a 400-byte value; the regular expression [0-9]{19} took 6 us, more than
#: json.loads itself.
_DIGITS = bytes(0x31 if 0x30 <= i <= 0x39 else 0x30 for i in range(256))
_LONG_RUN = b"1" * 19


def _decoded(data: str | bytes) -> Any:
    """orjson's reading of ``data``, or ``json.loads``'s where orjson would read it
    differently (integers beyond 64 bits, which it turns into floats) or refuses it (a lone
    surrogate, an infinity, nesting past its 255 levels); ``_Unreadable`` past what
    ``json.loads`` can read: nesting that exhausts its recursion, or an integer of more digits
    than Python converts (4,300: jsonb keeps up to 131,072)."""
    raw = data.encode() if isinstance(data, str) else data
    if _LONG_RUN not in raw.translate(_DIGITS):
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
    try:
        return stdlib_json.loads(data)
    except (RecursionError, ValueError) as exc:
        # A json/jsonb column holds valid JSON: a ValueError is a number Python will not read.
        raise _Unreadable from exc


class _Unreadable(Exception):
    """A stored JSON value ``json.loads`` cannot read back (``_decoded``)."""


def json_loads(data: str | bytes) -> Any:
    """A json/jsonb column's value, read by orjson (several times faster than ``json.loads``;
    an inbox page reads three jsonb values a row), to the same Python value (``_decoded``).
    ``StoredValueUnreadable`` where it is nested too deep to read back (a ``RecursionError``
    failed every list holding the row, with nothing to say which value or why)."""
    try:
        return _decoded(data)
    except _Unreadable:
        size = len(data.encode() if isinstance(data, str) else data)
        log.warning("read a JSON value of %d bytes that cannot be decoded", size)
        raise StoredValueUnreadable(size) from None


def json_loads_or_unreadable(data: str | bytes) -> Any:
    """``json_loads``, but an ``Unreadable`` in place of a value it cannot read: for the
    readers of rows that have their own answer to a value changed behind the engine's back
    (an approval request's, which counts as tampered), where one row must not fail them all."""
    try:
        return _decoded(data)
    except _Unreadable:
        # Not logged: the reader has its own record of it (a request's is ``request.tampered``,
        # once), where a warning would come with every listing that reads the row.
        return Unreadable()


#: Fewer opening brackets than this in a JSON text and it is not nested deeply enough to be
#: unreadable (orjson alone reads 255 levels; ``json.loads`` a thousand, less the stack in use).
_SURELY_READABLE = 128


def json_text_unreadable(text: str) -> bool:
    """Whether ``json_loads`` would refuse ``text`` as unreadable. Only a text with many
    brackets, or with a run of digits that ``_decoded`` leaves to ``json.loads`` (whose
    integers stop at 4,300 digits), is decoded to tell: the decision log's verifier asks it of
    every event, and counting a 220-byte event's brackets took 1.5 us against 17 us for its
    hash (decoding a text with 200 brackets, 87 us)."""
    nested = text.count("[") + text.count("{") >= _SURELY_READABLE
    if not nested and _LONG_RUN not in text.encode().translate(_DIGITS):
        return False
    return isinstance(json_loads_or_unreadable(text), Unreadable)


#: jsonb's type oid (fixed by PostgreSQL), so a cursor registers its loaders without a lookup.
JSONB_OID = psycopg.adapters.types["jsonb"].oid


class _MarkingJsonbLoader(JsonbLoader):
    _loads = staticmethod(json_loads_or_unreadable)


class _MarkingJsonbBinaryLoader(JsonbBinaryLoader):
    _loads = staticmethod(json_loads_or_unreadable)


def read_unreadable_json_as_marker(
    cursor: psycopg.AsyncCursor[DictRow] | psycopg.AsyncServerCursor[DictRow],
) -> None:
    """Make ``cursor`` read jsonb values it cannot decode as ``Unreadable`` (its own adapters:
    the connection, back in the pool, reads them as before). The loaders are made once: a
    cursor and its two registrations take about 2.7 us more than a plain cursor, where
    ``set_json_loads`` on the cursor took 7.5 (it looks up and registers four)."""
    cursor.adapters.register_loader(JSONB_OID, _MarkingJsonbLoader)
    cursor.adapters.register_loader(JSONB_OID, _MarkingJsonbBinaryLoader)


#: What orjson must not write its own way: a dataclass, a datetime, a subclass of str, int,
#: dict or list (a JsonContext) is refused, so ``json_dumps`` leaves it to ``json.dumps``,
#: which writes it, or refuses it, as it always did. (An Enum member orjson writes as its
#: value: only an IntEnum or a StrEnum reads back equal, and ``json.dumps`` writes those so.)
_DUMPS_STRICT = (
    orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_SUBCLASS
)


def json_dumps(value: Any) -> bytes | str:
    """A json/jsonb parameter's text: orjson's (several times faster than ``json.dumps``, psycopg's
    default) when it reads back equal to ``value``, else ``json.dumps``'s. Reading back equal
    (``==``) means plain JSON data: what orjson would write differently or that ``json.dumps``
    refuses (NaN and the infinities, which orjson writes as null; a tuple; a plain Enum or a
    UUID, written as their value) does not, nor does what orjson refuses (an integer beyond 64
    bits, a non-string key, a lone surrogate), so all of it gets ``json.dumps``'s text, its
    error, or the server's refusal, as before. Both texts of plain data are the same JSON
    value, which is what a jsonb column keeps (no column of the engine is ``json``)."""
    try:
        data = orjson.dumps(value, option=_DUMPS_STRICT)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return stdlib_json.dumps(value)
    if orjson.loads(data) != value:
        return stdlib_json.dumps(value)
    return data


#: The pool's adapters: psycopg's, with json and jsonb read by ``json_loads`` and written by
#: ``json_dumps`` (the engine's parameters and LangGraph's checkpoint metadata alike).
ADAPTERS = AdaptersMap(psycopg.adapters)
set_json_loads(json_loads, ADAPTERS)
set_json_dumps(json_dumps, ADAPTERS)


def sql(name: str) -> str:
    """A named statement of ``sql/*.sql`` (``storage.queries``)."""
    return QUERIES[name]


def open_pool(
    url: str, *, min_size: int = 1, max_size: int = 20
) -> AsyncConnectionPool[Connection]:
    """A pool configured the way LangGraph's saver needs: autocommit, dict rows, statements
    prepared. The caller opens it (``await pool.open(wait=True)``) and closes it."""
    return AsyncConnectionPool(
        url,
        min_size=min_size,
        max_size=max_size,
        # LangGraph's saver needs autocommit; prepare_threshold=0 prepares every statement on
        # first use, which saves re-planning the engine's multi-part statements.
        kwargs={
            "autocommit": True,
            "prepare_threshold": 0,
            "row_factory": dict_row,
            "context": ADAPTERS,
        },
        connection_class=psycopg.AsyncConnection[DictRow],
        open=False,
        name="approvals",
    )


async def check_connection(url: str, connect_seconds: int = 10) -> None:
    """Connect once, so that a wrong URL fails at once with the server's own reason instead of
    a pool retrying in the background."""
    with translated_errors():
        conn = await psycopg.AsyncConnection.connect(url, connect_timeout=connect_seconds)
        await conn.close()


@asynccontextmanager
async def open_database(url: str, *, max_size: int = 20) -> AsyncIterator[Database]:
    """The database at ``url`` on a pool of its own (``open_pool``), open for the block: what
    the engine and ``LocalApprovals`` run on. Raises ``DatabaseUnavailable`` at once when the
    server cannot be reached (``check_connection``)."""
    await check_connection(url)
    pool = open_pool(url, max_size=max_size)
    with translated_errors():
        await pool.open(wait=True, timeout=15)
    try:
        yield Database(pool)
    finally:
        await pool.close()


class Database:
    """Runs named statements on the pool."""

    def __init__(self, pool: AsyncConnectionPool[Connection]) -> None:
        self.pool = pool

    @asynccontextmanager
    async def connection(self, conn: Connection | None = None) -> AsyncIterator[Connection]:
        """The connection a repository works on, for the block: ``conn`` (an outer
        transaction's) when given, else one from the pool; either way connection-level psycopg
        failures become ``DatabaseUnavailable`` (``translated_errors``). The one way a
        repository gets a connection (as langgraph's ``get_connection``)."""
        with translated_errors():
            if conn is not None:
                yield conn
                return
            async with self.pool.connection() as pooled:
                yield pooled

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Connection]:
        """A transaction on a pooled connection.

        Not in pipeline mode: psycopg's pipeline flushes and syncs at each result awaited and
        again around COMMIT, so a transaction whose statements are each awaited (as every
        caller's are) took more round trips pipelined than plain (one statement: 5 reads from
        the socket against 3, 0.78 against 0.46 ms, 0.40 against 0.26 ms of CPU)."""
        async with self.connection() as conn, conn.transaction():
            yield conn

    async def one(
        self,
        name: str,
        params: dict[str, Any],
        conn: Connection | None = None,
        *,
        unreadable_json: bool = False,
    ) -> Row | None:
        """The named statement's first row, if any, on ``conn`` or a pooled connection
        (``connection``). ``unreadable_json``: a jsonb value that cannot be decoded comes as
        ``Unreadable`` (for readers with their own answer to one, ``storage.requests``), not
        as ``StoredValueUnreadable``."""
        async with self.connection(conn) as c:
            return await (await _execute(c, name, params, unreadable_json)).fetchone()

    async def all(
        self,
        name: str,
        params: dict[str, Any],
        conn: Connection | None = None,
        *,
        unreadable_json: bool = False,
    ) -> list[Row]:
        """The named statement's rows (``conn``, ``unreadable_json``: as ``one`` says)."""
        async with self.connection(conn) as c:
            return await (await _execute(c, name, params, unreadable_json)).fetchall()

    async def run(self, name: str, params: dict[str, Any], conn: Connection | None = None) -> None:
        """Run the named statement, its rows (if any) unread (``conn``: as ``one`` says)."""
        async with self.connection(conn) as c:
            await c.execute(sql(name), params)


async def _execute(
    conn: Connection, name: str, params: dict[str, Any], unreadable_json: bool
) -> psycopg.AsyncCursor[DictRow]:
    if not unreadable_json:
        return await conn.execute(sql(name), params)
    cursor = conn.cursor()
    read_unreadable_json_as_marker(cursor)
    return await cursor.execute(sql(name), params)
