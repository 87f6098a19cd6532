-- The schema `approvals db upgrade` produces (LangGraph's checkpoint tables left out), as
-- pg_dump --schema-only prints it, normalized. Generated: do not edit; run `make schema`.
-- tests/integration/test_schema.py checks that the migrations still produce exactly this.

CREATE TABLE public.audit_events (
    id bigint NOT NULL,
    at timestamp with time zone DEFAULT now() NOT NULL,
    kind text NOT NULL,
    run_id uuid,
    request_id uuid,
    call_id text,
    principal text,
    data jsonb DEFAULT '{}'::jsonb NOT NULL,
    state_version text,
    tool text,
    prev_hash text NOT NULL,
    hash text NOT NULL
);

CREATE FUNCTION public.approvals_audit_canonical_v1(e public.audit_events) RETURNS text
    LANGUAGE sql STABLE
    AS $$
            SELECT '{"at":'
                || to_json(to_char(e.at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))::text
                || ',"call_id":' || COALESCE(to_json(e.call_id)::text, 'null')
                || ',"data":' || e.data::text
                || ',"id":' || e.id::text
                || ',"kind":' || to_json(e.kind)::text
                || ',"principal":' || COALESCE(to_json(e.principal)::text, 'null')
                || ',"request_id":' || COALESCE(to_json(e.request_id::text)::text, 'null')
                || ',"run_id":' || COALESCE(to_json(e.run_id::text)::text, 'null')
                || ',"state_version":' || COALESCE(to_json(e.state_version)::text, 'null')
                || ',"tool":' || COALESCE(to_json(e.tool)::text, 'null')
                || '}'
        $$;

CREATE FUNCTION public.approvals_audit_chain_v1() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
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
                $$;

CREATE FUNCTION public.approvals_audit_hash_v1(prev_hash text, e public.audit_events) RETURNS text
    LANGUAGE sql STABLE
    AS $$
            SELECT encode(sha256(convert_to(prev_hash || approvals_audit_canonical_v1(e),
                                            'UTF8')), 'hex')
        $$;

CREATE FUNCTION public.approvals_audit_refuse_v1() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
        BEGIN
            -- The head moves only with an insert into the log (the trigger above, one level
            -- down); nothing else may touch it.
            IF TG_TABLE_NAME = 'audit_chain_head' AND TG_OP = 'UPDATE'
               AND pg_trigger_depth() > 1 THEN
                RETURN NULL;
            END IF;
            RAISE EXCEPTION 'the decision log is append-only: % on % is refused',
                TG_OP, TG_TABLE_NAME
                USING ERRCODE = 'insufficient_privilege',
                      HINT = 'events are hash-chained; `approvals audit verify` checks them';
        END
        $$;

CREATE FUNCTION public.approvals_audit_states_fact_v1() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
        DECLARE
            -- The kinds bound to a fact (and in the index above).
            bound constant text[] := ARRAY['request.decided', 'request.expired',
                                           'request.voted', 'resume.queued', 'tool.started',
                                           'tool.succeeded', 'tool.failed',
                                           'tool.outcome_unknown', 'tool.reconciled',
                                           'tool.refused'];
            founded boolean;
            ended constant text[] := ARRAY['tool.succeeded', 'tool.failed',
                                           'tool.outcome_unknown'];
        BEGIN
            IF NEW.kind <> ALL (bound) THEN
                RETURN NEW;
            END IF;
            -- Whether an event of these kinds was already written for this call: the second
            -- statement of one fact is a forgery, however well it matches.
            IF EXISTS (
                SELECT 1 FROM audit_events e
                 WHERE e.run_id = NEW.run_id AND e.call_id = NEW.call_id
                   AND e.kind = ANY (bound)
                   AND CASE
                       WHEN NEW.kind IN ('request.decided', 'request.expired') THEN
                           e.kind IN ('request.decided', 'request.expired')
                           AND e.request_id = NEW.request_id
                       WHEN NEW.kind = 'request.voted' THEN
                           e.kind = 'request.voted' AND e.request_id = NEW.request_id
                           AND e.data ->> 'person' = NEW.data ->> 'person'
                       WHEN NEW.kind = 'resume.queued' THEN
                           e.kind = 'resume.queued' AND e.data -> 'job' = NEW.data -> 'job'
                       WHEN NEW.kind = ANY (ended) THEN e.kind = ANY (ended)
                       WHEN NEW.kind IN ('tool.started', 'tool.reconciled') THEN
                           e.kind = NEW.kind
                       ELSE false
                   END) THEN
                RAISE EXCEPTION 'the decision log already states this %: a second % event for'
                    ' run %, call % is refused', NEW.kind, NEW.kind, NEW.run_id, NEW.call_id
                    USING ERRCODE = 'check_violation',
                          HINT = 'the engine writes it once, with the fact it states';
            END IF;

            founded := CASE
                WHEN NEW.kind IN ('request.decided', 'request.expired') THEN EXISTS (
                    SELECT 1 FROM decisions d JOIN approval_requests a ON a.id = d.request_id
                     WHERE d.request_id = NEW.request_id
                       AND d.run_id = NEW.run_id AND d.call_id = NEW.call_id
                       AND a.tool IS NOT DISTINCT FROM NEW.tool
                       AND a.state_version IS NOT DISTINCT FROM NEW.state_version
                       AND a.identity = NEW.data ->> 'identity'
                       AND d.principal = NEW.principal
                       AND d.kind = NEW.data ->> 'decision'
                       AND d.reason IS NOT DISTINCT FROM NEW.data ->> 'reason'
                       AND CASE NEW.kind
                           WHEN 'request.decided' THEN
                               a.status NOT IN ('pending', 'expired')
                               AND d.args_identity IS NOT DISTINCT FROM
                                   NEW.data ->> 'args_identity'
                           ELSE a.status = 'expired' AND d.principal = 'system:expiry'
                       END)
                WHEN NEW.kind = 'request.voted' THEN EXISTS (
                    SELECT 1 FROM approval_votes v JOIN approval_requests a
                        ON a.id = v.request_id
                     WHERE v.request_id = NEW.request_id
                       AND v.principal = NEW.principal
                       AND v.person = NEW.data ->> 'person'
                       AND a.run_id = NEW.run_id AND a.call_id = NEW.call_id
                       AND a.tool IS NOT DISTINCT FROM NEW.tool)
                WHEN NEW.kind = 'resume.queued' THEN EXISTS (
                    SELECT 1 FROM resume_queue q JOIN decisions d ON d.id = q.decision_id
                     WHERE q.request_id = NEW.request_id
                       AND q.id::text = NEW.data ->> 'job'
                       AND q.run_id = NEW.run_id AND d.call_id = NEW.call_id
                       AND d.principal = NEW.principal)
                ELSE EXISTS (
                    SELECT 1 FROM tool_executions t
                     WHERE t.run_id = NEW.run_id AND t.call_id = NEW.call_id
                       AND CASE
                           WHEN NEW.kind = 'tool.started' THEN
                               t.tool = NEW.tool
                               AND t.args_identity = NEW.data ->> 'args_identity'
                           WHEN NEW.kind = ANY (ended) THEN
                               t.tool = NEW.tool
                               AND t.status = substr(NEW.kind, length('tool.') + 1)
                               AND left(t.error, 500) IS NOT DISTINCT FROM NEW.data ->> 'error'
                           WHEN NEW.kind = 'tool.reconciled' THEN
                               t.status IN ('succeeded', 'failed')
                               AND t.status = NEW.data ->> 'status'
                               AND t.error IS NOT DISTINCT FROM NEW.data ->> 'error'
                               AND EXISTS (
                                   SELECT 1 FROM audit_events u
                                    WHERE u.run_id = NEW.run_id AND u.call_id = NEW.call_id
                                      AND u.kind = 'tool.outcome_unknown')
                           ELSE -- tool.refused: the call id was used by other arguments
                               NEW.data ->> 'reason' = 'call_id_reused'
                               AND t.args_identity = NEW.data ->> 'executed_identity'
                               AND t.args_identity IS DISTINCT FROM
                                   NEW.data ->> 'args_identity'
                       END)
            END;
            IF NOT founded THEN
                RAISE EXCEPTION 'the decision log refuses a % event that no stored fact backs'
                    ' (run %, request %, call %, principal %)',
                    NEW.kind, NEW.run_id, NEW.request_id, NEW.call_id, NEW.principal
                    USING ERRCODE = 'check_violation',
                          HINT = 'an event stating a decision, a vote or a tool execution'
                                 ' is written by the statement that stores it';
            END IF;
            RETURN NEW;
        END
        $$;

CREATE FUNCTION public.approvals_cancelled_is_final_v1() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
        BEGIN
            RAISE EXCEPTION 'run % was cancelled: its status is final (not %)',
                OLD.id, NEW.status
                USING ERRCODE = 'check_violation';
        END
        $$;

CREATE FUNCTION public.approvals_end_account_sessions_v1() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
        BEGIN
            DELETE FROM web_sessions WHERE account = OLD.name;
            RETURN NULL;
        END
        $$;

CREATE FUNCTION public.approvals_grant_runtime_v1(p_role name) RETURNS TABLE(object text, privileges text)
    LANGUAGE plpgsql
    AS $$
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
                   AND p.proname LIKE 'approvals\_%'
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
                   AND p.proname LIKE 'approvals\_%'
                   AND p.prorettype <> 'trigger'::regtype
                   AND p.proname NOT LIKE 'approvals\_grant\_runtime%'
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
        $$;

CREATE FUNCTION public.approvals_person_of_v1(p_principal text) RETURNS text
    LANGUAGE sql STABLE
    AS $$
            SELECT CASE
                WHEN p_principal LIKE 'token:%' THEN
                    (SELECT 'local:' || t.owner FROM api_tokens t
                      WHERE t.name = substr(p_principal, 7))
                ELSE p_principal
            END
        $$;

CREATE FUNCTION public.approvals_request_event_v1() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
        DECLARE
            kind text;
            payload text;
        BEGIN
            IF TG_OP = 'INSERT' THEN
                kind := 'opened';
            ELSIF OLD.status IS DISTINCT FROM NEW.status THEN
                kind := CASE NEW.status
                            WHEN 'approved' THEN 'decided'
                            WHEN 'rejected' THEN 'decided'
                            WHEN 'answered' THEN 'decided'
                            ELSE NEW.status
                        END;
            ELSE
                -- Still pending, moved to the next approvers of its chain (or given others).
                kind := 'escalated';
            END IF;
            payload := jsonb_build_object(
                'id', NEW.id, 'run_id', NEW.run_id, 'tool', NEW.tool, 'kind', kind,
                'status', NEW.status, 'approvers', to_jsonb(NEW.approvers),
                'requested_by', NEW.requested_by,
                'requested_by_person', NEW.requested_by_person)
                || CASE WHEN kind = 'escalated'
                        THEN jsonb_build_object('from_approvers', to_jsonb(OLD.approvers))
                        ELSE '{}'::jsonb END;
            IF octet_length(payload) >= 7900 THEN
                payload := jsonb_build_object('id', NEW.id, 'kind', kind, 'status', NEW.status,
                                              'more', true);
            END IF;
            PERFORM pg_notify('approvals_request_events', payload);
            RETURN NULL;
        END
        $$;

CREATE FUNCTION public.approvals_request_person_v1() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
        BEGIN
            NEW.requested_by_person := approvals_person_of_v1(NEW.requested_by);
            RETURN NEW;
        END
        $$;

CREATE FUNCTION public.approvals_run_finished_v1(status text) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
            SELECT status IN ('completed', 'blocked', 'failed', 'cancelled')
        $$;

CREATE FUNCTION public.approvals_run_in_flight_v1(p_run_id uuid) RETURNS boolean
    LANGUAGE sql STABLE
    AS $$
            SELECT EXISTS (SELECT 1 FROM approval_requests a
                            WHERE a.run_id = p_run_id AND a.status = 'pending')
                OR EXISTS (SELECT 1 FROM resume_queue q
                            WHERE q.run_id = p_run_id AND q.status = 'queued')
                OR EXISTS (SELECT 1 FROM approval_requests a
                             JOIN notification_deliveries d ON d.request_id = a.id
                            WHERE a.run_id = p_run_id AND d.status = 'sending'
                              AND d.next_attempt_at > now())
                OR EXISTS (SELECT 1 FROM run_events e
                             JOIN run_notification_deliveries d ON d.event_id = e.id
                            WHERE e.run_id = p_run_id AND d.status = 'sending'
                              AND d.next_attempt_at > now())
        $$;

CREATE FUNCTION public.approvals_run_resuming_event_v1() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
        BEGIN
            INSERT INTO run_events (run_id, kind, data)
            VALUES (NEW.run_id, 'resuming', '{}'::jsonb);
            PERFORM pg_notify('approvals_run_events', NEW.run_id::text);
            RETURN NULL;
        END
        $$;

CREATE FUNCTION public.approvals_run_status_event_v1() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
        BEGIN
            INSERT INTO run_events (run_id, kind, data)
            VALUES (NEW.id, 'status', jsonb_build_object('status', NEW.status));
            PERFORM pg_notify('approvals_run_events', NEW.id::text);
            RETURN NULL;
        END
        $$;

CREATE FUNCTION public.approvals_session_ended_v1() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
        BEGIN
            PERFORM pg_notify('approvals_sessions_ended', OLD.id_hash);
            RETURN NULL;
        END
        $$;

CREATE FUNCTION public.approvals_settle_step_v1(p_run_id uuid, p_records jsonb, p_status text, p_error text, p_answer text, p_request_ids uuid[], p_interrupt_ids text[]) RETURNS text
    LANGUAGE plpgsql
    AS $$
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
        $$;

CREATE FUNCTION public.approvals_settle_step_v2(p_run_id uuid, p_records jsonb, p_status text, p_error text, p_answer text, p_request_ids uuid[], p_interrupt_ids text[]) RETURNS text
    LANGUAGE plpgsql
    AS $$
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
                -- NO KEY UPDATE, not UPDATE: a decision on one of the run's requests holds that
                -- request's row and then inserts rows referencing the run, whose foreign key
                -- checks take a key-share lock on this row. FOR UPDATE made them wait for
                -- each other (a deadlock); NO KEY UPDATE still serializes with a cancel.
                SELECT status INTO run_status FROM runs WHERE id = p_run_id FOR NO KEY UPDATE;
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
        $$;

CREATE FUNCTION public.approvals_settle_step_v3(p_run_id uuid, p_records jsonb, p_status text, p_error text, p_answer text, p_request_ids uuid[], p_interrupt_ids text[], p_events jsonb) RETURNS text
    LANGUAGE plpgsql
    AS $$
        DECLARE
            run_status text;
            outcome text := 'recorded';
        BEGIN
            -- The step's node updates not yet recorded, in the order they happened, before
            -- the status event the run's UPDATE below writes (runs_status_event): a stream
            -- closes at that event, so it must already have sent them.
            IF jsonb_array_length(COALESCE(p_events, '[]'::jsonb)) > 0 THEN
                INSERT INTO run_events (run_id, kind, node, data)
                SELECT p_run_id, 'update', e.value ->> 'node', COALESCE(e.value -> 'data', '{}')
                  FROM jsonb_array_elements(p_events) WITH ORDINALITY AS e(value, n)
                 ORDER BY e.n;
                PERFORM pg_notify('approvals_run_events', p_run_id::text);
            END IF;

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
                -- NO KEY UPDATE, not UPDATE: a decision on one of the run's requests holds that
                -- request's row and then inserts rows referencing the run, whose foreign key
                -- checks take a key-share lock on this row. FOR UPDATE made them wait for
                -- each other (a deadlock); NO KEY UPDATE still serializes with a cancel.
                SELECT status INTO run_status FROM runs WHERE id = p_run_id FOR NO KEY UPDATE;
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
        $$;

CREATE FUNCTION public.approvals_settle_step_v4(p_run_id uuid, p_records jsonb, p_status text, p_error text, p_answer text, p_request_ids uuid[], p_interrupt_ids text[], p_events jsonb) RETURNS text
    LANGUAGE plpgsql
    AS $$
        DECLARE
            run_status text;
            outcome text := 'recorded';
        BEGIN
            -- The step's node updates not yet recorded, in the order they happened, before
            -- the status event the run's UPDATE below writes (runs_status_event): a stream
            -- closes at that event, so it must already have sent them.
            IF jsonb_array_length(COALESCE(p_events, '[]'::jsonb)) > 0 THEN
                INSERT INTO run_events (run_id, kind, node, data)
                SELECT p_run_id, 'update', e.value ->> 'node', COALESCE(e.value -> 'data', '{}')
                  FROM jsonb_array_elements(p_events) WITH ORDINALITY AS e(value, n)
                 ORDER BY e.n;
                PERFORM pg_notify('approvals_run_events', p_run_id::text);
            END IF;

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
                -- NO KEY UPDATE, not UPDATE: a decision on one of the run's requests holds that
                -- request's row and then inserts rows referencing the run, whose foreign key
                -- checks take a key-share lock on this row. FOR UPDATE made them wait for
                -- each other (a deadlock); NO KEY UPDATE still serializes with a cancel.
                SELECT status INTO run_status FROM runs WHERE id = p_run_id FOR NO KEY UPDATE;
                -- A run that ended stays as it ended: no later step rewrites a completed,
                -- blocked, failed or cancelled run (v3 refused only over 'cancelled'). A
                -- cancel's own settlement over its cancellation is still taken.
                IF approvals_run_finished_v1(run_status)
                   AND NOT (run_status = 'cancelled' AND p_status = 'cancelled') THEN
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
        $$;

CREATE FUNCTION public.approvals_sign_in_attempt_v1(p_account text, p_client text, p_attempts integer, p_account_attempts integer, p_window_seconds double precision) RETURNS TABLE(wait double precision, counted bigint)
    LANGUAGE plpgsql
    AS $$
        DECLARE
            span constant interval := make_interval(secs => p_window_seconds);
            moment timestamptz;
            nth timestamptz;
        BEGIN
            -- One name's attempts one at a time, across every process; the queries below take
            -- their snapshots after the lock, so they see the attempt counted before.
            PERFORM pg_advisory_xact_lock(7278, hashtext(p_account));
            -- Not waiting for the WAL flush: a count lost to a database crash is at most the
            -- last few hundred milliseconds' (a process's own counts all go when it restarts),
            -- and the flush was most of an attempt's time (bench/sign_in_throttle.py).
            PERFORM set_config('synchronous_commit', 'off', true);
            moment := clock_timestamp();
            wait := 0;
            -- The limit-th newest failure still in the window: the wait ends when it leaves.
            SELECT f.at INTO nth FROM sign_in_failures f
             WHERE f.account = p_account AND f.client = p_client AND NOT f.client_cleared
               AND f.at > moment - span
             ORDER BY f.at DESC OFFSET p_attempts - 1 LIMIT 1;
            IF FOUND THEN
                wait := extract(epoch FROM nth + span - moment);
            END IF;
            SELECT f.at INTO nth FROM sign_in_failures f
             WHERE f.account = p_account AND f.at > moment - span
             ORDER BY f.at DESC OFFSET p_account_attempts - 1 LIMIT 1;
            IF FOUND THEN
                wait := GREATEST(wait, extract(epoch FROM nth + span - moment));
            END IF;
            IF wait > 0 THEN
                counted := NULL;
            ELSE
                wait := 0;
                INSERT INTO sign_in_failures (account, client, at)
                VALUES (p_account, p_client, moment)
                RETURNING id INTO counted;
            END IF;
            -- A few ended rows go with each attempt: a spray of names leaves no heap behind.
            DELETE FROM sign_in_failures
             WHERE id IN (SELECT id FROM sign_in_failures
                           WHERE at <= moment - span
                           ORDER BY at LIMIT 8 FOR UPDATE SKIP LOCKED);
            RETURN NEXT;
        END
        $$;

