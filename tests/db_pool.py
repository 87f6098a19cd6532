"""Test databases reused instead of dropped: each DROP DATABASE forces a checkpoint.

PostgreSQL's DROP DATABASE requests an immediate checkpoint and waits for it, so each test's
drop flushed every page the other xdist workers' databases had dirtied, and a test's
create-and-drop took 0.3 s to 2 s under the suite's load (its teardowns were a third of the
suite's test time). A database a test has used is instead, at its end:

1. cut off: every backend still connected (a killed worker's, a server's) is terminated,
   and the database is renamed, so that a straggler that reconnects by the old name finds
   nothing;
2. checked: its schema (relations, columns, functions, triggers, constraints, indexes,
   privileges, owners, settings, and what a superuser can make outside the user's schemas:
   casts, operators, event triggers, default privileges, publications, comments, large
   objects and the like) must be the template's, byte for byte as ``FINGERPRINT`` writes
   it; a test that changed any of it gets its database dropped as before. ``FINGERPRINT``
   costs a new backend 40 ms of the server's CPU (a tenth of an ordinary test's), so a
   database recycled before is fingerprinted only when it may have changed: when a row of
   its own catalogs was written since its last reset (``CATALOG_WRITES``), or what
   ``FINGERPRINT`` reads of the shared catalogs differs from the template's (``SHARED``);
3. emptied: every table's rows are deleted (triggers off), the template's own rows are put
   back (the alembic and LangGraph migration versions, the audit chain's head), every
   sequence starts again, and the planner is told what it is of a fresh copy (no column
   statistics, the template's row and page counts).

So the next test starts from what a fresh copy of the template holds. A database that cannot
be recycled (still in use after the rename's wait, a changed schema, relations grown more
than ``max_growth`` past the template's, any error) is dropped.

The test fixture hands a database back with ``release``: it is recycled in the background (a
tenth to a quarter of a second, half of it the schema check on a backend whose caches are
cold) while the next test runs on the other database of the pool's two. What stays: the deleted
rows' pages below that bound (until a vacuum truncates them) and the cumulative statistics
counters (pg_stat_user_tables; resetting them would hide the dead rows from autovacuum).
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql
from psycopg.types.json import Json

#: One line per object of the database that a test could change and a later test notice,
#: sorted: what must not differ from the template for a database to be reused. Objects of the
#: user's schemas, and those made by a user anywhere (an oid from ``FirstNormalObjectId``,
#: 16384, on: pg_catalog and information_schema take a superuser's objects too, and casts,
#: event triggers, default privileges, publications and the like belong to no schema).
FINGERPRINT = """
WITH ns AS (
    SELECT oid, nspname FROM pg_namespace
     WHERE nspname NOT IN ('pg_toast')
       AND nspname NOT LIKE 'pg_temp_%' AND nspname NOT LIKE 'pg_toast_temp_%'
), lines AS (
    SELECT 'ns ' || nspname || ' ' || n.nspowner::regrole || ' ' || COALESCE(n.nspacl::text, '')
           AS line
      FROM pg_namespace n WHERE n.oid IN (SELECT oid FROM ns)
    UNION ALL
    SELECT 'rel ' || ns.nspname || '.' || c.relname || ' ' || c.relkind::text || ' '
           || COALESCE(c.relacl::text, '') || ' ' || COALESCE(c.reloptions::text, '')
           || ' ' || c.relpersistence::text || ' ' || c.relrowsecurity || ' '
           || c.relforcerowsecurity || ' ' || c.relreplident::text || ' '
           || c.relowner::regrole || ' ' || c.reltablespace
      FROM pg_class c JOIN ns ON ns.oid = c.relnamespace WHERE c.oid >= 16384
    UNION ALL
    SELECT 'col ' || ns.nspname || '.' || c.relname || '.' || a.attname || ' '
           || format_type(a.atttypid, a.atttypmod) || ' ' || a.attnotnull || ' '
           || COALESCE(pg_get_expr(d.adbin, d.adrelid), '') || ' '
           || COALESCE(a.attacl::text, '') || ' ' || a.attcollation || ' '
           || a.attidentity::text || a.attgenerated::text || a.attstorage::text
           || a.attcompression::text || ' ' || a.attstattarget || ' '
           || COALESCE(array_to_string(ARRAY(
                  SELECT o FROM unnest(a.attoptions) o WHERE o NOT LIKE 'pg_attver=%'), ','), '')
      FROM pg_attribute a
      JOIN pg_class c ON c.oid = a.attrelid JOIN ns ON ns.oid = c.relnamespace
      LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
     WHERE a.attrelid >= 16384 AND a.attnum > 0 AND NOT a.attisdropped
    UNION ALL
    SELECT 'fn ' || ns.nspname || '.' || p.proname || '('
           || pg_get_function_identity_arguments(p.oid) || ') '
           || md5(pg_get_functiondef(p.oid)) || ' ' || COALESCE(p.proacl::text, '')
      FROM pg_proc p JOIN ns ON ns.oid = p.pronamespace
     WHERE p.oid >= 16384 AND p.prokind IN ('f', 'p', 'w')
    UNION ALL
    SELECT 'agg ' || ns.nspname || '.' || p.proname
      FROM pg_proc p JOIN ns ON ns.oid = p.pronamespace WHERE p.oid >= 16384 AND p.prokind = 'a'
    UNION ALL
    SELECT 'trg ' || t.tgrelid::regclass::text || ' ' || t.tgname || ' ' || t.tgenabled::text || ' '
           || md5(pg_get_triggerdef(t.oid))
      FROM pg_trigger t WHERE t.tgrelid >= 16384 AND NOT t.tgisinternal
    UNION ALL
    -- A foreign key's checks are internal triggers (off with DISABLE TRIGGER ALL), named
    -- after their own oid: told apart by their constraint instead.
    SELECT 'trgi ' || t.tgrelid::regclass::text || ' ' || co.conname || ' '
           || t.tgfoid::regproc::text || ' ' || t.tgtype || ' ' || t.tgenabled::text
      FROM pg_trigger t JOIN pg_constraint co ON co.oid = t.tgconstraint
     WHERE t.tgrelid >= 16384 AND t.tgisinternal
    UNION ALL
    SELECT 'con ' || ns.nspname || ' ' || co.conrelid::regclass::text || ' ' || co.conname || ' '
           || pg_get_constraintdef(co.oid)
      FROM pg_constraint co JOIN ns ON ns.oid = co.connamespace WHERE co.oid >= 16384
    UNION ALL
    SELECT 'idx ' || pg_get_indexdef(i.indexrelid) FROM pg_index i
      JOIN pg_class c ON c.oid = i.indexrelid JOIN ns ON ns.oid = c.relnamespace
     WHERE i.indexrelid >= 16384
    UNION ALL
    SELECT 'rule ' || r.rulename || ' ' || md5(pg_get_ruledef(r.oid)) FROM pg_rewrite r
     WHERE r.oid >= 16384
    UNION ALL
    SELECT 'policy ' || pol.polname || ' ' || pol.polrelid::regclass::text || ' '
           || pol.polcmd::text || pol.polpermissive || ' ' || pol.polroles::text || ' '
           || COALESCE(pg_get_expr(pol.polqual, pol.polrelid), '') || ' '
           || COALESCE(pg_get_expr(pol.polwithcheck, pol.polrelid), '')
      FROM pg_policy pol
    UNION ALL
    SELECT 'type ' || ns.nspname || '.' || t.typname FROM pg_type t
      JOIN ns ON ns.oid = t.typnamespace WHERE t.oid >= 16384
    UNION ALL
    SELECT 'ext ' || e.extname || ' ' || e.extversion FROM pg_extension e
    UNION ALL
    SELECT 'seq ' || s.seqrelid::regclass::text || ' ' || s.seqtypid::regtype || ' '
           || s.seqstart || ' ' || s.seqincrement || ' ' || s.seqmin || ' ' || s.seqmax || ' '
           || s.seqcache || ' ' || s.seqcycle
      FROM pg_sequence s
    UNION ALL
    SELECT 'defacl ' || d.defaclrole::regrole || ' ' || d.defaclnamespace || ' '
           || d.defaclobjtype::text || ' ' || d.defaclacl::text
      FROM pg_default_acl d
    UNION ALL
    SELECT 'pub ' || p.pubname || ' ' || p.puballtables || p.pubinsert || p.pubupdate
           || p.pubdelete || p.pubtruncate || p.pubviaroot
      FROM pg_publication p
    UNION ALL
    SELECT 'pubrel ' || r.prpubid || ' ' || r.prrelid::regclass::text FROM pg_publication_rel r
    UNION ALL
    SELECT 'pubns ' || r.pnpubid || ' ' || r.pnnspid FROM pg_publication_namespace r
    UNION ALL
    SELECT 'stx ' || x.stxrelid::regclass::text || ' ' || x.stxname || ' ' || x.stxkeys::text
           || ' ' || x.stxkind::text
      FROM pg_statistic_ext x
    UNION ALL
    SELECT 'evt ' || e.evtname || ' ' || e.evtevent || ' ' || e.evtenabled::text || ' '
           || e.evtfoid::regproc || ' ' || COALESCE(e.evttags::text, '')
      FROM pg_event_trigger e
    UNION ALL
    -- Objects of no schema, or of kinds not listed above, made by a user: that they exist.
    SELECT 'cast ' || c.castsource::regtype || ' ' || c.casttarget::regtype || ' '
           || c.castcontext::text FROM pg_cast c WHERE c.oid >= 16384
    UNION ALL
    SELECT 'op ' || o.oid::regoperator::text FROM pg_operator o WHERE o.oid >= 16384
    UNION ALL
    SELECT 'obj ' || o.kind || ' ' || o.oid FROM (
        SELECT 'collation' AS kind, oid FROM pg_collation
        UNION ALL SELECT 'opclass', oid FROM pg_opclass
        UNION ALL SELECT 'opfamily', oid FROM pg_opfamily
        UNION ALL SELECT 'conversion', oid FROM pg_conversion
        UNION ALL SELECT 'ts_config', oid FROM pg_ts_config
        UNION ALL SELECT 'ts_dict', oid FROM pg_ts_dict
        UNION ALL SELECT 'ts_parser', oid FROM pg_ts_parser
        UNION ALL SELECT 'ts_template', oid FROM pg_ts_template
        UNION ALL SELECT 'fdw', oid FROM pg_foreign_data_wrapper
        UNION ALL SELECT 'server', oid FROM pg_foreign_server
        UNION ALL SELECT 'user_mapping', oid FROM pg_user_mapping
        UNION ALL SELECT 'language', oid FROM pg_language
        UNION ALL SELECT 'am', oid FROM pg_am
        UNION ALL SELECT 'transform', oid FROM pg_transform
    ) o WHERE o.oid >= 16384
    UNION ALL
    SELECT 'comment ' || d.classoid || ' ' || d.objoid || ' ' || d.objsubid || ' '
           || md5(d.description)
      FROM pg_description d WHERE d.objoid >= 16384
    UNION ALL
    SELECT 'lo ' || count(*) FROM pg_largeobject_metadata
    UNION ALL
    SELECT 'setting ' || COALESCE(s.setrole::text, '') || ' ' || s.setconfig::text
      FROM pg_db_role_setting s WHERE s.setdatabase = (
          SELECT oid FROM pg_database WHERE datname = current_database())
    UNION ALL
    SELECT 'db ' || COALESCE(datacl::text, '') || ' ' || datallowconn || ' ' || datconnlimit
           || ' ' || datdba::regrole || ' ' || datistemplate || ' ' || dattablespace
           || ' ' || COALESCE(shobj_description(oid, 'pg_database'), '')
      FROM pg_database WHERE datname = current_database()
)
SELECT md5(string_agg(line, E'\\n' ORDER BY line)) FROM lines
"""

TABLES = """
SELECT format('%I.%I', n.nspname, c.relname) FROM pg_class c
  JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE c.relkind IN ('r', 'p')
   AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')
   AND n.nspname NOT LIKE 'pg_temp_%'
 ORDER BY 1
