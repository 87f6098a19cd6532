"""SQL functions and triggers get versioned names; settlement, the thread lock key and the
finished statuses each live in one function.

Versioned names: every function and trigger of the engine is now ``..._v1``. A later change
to one of them creates ``..._v2`` next to it (and moves its callers), so a statement, a
trigger or a grant never calls a body that changed under it, and the name says which
definition ran. Renames keep each function's owner, rights and SECURITY DEFINER setting;
bodies that call another function by name are restated with the new name.

- ``approvals_thread_lock_key_v1(thread_id)``: the advisory-lock key of a thread. Every lock
  and unlock of a thread (a run's step, a worker's claim, a cancel, a prune) goes through it;
  the key used to be written out (``hashtextextended(thread_id, 7277)``) in seven statements.
- ``approvals_run_finished_v1(status)``: whether a run's status is final (completed, blocked,
  failed, cancelled), instead of three copies of the list.
- ``approvals_settle_step_v1``: the only place a run is settled (it absorbs
  ``approvals_settle_run``). Its rules: a step's interception records are always stored; the
  run's status, error and answer and the interrupt ids its requests wait on are written, with
  a ``run.<status>`` audit event, unless the run was cancelled: a cancelled run is final, the
  write is refused, a ``run.settle_refused`` audit event says what was refused, and the
  function returns ``refused`` so the writer knows (``settled`` otherwise; ``recorded`` when
  no status was given). Before, a trigger dropped the write silently and the audit log still
  said ``run.completed``.
- ``runs_cancelled_is_final_v1``: any other write that would change a cancelled run's status
  now fails loudly (``check_violation``) instead of being dropped without a word.

The demo's ``demo_side_effects`` table is no longer created by the engine's migrations: the
examples own it (``graphs/examples/schema.sql``); a database that has it keeps it.

Revision ID: 0017
Revises: 0016
"""

from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

# Renamed as they are: no body names another of the engine's functions.
RENAMED_FUNCTIONS = [
    "approvals_audit_canonical(audit_events)",
    "approvals_audit_refuse()",
    "approvals_end_account_sessions()",
    "approvals_person_of(text)",
    "approvals_run_status_event()",
    "approvals_run_resuming_event()",
    # Renamed, then restated below with the new names they call.
    "approvals_audit_hash(text, audit_events)",
    "approvals_audit_chain()",
    "approvals_request_person()",
    "approvals_grant_runtime(name)",
]