CREATE FUNCTION public.approvals_thread_lock_key_v1(thread_id text) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
            SELECT hashtextextended(thread_id, 7277)
        $$;

CREATE TABLE public.alembic_version (
    version_num character varying(32) NOT NULL
);

CREATE TABLE public.api_tokens (
    name text NOT NULL,
    digest text NOT NULL,
    groups text[] NOT NULL,
    created_by text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    revoked_at timestamp with time zone,
    owner text
);

CREATE TABLE public.approval_requests (
    id uuid NOT NULL,
    run_id uuid NOT NULL,
    thread_id text NOT NULL,
    call_id text NOT NULL,
    tool text NOT NULL,
    shown jsonb NOT NULL,
    args_schema jsonb NOT NULL,
    identity text NOT NULL,
    reason text,
    interrupt_id text,
    state_version text,
    requested_by text NOT NULL,
    status text DEFAULT 'pending'::text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    decided_at timestamp with time zone,
    approvers text[] DEFAULT '{}'::text[] NOT NULL,
    allow_edit boolean DEFAULT true NOT NULL,
    quorum smallint DEFAULT 1 NOT NULL,
    on_expiry text DEFAULT 'reject'::text NOT NULL,
    escalation_chain jsonb DEFAULT '[]'::jsonb NOT NULL,
    escalation_level integer DEFAULT 0 NOT NULL,
    requested_by_person text,
    proposed_by text,
    shown_digest text NOT NULL,
    allowed_decisions text[] DEFAULT ARRAY['approve'::text, 'edit'::text, 'reject'::text] NOT NULL,
    CONSTRAINT approval_requests_allowed_decisions_check CHECK (((cardinality(allowed_decisions) > 0) AND (allowed_decisions <@ ARRAY['approve'::text, 'edit'::text, 'reject'::text, 'respond'::text]))),
    CONSTRAINT approval_requests_escalation_chain_check CHECK ((jsonb_typeof(escalation_chain) = 'array'::text)),
    CONSTRAINT approval_requests_escalation_level_check CHECK ((escalation_level >= 0)),
    CONSTRAINT approval_requests_on_expiry_check CHECK ((on_expiry = ANY (ARRAY['reject'::text, 'escalate'::text]))),
    CONSTRAINT approval_requests_quorum_check CHECK (((quorum >= 1) AND (quorum <= 20))),
    CONSTRAINT approval_requests_status_check CHECK ((status = ANY (ARRAY['pending'::text, 'approved'::text, 'rejected'::text, 'answered'::text, 'expired'::text, 'superseded'::text, 'cancelled'::text])))
);