"""

#: What the planner is told of each relation's size (ANALYZE and VACUUM set them from a test's
#: rows, and the planner's estimates start from them): put back as the template has them.
RELATION_COUNTS = """
SELECT COALESCE(json_agg(json_build_object(
           'oid', oid, 'reltuples', reltuples, 'relpages', relpages,
           'relallvisible', relallvisible)), '[]')
  FROM pg_class WHERE oid >= 16384 AND relkind IN ('r', 'p', 'i', 'm', 't')
"""

RESTORE_RELATION_COUNTS = """
UPDATE pg_class c
   SET reltuples = t.reltuples, relpages = t.relpages, relallvisible = t.relallvisible
  FROM json_to_recordset(%s) AS t(oid oid, reltuples real, relpages int, relallvisible int)
 WHERE c.oid = t.oid
   AND (c.reltuples, c.relpages, c.relallvisible) <> (t.reltuples, t.relpages, t.relallvisible)
"""

#: The bytes of the database's own relations (tables, indexes, toast).
RELATION_BYTES = "SELECT COALESCE(sum(pg_relation_size(oid)), 0) FROM pg_class WHERE oid >= 16384"

#: Every row written to the database's own catalogs (inserted, updated or deleted: any DDL,
#: GRANT, COMMENT, large object, aborted or not) since it was made, as the cumulative
#: statistics count them. Each backend flushes its counts when it exits, so the count is
#: complete once the recycle has cut every backend off. Not counted, and not read by
#: FINGERPRINT: the column statistics ANALYZE keeps, and what VACUUM and ANALYZE write in
#: place (row and page counts, frozen transaction ids).
CATALOG_WRITES = """
SELECT COALESCE(sum(pg_stat_get_tuples_inserted(c.oid) + pg_stat_get_tuples_updated(c.oid)
                    + pg_stat_get_tuples_deleted(c.oid)), 0)
  FROM pg_class c
 WHERE c.relnamespace = 'pg_catalog'::regnamespace AND c.relkind = 'r' AND NOT c.relisshared
   AND c.relname NOT IN ('pg_statistic', 'pg_statistic_ext_data')