# The runtime role's grant (migration 0013), unchanged but for its exclusion of itself, which
# now matches every version of its name.
GRANT_RUNTIME = """
        CREATE OR REPLACE FUNCTION approvals_grant_runtime_v1(p_role name)
        RETURNS TABLE (object text, privileges text)
        LANGUAGE plpgsql AS $fn$
        DECLARE
            who pg_roles;
            schema_name name := current_schema();
            rel record;
            fn record;
            privs text;
        BEGIN
            SELECT * INTO who FROM pg_roles WHERE rolname = p_role;
            IF NOT FOUND THEN
                RAISE EXCEPTION 'role % does not exist; create it first (CREATE ROLE % LOGIN)',
                    quote_ident(p_role), quote_ident(p_role)
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
            IF who.rolsuper OR who.rolcreaterole OR who.rolbypassrls THEN
                RAISE EXCEPTION 'role % is a superuser or may create roles or bypass row'
                    ' security: it could take any privilege; use a plain LOGIN role',
                    quote_ident(p_role)
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
            -- An owner (or a member of one) can ALTER, DISABLE TRIGGER or DROP; the schema's
            -- owner can drop and recreate any table in it.
            FOR rel IN
                SELECT 'table ' || quote_ident(c.relname) AS what, c.relowner AS owner
                  FROM pg_class c
                 WHERE c.relnamespace = schema_name::regnamespace
                   AND c.relkind IN ('r', 'p', 'S', 'v', 'm')
                UNION ALL
                SELECT 'function ' || p.oid::regprocedure::text, p.proowner
                  FROM pg_proc p
                 WHERE p.pronamespace = schema_name::regnamespace
                   AND p.proname LIKE 'approvals\\_%'
                UNION ALL
                SELECT 'schema ' || quote_ident(n.nspname), n.nspowner
                  FROM pg_namespace n WHERE n.nspname = schema_name
            LOOP
                IF pg_has_role(p_role, rel.owner, 'MEMBER') THEN
                    RAISE EXCEPTION 'role % is, or is a member of, %, the owner of %: it could'
                        ' alter or disable what it is given; use a role that owns nothing',
                        quote_ident(p_role), pg_get_userbyid(rel.owner), rel.what
                        USING ERRCODE = 'invalid_parameter_value';
                END IF;
            END LOOP;

            -- From nothing, so a second run after an upgrade leaves exactly this set.
            EXECUTE format('REVOKE ALL ON ALL TABLES IN SCHEMA %I FROM %I', schema_name, p_role);
            EXECUTE format('REVOKE ALL ON ALL SEQUENCES IN SCHEMA %I FROM %I',
                           schema_name, p_role);
            EXECUTE format('GRANT CONNECT ON DATABASE %I TO %I', current_database(), p_role);
            EXECUTE format('GRANT USAGE ON SCHEMA %I TO %I', schema_name, p_role);
            object := 'schema ' || quote_ident(schema_name);
            privileges := 'USAGE';
            RETURN NEXT;

            FOR rel IN
                SELECT c.relname, c.relkind FROM pg_class c
                 WHERE c.relnamespace = schema_name::regnamespace
                   AND c.relkind IN ('r', 'p', 'S')
                 ORDER BY c.relkind, c.relname
            LOOP
                IF rel.relkind = 'S' THEN
                    privs := 'USAGE';
                    EXECUTE format('GRANT USAGE ON SEQUENCE %I.%I TO %I',
                                   schema_name, rel.relname, p_role);
                    object := 'sequence ' || quote_ident(rel.relname);
                ELSE
                    privs := CASE rel.relname
                        -- The decision log is append-only; its head moves only through the
                        -- owner's trigger (approvals_audit_chain_v1 is SECURITY DEFINER).
                        WHEN 'audit_events' THEN 'SELECT, INSERT'
                        WHEN 'audit_chain_head' THEN 'SELECT'
                        -- Schema versions: read by readiness, written only by migrations.
                        WHEN 'alembic_version' THEN 'SELECT'
                        WHEN 'checkpoint_migrations' THEN 'SELECT'
                        ELSE 'SELECT, INSERT, UPDATE, DELETE'
                    END;
                    EXECUTE format('GRANT %s ON TABLE %I.%I TO %I',
                                   privs, schema_name, rel.relname, p_role);
                    object := 'table ' || quote_ident(rel.relname);
                END IF;
                privileges := privs;
                RETURN NEXT;
            END LOOP;

            FOR fn IN
                SELECT p.oid::regprocedure AS sig FROM pg_proc p
                 WHERE p.pronamespace = schema_name::regnamespace
                   AND p.proname LIKE 'approvals\\_%'
                   AND p.prorettype <> 'trigger'::regtype
                   AND p.proname NOT LIKE 'approvals\\_grant\\_runtime%'
                 ORDER BY 1
            LOOP
                EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', fn.sig, p_role);
                object := 'function ' || fn.sig::text;
                privileges := 'EXECUTE';
                RETURN NEXT;
            END LOOP;

            -- What the role holds through PUBLIC or another role counts too.
            IF has_table_privilege(p_role, 'audit_events', 'UPDATE, DELETE, TRUNCATE, TRIGGER')
               OR has_table_privilege(p_role, 'audit_chain_head',
                                      'INSERT, UPDATE, DELETE, TRUNCATE, TRIGGER') THEN
                RAISE EXCEPTION 'role % can still change the decision log (through PUBLIC or'
                    ' another role it belongs to); revoke that first', quote_ident(p_role)
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
        END
        $fn$;
"""

RENAMED_TRIGGERS = [
    ("audit_events_chain", "audit_events"),
    ("audit_events_append_only", "audit_events"),
    ("audit_chain_head_guard", "audit_chain_head"),
    ("users_end_sessions", "users"),
    ("approval_requests_person", "approval_requests"),
    ("runs_status_event", "runs"),
    ("resume_queue_resuming_event", "resume_queue"),
]


def _renames(suffix_from: str, suffix_to: str) -> str:
    statements = []
    for signature in RENAMED_FUNCTIONS:
        name, _, args = signature.partition("(")
        statements.append(f"ALTER FUNCTION {name}{suffix_from}({args} RENAME TO {name}{suffix_to};")
    for trigger, table in RENAMED_TRIGGERS:
        statements.append(
            f"ALTER TRIGGER {trigger}{suffix_from} ON {table} RENAME TO {trigger}{suffix_to};"
        )
    return "\n".join(statements)