CREATE TABLE public.approval_votes (
    request_id uuid NOT NULL,
    principal text NOT NULL,
    at timestamp with time zone DEFAULT now() NOT NULL,
    person text NOT NULL
);

CREATE TABLE public.audit_chain_head (
    singleton boolean DEFAULT true NOT NULL,
    last_id bigint NOT NULL,
    hash text NOT NULL,
    legacy_until bigint NOT NULL,
    CONSTRAINT audit_chain_head_singleton_check CHECK (singleton)
);

CREATE SEQUENCE public.audit_events_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.audit_events_id_seq OWNED BY public.audit_events.id;

CREATE TABLE public.decisions (
    id uuid NOT NULL,
    request_id uuid NOT NULL,
    run_id uuid NOT NULL,
    call_id text NOT NULL,
    kind text NOT NULL,
    principal text NOT NULL,
    reason text,
    args jsonb,
    args_identity text,
    decided_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT decisions_kind_check CHECK ((kind = ANY (ARRAY['approve'::text, 'reject'::text, 'edit'::text, 'respond'::text]))),
    CONSTRAINT decisions_respond_has_answer CHECK (((kind <> 'respond'::text) OR (length(btrim(reason)) > 0)))
);

CREATE TABLE public.demo_side_effects (
    id bigint NOT NULL,
    run_id uuid NOT NULL,
    call_id text NOT NULL,
    tool text NOT NULL,
    args jsonb NOT NULL,
    at timestamp with time zone DEFAULT now() NOT NULL
);