"""

#: What FINGERPRINT reads of the catalogs the databases share (its "db" and "setting" lines),
#: whose writes CATALOG_WRITES does not count. (A role renamed while the pool is open, which
#: changes the names FINGERPRINT writes in every database, the template's too, is not seen.)
SHARED = """
SELECT COALESCE(d.datacl::text, '') || ' ' || d.datallowconn || ' ' || d.datconnlimit
       || ' ' || d.datdba::regrole || ' ' || d.datistemplate || ' ' || d.dattablespace
       || ' ' || COALESCE(shobj_description(d.oid, 'pg_database'), '') || ' '
       || COALESCE((SELECT string_agg(COALESCE(s.setrole::text, '') || ' '
                                      || s.setconfig::text, ',' ORDER BY s.setrole)
                      FROM pg_db_role_setting s WHERE s.setdatabase = d.oid), '')
  FROM pg_database d WHERE d.datname = current_database()
"""

RESTART_SEQUENCES = """
SELECT setval(format('%I.%I', schemaname, sequencename), start_value, false)
  FROM pg_sequences WHERE schemaname NOT IN ('pg_catalog', 'information_schema')
"""


def with_database(url: str, name: str) -> str:
    """The same server URL pointed at database ``name``."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


@dataclass
class DatabasePool:
    """This process's test databases: copies of ``template`` handed out, and taken back."""

    admin_url: str
    template: str
    fingerprint: str = ""
    #: The template's ``SHARED``.
    shared: str = ""
    #: Per ready database, its ``CATALOG_WRITES`` as its last reset left them.
    catalog_writes: dict[str, int] = field(default_factory=dict)
    tables: list[str] = field(default_factory=list)
    #: The template's own rows, per table that has any.
    seeds: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    ready: list[str] = field(default_factory=list)
    #: The template's relation counts (``RELATION_COUNTS``) and bytes (``RELATION_BYTES``).
    relation_counts: list[dict[str, Any]] = field(default_factory=list)
    relation_bytes: int = 0
    #: A database whose relations hold more than this beyond the template's is dropped: the
    #: deleted rows' pages stay until a vacuum truncates them, and the planner scales its
    #: estimates by a table's pages (a plan-shape test's bulk load is 60 MB; an ordinary
    #: test's rows a few MB).
    max_growth: int = 32 << 20
    #: How many databases the pool keeps in rotation before ``take`` waits for one being
    #: recycled rather than copying the template again: one for the test, one recycling.
    rotation: int = 2
    recycled: int = 0
    dropped: int = 0
    #: How many of the recycles read FINGERPRINT (the others found no catalog written).
    fingerprinted: int = 0
    #: The databases this pool made and has not dropped (in a test, ready or recycling).
    owned: int = 0
    #: The recycles under way (``release``).
    recycling: set[asyncio.Task[None]] = field(default_factory=set)
    #: A connection to the server's maintenance database, kept for the cut-offs and renames
    #: (a connection of its own for each cost the server a backend's start every test).
    admin: psycopg.AsyncConnection[Any] | None = field(default=None, repr=False)

    async def open(self) -> None:
        """Read what a database must look like to be reused: the template's."""
        url = with_database(self.admin_url, self.template)
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            self.fingerprint = await _one(conn, FINGERPRINT)
            self.shared = await _one(conn, SHARED)
            self.tables = [r[0] for r in await (await conn.execute(TABLES)).fetchall()]
            self.relation_counts = await _one(conn, RELATION_COUNTS)
            self.relation_bytes = int(await _one(conn, RELATION_BYTES))
            for table in self.tables:
                rows = await (
                    await conn.execute(
                        sql.SQL("SELECT COALESCE(json_agg(t), '[]') FROM {} t").format(
                            sql.SQL(table)
                        )
                    )
                ).fetchone()
                if rows and rows[0]:
                    self.seeds[table] = rows[0]

    async def take(self) -> str:
        """A database as fresh as a copy of the template: a recycled one if one is ready (or
        soon will be, when the pool has its ``rotation``'s worth), a new copy otherwise."""
        if not self.ready and self.recycling and self.owned >= self.rotation:
            await asyncio.wait(set(self.recycling), return_when=asyncio.FIRST_COMPLETED)
        if self.ready:
            return self.ready.pop()
        name = _fresh_name()
        await admin_statement(self.admin_url, f"CREATE DATABASE {name} TEMPLATE {self.template}")
        self.owned += 1
        return name

    def release(self, name: str) -> None:
        """``give_back`` in the background, on the running loop: the next test need not wait
        for it (``take`` waits only when it has no other database to hand out)."""
        task = asyncio.get_running_loop().create_task(self._recycle(name))
        self.recycling.add(task)
        task.add_done_callback(self.recycling.discard)

    async def _recycle(self, name: str) -> None:
        try:
            await self.give_back(name)
        except Exception:
            # Not even dropped (the server went away?): the database is left behind, and the
            # pool makes another.
            self.owned -= 1

    async def give_back(self, name: str) -> None:
        """Recycle ``name`` for the next test, or drop it when it cannot be (see the module)."""
        renamed = _fresh_name()
        try:
            await self._admin_execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = %s AND pid <> pg_backend_pid()",
                (name,),
            )
            # Waits (up to 5 s) for the terminated backends to go; fails if one stays.
            await self._admin_execute(f"ALTER DATABASE {name} RENAME TO {renamed}")
            writes = self.catalog_writes.pop(name, None)
            name = renamed
            after = await self._reset(with_database(self.admin_url, renamed), writes)
            if after is not None:
                self.catalog_writes[renamed] = after
                self.ready.append(renamed)
                self.recycled += 1
                return
        except psycopg.Error:
            pass
        self.dropped += 1
        await admin_statement(self.admin_url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        self.owned -= 1

    async def _admin_execute(self, statement: str, params: tuple[Any, ...] = ()) -> None:
        if self.admin is None or self.admin.closed:
            self.admin = await psycopg.AsyncConnection.connect(self.admin_url, autocommit=True)
        try:
            await self.admin.execute(statement, params or None)
        except psycopg.OperationalError:
            # Whatever state it is in, the next statement gets a new one.
            await self.admin.close()
            self.admin = None
            raise

    async def _reset(self, url: str, writes: int | None) -> int | None:
        """Empty the database at ``url`` as a fresh copy is; None when it cannot be reused.
        ``writes``: its ``CATALOG_WRITES`` after its last reset (None: a new copy). Returns
        them after this reset."""
        async with await psycopg.AsyncConnection.connect(url) as conn:
            unchanged = (
                writes is not None
                and int(await _one(conn, CATALOG_WRITES)) == writes
                and await _one(conn, SHARED) == self.shared
            )
            if not unchanged:
                self.fingerprinted += 1
                if await _one(conn, FINGERPRINT) != self.fingerprint:
                    return None
            if int(await _one(conn, RELATION_BYTES)) > self.relation_bytes + self.max_growth:
                return None
            # DELETE, not TRUNCATE: a truncate makes new files for every table and index
            # (80 ms a reset against 6 ms); the tables are small. Triggers (the log's
            # append-only guard, the foreign keys') do not fire for the replica role.
            await conn.execute("SET LOCAL session_replication_role = replica")
            await conn.execute(
                sql.SQL("; ").join(
                    sql.SQL("DELETE FROM {}").format(sql.SQL(table)) for table in self.tables
                )
            )
            for table, rows in self.seeds.items():
                await conn.execute(
                    sql.SQL(
                        "INSERT INTO {t} SELECT * FROM json_populate_recordset(NULL::{t}, %s)"
                    ).format(t=sql.SQL(table)),
                    (Json(rows),),
                )
            await conn.execute(RESTART_SEQUENCES)
            # What ANALYZE learnt of the test's rows, and the counts VACUUM and ANALYZE set:
            # a fresh copy has the template's (a superuser may write these catalogs).
            await conn.execute("DELETE FROM pg_statistic WHERE starelid >= 16384")
            await conn.execute(RESTORE_RELATION_COUNTS, (Json(self.relation_counts),))
            # The reset's own catalog writes (the counts put back) are counted too: flushed
            # at its commit, so that the count read next includes them.
            await conn.execute("SELECT pg_stat_force_next_flush()")
            await conn.commit()
            return int(await _one(conn, CATALOG_WRITES))

    async def close(self, *, drop_template: bool = False) -> None:
        """Drop what the pool holds (and the template, if asked), once the recycles under way
        are done. The drops run at once: each waits for a checkpoint, and drops that wait
        together share one (at the end of a run, when every worker drops its own)."""
        if self.recycling:
            await asyncio.gather(*self.recycling, return_exceptions=True)
        doomed = [*self.ready, *([self.template] if drop_template else [])]
        await asyncio.gather(
            *(
                admin_statement(self.admin_url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
                for name in doomed
            )
        )
        self.owned -= len(self.ready)
        self.ready.clear()
        if self.admin is not None:
            await self.admin.close()
            self.admin = None


def _fresh_name() -> str:
    return f"approvals_test_{uuid.uuid4().hex[:12]}"


async def _one(conn: psycopg.AsyncConnection[Any], query: str) -> Any:
    row = await (await conn.execute(query)).fetchone()
    return row[0] if row else None


async def admin_statement(admin_url: str, statement: str) -> None:
    async with await psycopg.AsyncConnection.connect(admin_url, autocommit=True) as conn:
        await conn.execute(statement)