def upgrade() -> None:
    op.execute(_renames("", "_v1"))
    op.execute(
        """
        -- ---- audit chain: the bodies that call the renamed hash functions ----------------
        CREATE OR REPLACE FUNCTION approvals_audit_hash_v1(prev_hash text, e audit_events)
        RETURNS text LANGUAGE sql STABLE AS $fn$
            SELECT encode(sha256(convert_to(prev_hash || approvals_audit_canonical_v1(e),
                                            'UTF8')), 'hex')
        $fn$;

        -- CREATE OR REPLACE resets what it does not restate: SECURITY DEFINER and the pinned
        -- search_path (migration 0013) are restated; the revoked EXECUTE right stays revoked.
        DO $do$
        BEGIN
            EXECUTE format($sql$
                CREATE OR REPLACE FUNCTION approvals_audit_chain_v1() RETURNS trigger
                LANGUAGE plpgsql SECURITY DEFINER SET search_path = %I, pg_temp AS $fn$
                DECLARE
                    head audit_chain_head;
                BEGIN
                    SELECT * INTO STRICT head FROM audit_chain_head FOR UPDATE;
                    NEW.id := head.last_id + 1;
                    NEW.at := clock_timestamp();
                    NEW.data := COALESCE(NEW.data, '{}'::jsonb);
                    NEW.prev_hash := head.hash;
                    NEW.hash := approvals_audit_hash_v1(head.hash, NEW);
                    UPDATE audit_chain_head SET last_id = NEW.id, hash = NEW.hash;
                    RETURN NEW;
                END
                $fn$ $sql$, current_schema());
        END
        $do$;

        -- ---- people ---------------------------------------------------------------------
        CREATE OR REPLACE FUNCTION approvals_request_person_v1() RETURNS trigger
        LANGUAGE plpgsql AS $fn$
        BEGIN
            NEW.requested_by_person := approvals_person_of_v1(NEW.requested_by);
            RETURN NEW;
        END
        $fn$;

        -- ---- threads ----------------------------------------------------------------------
        -- The advisory-lock key of a thread: whoever holds it runs or settles the thread's
        -- step (a run's process, a worker's claim, a cancel, a prune).
        CREATE FUNCTION approvals_thread_lock_key_v1(thread_id text) RETURNS bigint
        LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
            SELECT hashtextextended(thread_id, 7277)
        $fn$;

        -- ---- runs -------------------------------------------------------------------------
        -- Whether a run's status is final: nothing more happens to a run in it.
        CREATE FUNCTION approvals_run_finished_v1(status text) RETURNS boolean
        LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
            SELECT status IN ('completed', 'blocked', 'failed', 'cancelled')
        $fn$;

        DROP TRIGGER runs_cancelled_is_final ON runs;
        DROP FUNCTION approvals_keep_cancelled();
        DROP FUNCTION approvals_settle_step(uuid, jsonb, text, text, text, uuid[], text[]);
        DROP FUNCTION approvals_settle_run(uuid, text, text, text, uuid[], text[]);

        -- The end of a step, and the only place a run is settled, in this order: the step's
        -- payload-free interception records (always); when p_status is given, the run's
        -- settlement (the interrupt id each of its requests now waits on, then its status,
        -- error and answer); the audit events of the step's policy denials and transforms (in
        -- emission order); then that of the settlement.
        -- A cancelled run is final: its settlement to another status is refused, audited as
        -- run.settle_refused, and the writer is told. Returns 'settled', 'refused', or
        -- 'recorded' (no status given: records only).
        CREATE FUNCTION approvals_settle_step_v1(
            p_run_id uuid, p_records jsonb, p_status text, p_error text, p_answer text,
            p_request_ids uuid[], p_interrupt_ids text[]
        ) RETURNS text LANGUAGE plpgsql AS $fn$
        DECLARE
            run_status text;
            outcome text := 'recorded';
        BEGIN
            INSERT INTO interception_records
                (run_id, session_id, sequence, point, decision, reason, interceptor, mode,
                 input_identity, enforced_identity, resolved_by, record)
            SELECT p_run_id, x.session_id, x.sequence, x.point, x.decision, x.reason,
                   x.interceptor, x.mode, x.input_identity, x.enforced_identity,
                   x.resolved_by, x.record
              FROM jsonb_to_recordset(COALESCE(p_records, '[]'::jsonb)) AS x(
                   session_id text, sequence bigint, point text, decision text, reason text,
                   interceptor text, mode text, input_identity text, enforced_identity text,
                   resolved_by text, record jsonb);

            IF p_status IS NOT NULL THEN
                SELECT status INTO run_status FROM runs WHERE id = p_run_id FOR UPDATE;
                IF run_status = 'cancelled' AND p_status <> 'cancelled' THEN
                    outcome := 'refused';
                ELSE
                    outcome := 'settled';
                    UPDATE approval_requests r
                       SET interrupt_id = b.interrupt_id
                      FROM unnest(p_request_ids, p_interrupt_ids) AS b(request_id, interrupt_id)
                     WHERE r.id = b.request_id
                       AND r.interrupt_id IS DISTINCT FROM b.interrupt_id;
                    UPDATE runs
                       SET status = p_status, error = p_error,
                           answer = COALESCE(p_answer, answer), updated_at = now()
                     WHERE id = p_run_id;
                END IF;
            END IF;

            INSERT INTO audit_events (kind, run_id, data)
            SELECT 'policy.' || x.decision, p_run_id,
                   jsonb_build_object('point', x.point, 'reason', x.reason,
                                      'interceptor', x.interceptor, 'mode', x.mode,
                                      'sequence', x.sequence, 'session_id', x.session_id,
                                      'input_identity', x.input_identity,
                                      'enforced_identity', x.enforced_identity,
                                      'resolved_by', x.resolved_by)
              FROM jsonb_to_recordset(COALESCE(p_records, '[]'::jsonb)) AS x(
                   session_id text, sequence bigint, point text, decision text, reason text,
                   interceptor text, mode text, input_identity text, enforced_identity text,
                   resolved_by text, record jsonb)
             WHERE x.decision IN ('deny', 'transform')
             ORDER BY x.sequence;

            IF outcome = 'settled' THEN
                INSERT INTO audit_events (kind, run_id, data)
                VALUES ('run.' || p_status, p_run_id,
                        jsonb_build_object('error', left(p_error, 500)));
            ELSIF outcome = 'refused' THEN
                INSERT INTO audit_events (kind, run_id, data)
                VALUES ('run.settle_refused', p_run_id,
                        jsonb_build_object('status', p_status, 'run_status', run_status,
                                           'error', left(p_error, 500)));
            END IF;
            RETURN outcome;
        END
        $fn$;

        -- A backstop for writes that do not go through approvals_settle_step_v1 (SQL by
        -- hand): changing a cancelled run's status fails, loudly.
        CREATE FUNCTION approvals_cancelled_is_final_v1() RETURNS trigger
        LANGUAGE plpgsql AS $fn$
        BEGIN
            RAISE EXCEPTION 'run % was cancelled: its status is final (not %)',
                OLD.id, NEW.status
                USING ERRCODE = 'check_violation';
        END
        $fn$;
        CREATE TRIGGER runs_cancelled_is_final_v1
            BEFORE UPDATE OF status ON runs
            FOR EACH ROW
            WHEN (OLD.status = 'cancelled' AND NEW.status IS DISTINCT FROM 'cancelled')
            EXECUTE FUNCTION approvals_cancelled_is_final_v1();
        """
    )
    op.execute(GRANT_RUNTIME)
    # The engine's migrations no longer create the demo's table (0001 did); the examples do.
    # A database that has it keeps it, rows and all: nothing to do here.