CREATE SEQUENCE public.demo_side_effects_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.demo_side_effects_id_seq OWNED BY public.demo_side_effects.id;

CREATE TABLE public.interception_records (
    id bigint NOT NULL,
    run_id uuid NOT NULL,
    session_id text NOT NULL,
    sequence bigint NOT NULL,
    point text NOT NULL,
    decision text NOT NULL,
    reason text,
    interceptor text,
    mode text NOT NULL,
    input_identity text,
    enforced_identity text,
    resolved_by text,
    record jsonb NOT NULL,
    at timestamp with time zone DEFAULT now() NOT NULL
);

CREATE SEQUENCE public.interception_records_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.interception_records_id_seq OWNED BY public.interception_records.id;

CREATE TABLE public.langgraph_threads (
    thread_id text NOT NULL,
    metadata jsonb DEFAULT '{}'::jsonb NOT NULL,
    created_by text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT langgraph_threads_metadata_check CHECK ((jsonb_typeof(metadata) = 'object'::text)),
    CONSTRAINT langgraph_threads_thread_id_check CHECK (((length(thread_id) >= 1) AND (length(thread_id) <= 200)))
);

CREATE TABLE public.notification_attempts (
    id bigint NOT NULL,
    delivery_id bigint NOT NULL,
    attempt integer NOT NULL,
    status text NOT NULL,
    response_code integer,
    error text,
    at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT notification_attempts_status_check CHECK ((status = ANY (ARRAY['sent'::text, 'retry'::text, 'failed'::text, 'skipped'::text])))
);

CREATE SEQUENCE public.notification_attempts_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.notification_attempts_id_seq OWNED BY public.notification_attempts.id;

