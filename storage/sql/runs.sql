-- The statements of storage/runs.py: runs, their threads' locks, and the tool-execution ledger
-- (PgRuns, PgToolLedger).
--
-- One file per storage module, beside it: what storage/runs.py runs is here, so a reader of a
-- repository opens one short file (the engine's statements were one file of 1,500 lines, which a
-- reader following one approval opened again at every step). The names are one namespace all the
-- same; storage/queries.py says how the files are read and written, and
-- tests/unit/test_queries.py checks them.

-- ==== runs ====

-- name: create_run
-- A new run with its run.started audit entry (its thread's lock is already held: thread_lock).
WITH run AS (
    INSERT INTO runs (id, thread_id, graph, status, started_by, input)
    VALUES (%(id)s, %(thread_id)s, %(graph)s, 'running', %(started_by)s, %(input)s)
    RETURNING *
), audit AS (
    INSERT INTO audit_events (kind, run_id, principal, data)
    SELECT 'run.started', run.id, run.started_by, jsonb_build_object('graph', run.graph) FROM run
)
SELECT * FROM run;

-- name: lock_and_create_run
-- A run on a fresh thread: created, and its thread lock taken on this session, in one statement.
WITH run AS (
    INSERT INTO runs (id, thread_id, graph, status, started_by, input)
    VALUES (%(id)s, %(thread_id)s, %(graph)s, 'running', %(started_by)s, %(input)s)
    RETURNING *
), audit AS (
    INSERT INTO audit_events (kind, run_id, principal, data)
    SELECT 'run.started', run.id, run.started_by, jsonb_build_object('graph', run.graph) FROM run
)
SELECT run.*, pg_advisory_lock(approvals_thread_lock_key_v1(run.thread_id))::text AS locked
  FROM run;

-- name: get_run
-- One run by id, with the person who started it (approvals_person_of_v1: a token's owner).
SELECT r.*, approvals_person_of_v1(r.started_by) AS started_by_person
  FROM runs r WHERE r.id = %(id)s;

-- name: latest_run_on_thread
-- The newest run on a thread (the one new input continues), with the person who started it.
SELECT r.*, approvals_person_of_v1(r.started_by) AS started_by_person
  FROM runs r WHERE r.thread_id = %(thread_id)s ORDER BY r.created_at DESC, r.id DESC LIMIT 1;

-- name: runs_page
-- One page of the runs a viewer may see, newest first, after a keyset position (created_at,
-- id): ApproverRules.may_see_run in SQL (an operator sees every run; anyone else those it
-- started and those with a request it may see, of any status; see the request lists' note),
-- optionally of one status and/or graph. Walks runs_newest (migration 0021), probing each
-- run's requests by the (run_id, call_id, identity) key: a LATERAL with LIMIT 1, so that the
-- probe stops at the first visible request and is never planned as a scan of every request.
-- "Started" counts the person, as separation of duties does: a run started with a person's
-- token is theirs in the web app too, and the other way round (approvals_person_of_v1).
SELECT r.*, approvals_person_of_v1(r.started_by) AS started_by_person FROM runs r
  LEFT JOIN LATERAL (
        SELECT true AS visible FROM approval_requests a
         WHERE NOT %(operator)s AND a.run_id = r.id
           AND (a.approvers && %(groups)s::text[]
                OR (%(default_member)s AND a.approvers = '{}'))
         LIMIT 1) v ON true
 WHERE (%(operator)s OR r.started_by = %(principal)s
        OR approvals_person_of_v1(r.started_by) = %(person)s OR v.visible)
   AND (%(status)s::text IS NULL OR r.status = %(status)s)
   AND (%(graph)s::text IS NULL OR r.graph = %(graph)s)
   AND (%(after_key)s::timestamptz IS NULL
        OR (r.created_at, r.id) < (%(after_key)s::timestamptz, %(after_id)s::uuid))
 ORDER BY r.created_at DESC, r.id DESC
 LIMIT %(limit)s;

-- name: settle_run_and_unlock
-- Settle a run and release the thread lock this session took for it, with the step's
-- interception records, node updates and audit events (approvals_settle_step_v4: `settled` is
-- 'settled', or 'refused' when the run had ended: cancelled, or settled before).
-- The session's lock goes in this statement, before its commit: the same key's transaction
-- lock, taken first, holds the thread until the settlement is committed, or a waiting claim or
-- step would read the run as it was before it.
WITH held AS MATERIALIZED (
    SELECT pg_advisory_xact_lock(approvals_thread_lock_key_v1(%(thread_id)s))
), settled AS MATERIALIZED (
    SELECT approvals_settle_step_v4(%(run_id)s, %(records)s::jsonb, %(status)s, %(error)s,
                                    %(answer)s, %(request_ids)s::uuid[],
                                    %(interrupt_ids)s::text[], %(events)s::jsonb) AS settled
      FROM held
)
SELECT settled, pg_advisory_unlock(approvals_thread_lock_key_v1(%(thread_id)s)) AS unlocked
  FROM settled;

-- ==== a thread's lock, held around a step ====

-- name: thread_lock
-- Take a thread's lock on this session (held until thread_unlock or the connection ends).
SELECT pg_advisory_lock(approvals_thread_lock_key_v1(%(thread_id)s))::text AS locked;

-- name: thread_unlock
-- Release the thread lock this session took (thread_lock, lock_and_create_run).
SELECT pg_advisory_unlock(approvals_thread_lock_key_v1(%(thread_id)s)) AS unlocked;

-- ==== tool ledger (PgToolLedger) ====

-- name: begin_execution
-- Claim the single execution of (run, call); returns the row and whether this caller owns it.
-- An existing row of other arguments is another call reusing the call id: the caller refuses
-- it, and the refusal is audited here (the existing row is read from the statement's snapshot,
-- which the insert that did nothing leaves as it was). No row: a racing begin committed the
-- row after that snapshot was taken; the caller runs the statement again, which sees it.
-- Every unique key arbitrates, not only (run, call): a racing insert past the conflict check
-- would otherwise raise a unique violation on the idempotency key (derived from the same pair).
WITH started AS (
    INSERT INTO tool_executions (run_id, call_id, tool, idempotency_key, args_identity, status)
    VALUES (%(run_id)s, %(call_id)s, %(tool)s, %(key)s, %(args_identity)s, 'started')
    ON CONFLICT DO NOTHING
    RETURNING *
), audit AS (
    INSERT INTO audit_events (kind, run_id, call_id, tool, data)
    SELECT 'tool.started', s.run_id, s.call_id, s.tool,
           jsonb_build_object('args_identity', s.args_identity)
      FROM started s
), reused AS (
    INSERT INTO audit_events (kind, run_id, call_id, tool, data)
    SELECT 'tool.refused', t.run_id, t.call_id, %(tool)s,
           jsonb_build_object('reason', 'call_id_reused',
                              'args_identity', %(args_identity)s::text,
                              'executed_identity', t.args_identity)
      FROM tool_executions t
     WHERE t.run_id = %(run_id)s AND t.call_id = %(call_id)s
       AND t.args_identity <> %(args_identity)s AND NOT EXISTS (SELECT 1 FROM started)
)
SELECT *, true AS owned FROM started
UNION ALL
SELECT *, false AS owned FROM tool_executions
 WHERE run_id = %(run_id)s AND call_id = %(call_id)s AND NOT EXISTS (SELECT 1 FROM started);

-- name: finish_execution
-- Close a started execution (succeeded, failed, or outcome_unknown after a crash).
WITH finished AS (
    UPDATE tool_executions
       SET status = %(status)s, result = %(result)s, error = %(error)s, finished_at = now(),
           state_update_type = %(state_update_type)s, state_update = %(state_update)s
     WHERE run_id = %(run_id)s AND call_id = %(call_id)s AND status = 'started'
    RETURNING *
), audit AS (
    INSERT INTO audit_events (kind, run_id, call_id, tool, data)
    SELECT 'tool.' || f.status, f.run_id, f.call_id, f.tool,
           jsonb_build_object('error', left(f.error, 500))
      FROM finished f
)
SELECT * FROM finished
UNION ALL
SELECT * FROM tool_executions
 WHERE run_id = %(run_id)s AND call_id = %(call_id)s AND NOT EXISTS (SELECT 1 FROM finished);

-- name: reconcile_execution
-- What an operator found about an execution whose outcome was unknown (the tool's state update
-- is unknown with it: none is recorded).
WITH reconciled AS (
    UPDATE tool_executions
       SET status = %(status)s, result = %(result)s, error = %(error)s, finished_at = now(),
           state_update_type = %(state_update_type)s, state_update = %(state_update)s
     WHERE run_id = %(run_id)s AND call_id = %(call_id)s AND status = 'outcome_unknown'
    RETURNING *
), audit AS (
    INSERT INTO audit_events (kind, run_id, call_id, data)
    SELECT 'tool.reconciled', r.run_id, r.call_id,
           jsonb_build_object('status', r.status, 'error', r.error)
      FROM reconciled r
)
SELECT * FROM reconciled
UNION ALL
SELECT * FROM tool_executions
 WHERE run_id = %(run_id)s AND call_id = %(call_id)s AND NOT EXISTS (SELECT 1 FROM reconciled);

-- name: unknown_outcomes
-- Executions whose outcome is unknown, with the reconciliation request waiting for an operator.
SELECT t.run_id, t.call_id, t.tool, t.started_at, a.id AS request_id
  FROM tool_executions t
  LEFT JOIN approval_requests a
    ON a.run_id = t.run_id AND a.call_id = t.call_id AND a.status = 'pending'
   AND a.tool LIKE '@reconcile:%%'
 WHERE t.status = 'outcome_unknown'
 ORDER BY t.started_at;

-- name: run_executions
-- A run's tool executions, in the order they started.
SELECT * FROM tool_executions WHERE run_id = %(run_id)s ORDER BY id;