def downgrade() -> None:
    op.execute(
        """
        DROP TRIGGER runs_cancelled_is_final_v1 ON runs;
        DROP FUNCTION approvals_cancelled_is_final_v1();
        DROP FUNCTION approvals_settle_step_v1(uuid, jsonb, text, text, text, uuid[], text[]);
        DROP FUNCTION approvals_run_finished_v1(text);
        DROP FUNCTION approvals_thread_lock_key_v1(text);

        -- As migrations 0001, 0008 and 0009 left them.
        CREATE FUNCTION approvals_settle_run(
            p_run_id uuid, p_status text, p_error text, p_answer text,
            p_request_ids uuid[], p_interrupt_ids text[]
        ) RETURNS void LANGUAGE sql AS $fn$
            UPDATE approval_requests r
               SET interrupt_id = b.interrupt_id
              FROM unnest(p_request_ids, p_interrupt_ids) AS b(request_id, interrupt_id)
             WHERE r.id = b.request_id AND r.interrupt_id IS DISTINCT FROM b.interrupt_id;
            UPDATE runs
               SET status = p_status, error = p_error, answer = COALESCE(p_answer, answer),
                   updated_at = now()
             WHERE id = p_run_id;
        $fn$;

        CREATE FUNCTION approvals_settle_step(
            p_run_id uuid, p_records jsonb, p_status text, p_error text, p_answer text,
            p_request_ids uuid[], p_interrupt_ids text[]
        ) RETURNS integer LANGUAGE plpgsql AS $fn$
        DECLARE
            written integer := 0;
            n integer;
        BEGIN
            INSERT INTO interception_records
                (run_id, session_id, sequence, point, decision, reason, interceptor, mode,
                 input_identity, enforced_identity, resolved_by, record)
            SELECT p_run_id, x.session_id, x.sequence, x.point, x.decision, x.reason,
                   x.interceptor, x.mode, x.input_identity, x.enforced_identity,
                   x.resolved_by, x.record
              FROM jsonb_to_recordset(COALESCE(p_records, '[]'::jsonb)) AS x(
                   session_id text, sequence bigint, point text, decision text, reason text,
                   interceptor text, mode text, input_identity text, enforced_identity text,
                   resolved_by text, record jsonb);

            IF p_status IS NOT NULL THEN
                PERFORM approvals_settle_run(p_run_id, p_status, p_error, p_answer,
                                             p_request_ids, p_interrupt_ids);
            END IF;

            INSERT INTO audit_events (kind, run_id, data)
            SELECT 'policy.' || x.decision, p_run_id,
                   jsonb_build_object('point', x.point, 'reason', x.reason,
                                      'interceptor', x.interceptor, 'mode', x.mode,
                                      'sequence', x.sequence, 'session_id', x.session_id,
                                      'input_identity', x.input_identity,
                                      'enforced_identity', x.enforced_identity,
                                      'resolved_by', x.resolved_by)
              FROM jsonb_to_recordset(COALESCE(p_records, '[]'::jsonb)) AS x(
                   session_id text, sequence bigint, point text, decision text, reason text,
                   interceptor text, mode text, input_identity text, enforced_identity text,
                   resolved_by text, record jsonb)
             WHERE x.decision IN ('deny', 'transform')
             ORDER BY x.sequence;
            GET DIAGNOSTICS n = ROW_COUNT;
            written := written + n;

            IF p_status IS NOT NULL THEN
                INSERT INTO audit_events (kind, run_id, data)
                VALUES ('run.' || p_status, p_run_id,
                        jsonb_build_object('error', left(p_error, 500)));
                written := written + 1;
            END IF;
            RETURN written;
        END;
        $fn$;

        CREATE FUNCTION approvals_keep_cancelled() RETURNS trigger LANGUAGE plpgsql AS $fn$
        BEGIN
            RETURN NULL;
        END;
        $fn$;
        CREATE TRIGGER runs_cancelled_is_final
            BEFORE UPDATE OF status ON runs
            FOR EACH ROW
            WHEN (OLD.status = 'cancelled' AND NEW.status IS DISTINCT FROM 'cancelled')
            EXECUTE FUNCTION approvals_keep_cancelled();
        """
    )
    op.execute(_renames("_v1", ""))
    op.execute(
        """
        -- The bodies that call renamed functions, as before (approvals_grant_runtime's
        -- exclusion matches its old name too, so it needs no change).
        CREATE OR REPLACE FUNCTION approvals_audit_hash(prev_hash text, e audit_events)
        RETURNS text LANGUAGE sql STABLE AS $fn$
            SELECT encode(sha256(convert_to(prev_hash || approvals_audit_canonical(e), 'UTF8')),
                          'hex')
        $fn$;

        DO $do$
        BEGIN
            EXECUTE format($sql$
                CREATE OR REPLACE FUNCTION approvals_audit_chain() RETURNS trigger
                LANGUAGE plpgsql SECURITY DEFINER SET search_path = %I, pg_temp AS $fn$
                DECLARE
                    head audit_chain_head;
                BEGIN
                    SELECT * INTO STRICT head FROM audit_chain_head FOR UPDATE;
                    NEW.id := head.last_id + 1;
                    NEW.at := clock_timestamp();
                    NEW.data := COALESCE(NEW.data, '{}'::jsonb);
                    NEW.prev_hash := head.hash;
                    NEW.hash := approvals_audit_hash(head.hash, NEW);
                    UPDATE audit_chain_head SET last_id = NEW.id, hash = NEW.hash;
                    RETURN NEW;
                END
                $fn$ $sql$, current_schema());
        END
        $do$;

        CREATE OR REPLACE FUNCTION approvals_request_person() RETURNS trigger
        LANGUAGE plpgsql AS $fn$
        BEGIN
            NEW.requested_by_person := approvals_person_of(NEW.requested_by);
            RETURN NEW;
        END
        $fn$;
        """
    )