CREATE TABLE public.notification_deliveries (
    id bigint NOT NULL,
    request_id uuid NOT NULL,
    channel text NOT NULL,
    event text NOT NULL,
    escalation_level integer NOT NULL,
    status text NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    next_attempt_at timestamp with time zone DEFAULT now() NOT NULL,
    last_error text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    finished_at timestamp with time zone,
    CONSTRAINT notification_deliveries_event_check CHECK ((event = ANY (ARRAY['waiting'::text, 'escalated'::text]))),
    CONSTRAINT notification_deliveries_status_check CHECK ((status = ANY (ARRAY['sending'::text, 'retry'::text, 'sent'::text, 'failed'::text, 'skipped'::text, 'cancelled'::text])))
);

CREATE SEQUENCE public.notification_deliveries_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.notification_deliveries_id_seq OWNED BY public.notification_deliveries.id;

CREATE TABLE public.openai_run_states (
    run_id uuid NOT NULL,
    agent text NOT NULL,
    state text NOT NULL,
    version text NOT NULL,
    waiting jsonb DEFAULT '[]'::jsonb NOT NULL,
    status text NOT NULL,
    answer text,
    error text,
    saved_at timestamp with time zone DEFAULT now() NOT NULL
);

CREATE TABLE public.openai_session_items (
    id bigint NOT NULL,
    thread_id text NOT NULL,
    run_id uuid NOT NULL,
    item jsonb NOT NULL,
    added_at timestamp with time zone DEFAULT now() NOT NULL
);

ALTER TABLE public.openai_session_items ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.openai_session_items_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.resume_queue (
    id bigint NOT NULL,
    request_id uuid NOT NULL,
    decision_id uuid NOT NULL,
    run_id uuid NOT NULL,
    thread_id text NOT NULL,
    status text DEFAULT 'queued'::text NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    last_error text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    finished_at timestamp with time zone,
    CONSTRAINT resume_queue_status_check CHECK ((status = ANY (ARRAY['queued'::text, 'done'::text, 'skipped'::text, 'failed'::text])))
);

CREATE SEQUENCE public.resume_queue_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.resume_queue_id_seq OWNED BY public.resume_queue.id;

CREATE TABLE public.run_events (
    id bigint NOT NULL,
    run_id uuid NOT NULL,
    kind text NOT NULL,
    node text,
    data jsonb DEFAULT '{}'::jsonb NOT NULL,
    at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT run_events_kind_check CHECK ((kind = ANY (ARRAY['status'::text, 'resuming'::text, 'update'::text, 'resume_failed'::text])))
);

CREATE SEQUENCE public.run_events_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.run_events_id_seq OWNED BY public.run_events.id;

CREATE TABLE public.run_notification_deliveries (
    id bigint NOT NULL,
    event_id bigint NOT NULL,
    channel text NOT NULL,
    status text NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    next_attempt_at timestamp with time zone DEFAULT now() NOT NULL,
    last_error text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    finished_at timestamp with time zone,
    CONSTRAINT run_notification_deliveries_status_check CHECK ((status = ANY (ARRAY['sending'::text, 'retry'::text, 'sent'::text, 'failed'::text])))
);

CREATE SEQUENCE public.run_notification_deliveries_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.run_notification_deliveries_id_seq OWNED BY public.run_notification_deliveries.id;

CREATE TABLE public.runs (
    id uuid NOT NULL,
    thread_id text NOT NULL,
    graph text NOT NULL,
    status text NOT NULL,
    started_by text NOT NULL,
    input jsonb NOT NULL,
    error text,
    answer text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT runs_status_check CHECK ((status = ANY (ARRAY['running'::text, 'waiting'::text, 'completed'::text, 'blocked'::text, 'failed'::text, 'cancelled'::text])))
);

CREATE TABLE public.sign_in_failures (
    id bigint NOT NULL,
    account text NOT NULL,
    client text NOT NULL,
    at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    client_cleared boolean DEFAULT false NOT NULL
);

CREATE SEQUENCE public.sign_in_failures_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.sign_in_failures_id_seq OWNED BY public.sign_in_failures.id;

CREATE TABLE public.slack_messages (
    id bigint NOT NULL,
    request_id uuid NOT NULL,
    escalation_level integer NOT NULL,
    target text NOT NULL,
    channel text NOT NULL,
    ts text NOT NULL,
    posted_at timestamp with time zone DEFAULT now() NOT NULL,
    status text DEFAULT 'posted'::text NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    next_attempt_at timestamp with time zone DEFAULT now() NOT NULL,
    last_error text,
    updated_at timestamp with time zone,
    CONSTRAINT slack_messages_status_check CHECK ((status = ANY (ARRAY['posted'::text, 'updating'::text, 'retry'::text, 'updated'::text, 'failed'::text, 'skipped'::text])))
);

ALTER TABLE public.slack_messages ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.slack_messages_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.slack_oidc_users (
    slack_user text NOT NULL,
    principal text NOT NULL,
    linked_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT slack_oidc_users_principal_check CHECK (starts_with(principal, 'oidc:'::text)),
    CONSTRAINT slack_oidc_users_slack_user_check CHECK ((slack_user ~ '^[UW][A-Z0-9]{2,30}$'::text))
);

CREATE TABLE public.slack_users (
    slack_user text NOT NULL,
    account text NOT NULL,
    linked_by text NOT NULL,
    linked_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT slack_users_slack_user_check CHECK ((slack_user ~ '^[UW][A-Z0-9]{2,30}$'::text))
);

CREATE TABLE public.standing_grant_uses (
    grant_id uuid NOT NULL,
    run_id uuid NOT NULL,
    call_id text NOT NULL,
    identity text NOT NULL,
    used_at timestamp with time zone DEFAULT now() NOT NULL
);

CREATE TABLE public.standing_grants (
    id uuid NOT NULL,
    run_id uuid NOT NULL,
    tool text NOT NULL,
    rule text NOT NULL,
    ruling text NOT NULL,
    within jsonb DEFAULT '{}'::jsonb NOT NULL,
    request_id uuid NOT NULL,
    granted_by text NOT NULL,
    granted_at timestamp with time zone DEFAULT now() NOT NULL,
    uses integer DEFAULT 0 NOT NULL,
    revoked_at timestamp with time zone,
    revoked_by text,
    CONSTRAINT standing_grants_check CHECK (((revoked_at IS NULL) = (revoked_by IS NULL))),
    CONSTRAINT standing_grants_ruling_check CHECK ((ruling = ANY (ARRAY['approve'::text, 'reject'::text]))),
    CONSTRAINT standing_grants_uses_check CHECK ((uses >= 0))
);

CREATE TABLE public.tool_executions (
    id bigint NOT NULL,
    run_id uuid NOT NULL,
    call_id text NOT NULL,
    tool text NOT NULL,
    idempotency_key text NOT NULL,
    args_identity text NOT NULL,
    status text NOT NULL,
    result jsonb,
    error text,
    started_at timestamp with time zone DEFAULT now() NOT NULL,
    finished_at timestamp with time zone,
    state_update_type text,
    state_update bytea,
    CONSTRAINT tool_executions_state_update_typed CHECK (((state_update IS NULL) = (state_update_type IS NULL))),
    CONSTRAINT tool_executions_status_check CHECK ((status = ANY (ARRAY['started'::text, 'succeeded'::text, 'failed'::text, 'outcome_unknown'::text])))
);

CREATE SEQUENCE public.tool_executions_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.tool_executions_id_seq OWNED BY public.tool_executions.id;

CREATE TABLE public.users (
    name text NOT NULL,
    password_hash text NOT NULL,
    groups text[] DEFAULT '{}'::text[] NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    disabled boolean DEFAULT false NOT NULL
);

CREATE TABLE public.web_sessions (
    id_hash text NOT NULL,
    principal text NOT NULL,
    name text NOT NULL,
    via text NOT NULL,
    account text,
    groups text[] NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    last_seen_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT web_sessions_check CHECK (((via = 'password'::text) = (account IS NOT NULL))),
    CONSTRAINT web_sessions_via_check CHECK ((via = ANY (ARRAY['password'::text, 'oidc'::text])))
);

CREATE TABLE public.workers (
    id text NOT NULL,
    host text NOT NULL,
    pid integer NOT NULL,
    graphs text[] NOT NULL,
    config_digest text NOT NULL,
    started_at timestamp with time zone DEFAULT now() NOT NULL,
    seen_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT workers_id_check CHECK (((length(id) >= 1) AND (length(id) <= 200)))
);

ALTER TABLE ONLY public.demo_side_effects ALTER COLUMN id SET DEFAULT nextval('public.demo_side_effects_id_seq'::regclass);

ALTER TABLE ONLY public.interception_records ALTER COLUMN id SET DEFAULT nextval('public.interception_records_id_seq'::regclass);

ALTER TABLE ONLY public.notification_attempts ALTER COLUMN id SET DEFAULT nextval('public.notification_attempts_id_seq'::regclass);

ALTER TABLE ONLY public.notification_deliveries ALTER COLUMN id SET DEFAULT nextval('public.notification_deliveries_id_seq'::regclass);

ALTER TABLE ONLY public.resume_queue ALTER COLUMN id SET DEFAULT nextval('public.resume_queue_id_seq'::regclass);

ALTER TABLE ONLY public.run_events ALTER COLUMN id SET DEFAULT nextval('public.run_events_id_seq'::regclass);

ALTER TABLE ONLY public.run_notification_deliveries ALTER COLUMN id SET DEFAULT nextval('public.run_notification_deliveries_id_seq'::regclass);

ALTER TABLE ONLY public.sign_in_failures ALTER COLUMN id SET DEFAULT nextval('public.sign_in_failures_id_seq'::regclass);

ALTER TABLE ONLY public.tool_executions ALTER COLUMN id SET DEFAULT nextval('public.tool_executions_id_seq'::regclass);

ALTER TABLE ONLY public.alembic_version
    ADD CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num);

ALTER TABLE ONLY public.api_tokens
    ADD CONSTRAINT api_tokens_digest_key UNIQUE (digest);

ALTER TABLE ONLY public.api_tokens
    ADD CONSTRAINT api_tokens_pkey PRIMARY KEY (name);

ALTER TABLE ONLY public.approval_requests
    ADD CONSTRAINT approval_requests_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.approval_requests
    ADD CONSTRAINT approval_requests_run_id_call_id_identity_key UNIQUE (run_id, call_id, identity);

ALTER TABLE ONLY public.approval_votes
    ADD CONSTRAINT approval_votes_pkey PRIMARY KEY (request_id, person);

ALTER TABLE ONLY public.audit_chain_head
    ADD CONSTRAINT audit_chain_head_pkey PRIMARY KEY (singleton);

ALTER TABLE ONLY public.audit_events
    ADD CONSTRAINT audit_events_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.decisions
    ADD CONSTRAINT decisions_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.decisions
    ADD CONSTRAINT decisions_request_id_key UNIQUE (request_id);

ALTER TABLE ONLY public.demo_side_effects
    ADD CONSTRAINT demo_side_effects_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.interception_records
    ADD CONSTRAINT interception_records_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.langgraph_threads
    ADD CONSTRAINT langgraph_threads_pkey PRIMARY KEY (thread_id);

ALTER TABLE ONLY public.notification_attempts
    ADD CONSTRAINT notification_attempts_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.notification_deliveries
    ADD CONSTRAINT notification_deliveries_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.notification_deliveries
    ADD CONSTRAINT notification_deliveries_request_id_channel_escalation_level_key UNIQUE (request_id, channel, escalation_level);

ALTER TABLE ONLY public.openai_run_states
    ADD CONSTRAINT openai_run_states_pkey PRIMARY KEY (run_id);

ALTER TABLE ONLY public.openai_session_items
    ADD CONSTRAINT openai_session_items_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.resume_queue
    ADD CONSTRAINT resume_queue_decision_id_key UNIQUE (decision_id);

ALTER TABLE ONLY public.resume_queue
    ADD CONSTRAINT resume_queue_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.run_events
    ADD CONSTRAINT run_events_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.run_notification_deliveries
    ADD CONSTRAINT run_notification_deliveries_event_id_channel_key UNIQUE (event_id, channel);

ALTER TABLE ONLY public.run_notification_deliveries
    ADD CONSTRAINT run_notification_deliveries_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.runs
    ADD CONSTRAINT runs_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.sign_in_failures
    ADD CONSTRAINT sign_in_failures_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.slack_messages
    ADD CONSTRAINT slack_messages_channel_ts_key UNIQUE (channel, ts);

ALTER TABLE ONLY public.slack_messages
    ADD CONSTRAINT slack_messages_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.slack_messages
    ADD CONSTRAINT slack_messages_request_id_escalation_level_target_key UNIQUE (request_id, escalation_level, target);

ALTER TABLE ONLY public.slack_oidc_users
    ADD CONSTRAINT slack_oidc_users_pkey PRIMARY KEY (slack_user);

ALTER TABLE ONLY public.slack_oidc_users
    ADD CONSTRAINT slack_oidc_users_principal_key UNIQUE (principal);

ALTER TABLE ONLY public.slack_users
    ADD CONSTRAINT slack_users_account_key UNIQUE (account);

ALTER TABLE ONLY public.slack_users
    ADD CONSTRAINT slack_users_pkey PRIMARY KEY (slack_user);

ALTER TABLE ONLY public.standing_grant_uses
    ADD CONSTRAINT standing_grant_uses_pkey PRIMARY KEY (run_id, call_id, identity);

ALTER TABLE ONLY public.standing_grants
    ADD CONSTRAINT standing_grants_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.standing_grants
    ADD CONSTRAINT standing_grants_request_id_key UNIQUE (request_id);

ALTER TABLE ONLY public.tool_executions
    ADD CONSTRAINT tool_executions_idempotency_key_key UNIQUE (idempotency_key);

ALTER TABLE ONLY public.tool_executions
    ADD CONSTRAINT tool_executions_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.tool_executions
    ADD CONSTRAINT tool_executions_run_id_call_id_key UNIQUE (run_id, call_id);

ALTER TABLE ONLY public.users
    ADD CONSTRAINT users_pkey PRIMARY KEY (name);

ALTER TABLE ONLY public.web_sessions
    ADD CONSTRAINT web_sessions_pkey PRIMARY KEY (id_hash);

ALTER TABLE ONLY public.workers
    ADD CONSTRAINT workers_pkey PRIMARY KEY (id);

CREATE INDEX approval_requests_created_idx ON public.approval_requests USING btree (created_at);

CREATE INDEX approval_requests_decided_v2 ON public.approval_requests USING btree (decided_at, id) WHERE (decided_at IS NOT NULL);

CREATE UNIQUE INDEX approval_requests_one_pending ON public.approval_requests USING btree (run_id, call_id) WHERE (status = 'pending'::text);

CREATE INDEX approval_requests_pending_approvers ON public.approval_requests USING gin (approvers) WHERE (status = 'pending'::text);

CREATE INDEX approval_requests_pending_deadline_v2 ON public.approval_requests USING btree (expires_at, id) WHERE (status = 'pending'::text);

CREATE INDEX approval_requests_pending_groups ON public.approval_requests USING btree (approvers) WHERE (status = 'pending'::text);

CREATE INDEX approval_requests_pending_newest ON public.approval_requests USING btree (created_at, id) WHERE (status = 'pending'::text);

CREATE INDEX approval_requests_status_idx ON public.approval_requests USING btree (status, created_at);

CREATE INDEX audit_events_at_idx ON public.audit_events USING btree (at);

CREATE INDEX audit_events_facts_v1 ON public.audit_events USING btree (run_id, call_id, kind) WHERE (kind = ANY (ARRAY['request.decided'::text, 'request.expired'::text, 'request.voted'::text, 'resume.queued'::text, 'tool.started'::text, 'tool.succeeded'::text, 'tool.failed'::text, 'tool.outcome_unknown'::text, 'tool.reconciled'::text, 'tool.refused'::text]));

CREATE INDEX audit_events_run_idx ON public.audit_events USING btree (run_id, id);

CREATE INDEX decisions_run_idx ON public.decisions USING btree (run_id);

CREATE INDEX interception_records_run_idx ON public.interception_records USING btree (run_id, sequence);

CREATE INDEX langgraph_threads_creator ON public.langgraph_threads USING btree (created_by, created_at);

CREATE INDEX langgraph_threads_metadata ON public.langgraph_threads USING gin (metadata jsonb_path_ops);

CREATE INDEX notification_attempts_delivery_idx ON public.notification_attempts USING btree (delivery_id, attempt);

CREATE INDEX notification_deliveries_due_idx ON public.notification_deliveries USING btree (next_attempt_at) WHERE (status = ANY (ARRAY['sending'::text, 'retry'::text]));

CREATE INDEX openai_session_items_run_idx ON public.openai_session_items USING btree (run_id);

CREATE INDEX openai_session_items_thread_idx ON public.openai_session_items USING btree (thread_id, id);

CREATE INDEX resume_queue_queued_idx ON public.resume_queue USING btree (id) WHERE (status = 'queued'::text);

CREATE INDEX resume_queue_request_idx ON public.resume_queue USING btree (request_id);

CREATE INDEX resume_queue_run_idx ON public.resume_queue USING btree (run_id);

CREATE INDEX run_events_run_idx ON public.run_events USING btree (run_id, id);

CREATE INDEX run_events_status_idx ON public.run_events USING btree (at) WHERE (kind = 'status'::text);

CREATE INDEX run_notification_deliveries_due_idx ON public.run_notification_deliveries USING btree (next_attempt_at) WHERE (status = ANY (ARRAY['sending'::text, 'retry'::text]));

CREATE INDEX runs_newest ON public.runs USING btree (created_at, id);

CREATE INDEX runs_thread_idx ON public.runs USING btree (thread_id);

CREATE INDEX sign_in_failures_account ON public.sign_in_failures USING btree (account, at);

CREATE INDEX sign_in_failures_at ON public.sign_in_failures USING btree (at);

CREATE INDEX slack_messages_owed_idx ON public.slack_messages USING btree (next_attempt_at) WHERE (status = ANY (ARRAY['posted'::text, 'updating'::text, 'retry'::text]));

CREATE INDEX standing_grant_uses_grant_idx ON public.standing_grant_uses USING btree (grant_id);

CREATE INDEX standing_grants_live_idx ON public.standing_grants USING btree (run_id, tool, rule) WHERE (revoked_at IS NULL);

CREATE INDEX web_sessions_account ON public.web_sessions USING btree (account) WHERE (account IS NOT NULL);

CREATE INDEX web_sessions_expires ON public.web_sessions USING btree (expires_at);

CREATE INDEX web_sessions_principal ON public.web_sessions USING btree (principal);

CREATE TRIGGER approval_requests_changed_event_v1 AFTER UPDATE OF status, approvers, escalation_level ON public.approval_requests FOR EACH ROW WHEN (((old.status IS DISTINCT FROM new.status) OR (old.approvers IS DISTINCT FROM new.approvers) OR (old.escalation_level IS DISTINCT FROM new.escalation_level))) EXECUTE FUNCTION public.approvals_request_event_v1();

CREATE TRIGGER approval_requests_opened_event_v1 AFTER INSERT ON public.approval_requests FOR EACH ROW EXECUTE FUNCTION public.approvals_request_event_v1();

CREATE TRIGGER approval_requests_person_v1 BEFORE INSERT OR UPDATE OF requested_by, requested_by_person ON public.approval_requests FOR EACH ROW EXECUTE FUNCTION public.approvals_request_person_v1();

CREATE TRIGGER audit_chain_head_guard_v1 BEFORE INSERT OR DELETE OR UPDATE OR TRUNCATE ON public.audit_chain_head FOR EACH STATEMENT EXECUTE FUNCTION public.approvals_audit_refuse_v1();

CREATE TRIGGER audit_events_append_only_v1 BEFORE DELETE OR UPDATE OR TRUNCATE ON public.audit_events FOR EACH STATEMENT EXECUTE FUNCTION public.approvals_audit_refuse_v1();

CREATE TRIGGER audit_events_chain_v1 BEFORE INSERT ON public.audit_events FOR EACH ROW EXECUTE FUNCTION public.approvals_audit_chain_v1();

CREATE TRIGGER audit_events_states_fact_v1 BEFORE INSERT ON public.audit_events FOR EACH ROW EXECUTE FUNCTION public.approvals_audit_states_fact_v1();

CREATE TRIGGER resume_queue_resuming_event_v1 AFTER INSERT ON public.resume_queue FOR EACH ROW EXECUTE FUNCTION public.approvals_run_resuming_event_v1();

CREATE TRIGGER runs_cancelled_is_final_v1 BEFORE UPDATE OF status ON public.runs FOR EACH ROW WHEN (((old.status = 'cancelled'::text) AND (new.status IS DISTINCT FROM 'cancelled'::text))) EXECUTE FUNCTION public.approvals_cancelled_is_final_v1();

CREATE TRIGGER runs_status_event_v1 AFTER INSERT OR UPDATE OF status ON public.runs FOR EACH ROW EXECUTE FUNCTION public.approvals_run_status_event_v1();

CREATE TRIGGER users_end_sessions_v1 AFTER UPDATE OF disabled, groups, password_hash ON public.users FOR EACH ROW WHEN (((old.disabled IS DISTINCT FROM new.disabled) OR (old.groups IS DISTINCT FROM new.groups) OR (old.password_hash IS DISTINCT FROM new.password_hash))) EXECUTE FUNCTION public.approvals_end_account_sessions_v1();

CREATE TRIGGER web_sessions_ended_v1 AFTER DELETE ON public.web_sessions FOR EACH ROW EXECUTE FUNCTION public.approvals_session_ended_v1();

ALTER TABLE ONLY public.api_tokens
    ADD CONSTRAINT api_tokens_owner_fkey FOREIGN KEY (owner) REFERENCES public.users(name);

ALTER TABLE ONLY public.approval_requests
    ADD CONSTRAINT approval_requests_run_id_fkey FOREIGN KEY (run_id) REFERENCES public.runs(id);

ALTER TABLE ONLY public.approval_votes
    ADD CONSTRAINT approval_votes_request_id_fkey FOREIGN KEY (request_id) REFERENCES public.approval_requests(id);

ALTER TABLE ONLY public.decisions
    ADD CONSTRAINT decisions_request_id_fkey FOREIGN KEY (request_id) REFERENCES public.approval_requests(id);

ALTER TABLE ONLY public.decisions
    ADD CONSTRAINT decisions_run_id_fkey FOREIGN KEY (run_id) REFERENCES public.runs(id);

ALTER TABLE ONLY public.interception_records
    ADD CONSTRAINT interception_records_run_id_fkey FOREIGN KEY (run_id) REFERENCES public.runs(id);

ALTER TABLE ONLY public.notification_attempts
    ADD CONSTRAINT notification_attempts_delivery_id_fkey FOREIGN KEY (delivery_id) REFERENCES public.notification_deliveries(id);

ALTER TABLE ONLY public.notification_deliveries
    ADD CONSTRAINT notification_deliveries_request_id_fkey FOREIGN KEY (request_id) REFERENCES public.approval_requests(id);

ALTER TABLE ONLY public.openai_run_states
    ADD CONSTRAINT openai_run_states_run_id_fkey FOREIGN KEY (run_id) REFERENCES public.runs(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.openai_session_items
    ADD CONSTRAINT openai_session_items_run_id_fkey FOREIGN KEY (run_id) REFERENCES public.runs(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.resume_queue
    ADD CONSTRAINT resume_queue_decision_id_fkey FOREIGN KEY (decision_id) REFERENCES public.decisions(id);

ALTER TABLE ONLY public.resume_queue
    ADD CONSTRAINT resume_queue_request_id_fkey FOREIGN KEY (request_id) REFERENCES public.approval_requests(id);

ALTER TABLE ONLY public.resume_queue
    ADD CONSTRAINT resume_queue_run_id_fkey FOREIGN KEY (run_id) REFERENCES public.runs(id);

ALTER TABLE ONLY public.run_events
    ADD CONSTRAINT run_events_run_id_fkey FOREIGN KEY (run_id) REFERENCES public.runs(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.run_notification_deliveries
    ADD CONSTRAINT run_notification_deliveries_event_id_fkey FOREIGN KEY (event_id) REFERENCES public.run_events(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.slack_messages
    ADD CONSTRAINT slack_messages_request_id_fkey FOREIGN KEY (request_id) REFERENCES public.approval_requests(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.slack_users
    ADD CONSTRAINT slack_users_account_fkey FOREIGN KEY (account) REFERENCES public.users(name) ON DELETE CASCADE;

ALTER TABLE ONLY public.standing_grant_uses
    ADD CONSTRAINT standing_grant_uses_grant_id_fkey FOREIGN KEY (grant_id) REFERENCES public.standing_grants(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.standing_grant_uses
    ADD CONSTRAINT standing_grant_uses_run_id_fkey FOREIGN KEY (run_id) REFERENCES public.runs(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.standing_grants
    ADD CONSTRAINT standing_grants_request_id_fkey FOREIGN KEY (request_id) REFERENCES public.approval_requests(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.standing_grants
    ADD CONSTRAINT standing_grants_run_id_fkey FOREIGN KEY (run_id) REFERENCES public.runs(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.tool_executions
    ADD CONSTRAINT tool_executions_run_id_fkey FOREIGN KEY (run_id) REFERENCES public.runs(id);

ALTER TABLE ONLY public.web_sessions
    ADD CONSTRAINT web_sessions_account_fkey FOREIGN KEY (account) REFERENCES public.users(name) ON DELETE CASCADE;
