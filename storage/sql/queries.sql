-- All SQL the engine runs against its own tables. One statement per `-- name: x` header, whose
-- next lines say what it does; `-- ==== ... ====` banners group them by table or use case (and
-- name the module that runs them). tests/unit/test_queries.py checks both, and that every name
-- the storage modules use is here and every query here is used.
--
-- The SQL functions these call (approvals_..._v1) are defined by the migrations; the current
-- schema, functions and triggers included, is in schema.sql next to this file.
--
-- Writes that belong together are one statement (data-modifying CTEs): one statement is one
-- transaction in autocommit mode, so each is atomic, and the audit entry of a change is written
-- by the statement that makes the change.

-- ==== runs and their threads' locks (storage/runs.py) ====

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

-- ==== approval requests (storage/requests.py) ====

-- name: open_request
-- Record a pending call if it is new (superseding an earlier request for the same call with
-- another identity) and return the request for (run, call, identity) with its decision.
WITH superseded AS (
    UPDATE approval_requests
       SET status = 'superseded', decided_at = now()
     WHERE run_id = %(run_id)s AND call_id = %(call_id)s AND status = 'pending'
       AND identity <> %(identity)s
       AND NOT EXISTS (
           SELECT 1 FROM approval_requests
            WHERE run_id = %(run_id)s AND call_id = %(call_id)s AND identity = %(identity)s)
    RETURNING id, run_id, call_id, tool, state_version
), created AS (
    INSERT INTO approval_requests
        (id, run_id, thread_id, call_id, tool, shown, args_schema, identity, reason,
         state_version, requested_by, expires_at, approvers, allow_edit, allowed_decisions,
         quorum, on_expiry, escalation_chain, proposed_by, shown_digest)
    SELECT %(id)s, %(run_id)s, %(thread_id)s, %(call_id)s, %(tool)s, %(shown)s,
           %(args_schema)s, %(identity)s, %(reason)s, %(state_version)s, %(requested_by)s,
           %(expires_at)s, %(approvers)s, %(allow_edit)s, %(allowed_decisions)s, %(quorum)s,
           %(on_expiry)s, %(escalation_chain)s,
           -- The editor as a person: their token and their web account are one editor.
           COALESCE(approvals_person_of_v1(%(proposed_by)s), %(proposed_by)s), %(shown_digest)s
     WHERE NOT EXISTS (
           SELECT 1 FROM approval_requests
            WHERE run_id = %(run_id)s AND call_id = %(call_id)s AND identity = %(identity)s)
       -- After the supersession: the call's pending request is superseded before this insert
       -- meets it in the one-pending-request index (which would make it do nothing).
       AND (SELECT count(*) FROM superseded) >= 0
    ON CONFLICT DO NOTHING
    RETURNING *
), audit AS (
    INSERT INTO audit_events
        (kind, run_id, request_id, call_id, tool, state_version, principal, data)
    SELECT 'request.created', c.run_id, c.id, c.call_id, c.tool, c.state_version,
           c.requested_by, jsonb_build_object('identity', c.identity)
      FROM created c
    UNION ALL
    SELECT 'request.superseded', s.run_id, s.id, s.call_id, s.tool, s.state_version, NULL,
           jsonb_build_object('by_identity', %(identity)s::text)
      FROM superseded s
)
SELECT r.*, d.id AS d_id, d.kind AS d_kind, d.principal AS d_principal, d.reason AS d_reason,
       d.args AS d_args, d.args_identity AS d_args_identity, d.decided_at AS d_decided_at
  FROM (SELECT * FROM created
        UNION ALL
        SELECT * FROM approval_requests
         WHERE run_id = %(run_id)s AND call_id = %(call_id)s AND identity = %(identity)s) r
  LEFT JOIN decisions d ON d.request_id = r.id;

-- name: get_request
-- One approval request by id.
SELECT * FROM approval_requests WHERE id = %(id)s;

-- name: list_requests
-- Requests, newest first, all or those in one status.
SELECT * FROM approval_requests
 WHERE (%(status)s::text IS NULL OR status = %(status)s)
 ORDER BY created_at DESC, id
 LIMIT %(limit)s;

-- name: run_requests
-- A run's requests, oldest first.
SELECT * FROM approval_requests WHERE run_id = %(run_id)s ORDER BY created_at, id;

-- Lists of requests (storage/requests.py: pending_page, decided_page, pending_counts) select
-- what their viewer may see in SQL, as approvals/authz.py's ApproverRules.may_see says: an
-- operator (%(operator)s) sees every request; anyone else those whose approver groups overlap
-- its own (%(groups)s), or that name none while it is in the default approver group
-- (%(default_member)s). %(decidable)s narrows a list to what it may also decide (true) or may
-- only see (false), as may_decide says: a person (not a service token) in the request's groups,
-- neither the run's starter (as principal or as person) nor the editor of its arguments. The
-- rules in Python stay the authority when a request is decided. Every filter is optional
-- (NULL: any). Pages are keysets: the rows strictly after (%(after_key)s, %(after_id)s) in the
-- list's order. approval_requests_pending_* (migration 0021) make each page read about as many
-- rows as it returns: the order's index, or the approver groups' GIN for a small group.

-- name: pending_by_deadline
-- One page of the pending requests a viewer may see, soonest deadline first (the inbox).
SELECT a.* FROM approval_requests a
 WHERE a.status = 'pending'
   AND (%(operator)s OR a.approvers && %(groups)s::text[]
        OR (%(default_member)s AND a.approvers = '{}'))
   AND (%(decidable)s::boolean IS NULL OR %(decidable)s = (
        %(person)s::text IS NOT NULL
        AND (a.approvers && %(groups)s::text[] OR (%(default_member)s AND a.approvers = '{}'))
        AND a.requested_by <> %(principal)s
        AND a.requested_by_person IS DISTINCT FROM %(person)s
        AND (a.proposed_by IS NULL OR a.proposed_by NOT IN (%(principal)s, %(person)s))))
   AND (%(tool)s::text IS NULL OR a.tool = %(tool)s)
   AND (%(group)s::text IS NULL OR a.approvers @> ARRAY[%(group)s::text]
        OR (%(group_is_default)s AND a.approvers = '{}'))
   AND (%(run_id)s::uuid IS NULL OR a.run_id = %(run_id)s::uuid)
   AND (%(starter)s::text IS NULL OR a.requested_by = %(starter)s)
   AND (%(created_after)s::timestamptz IS NULL OR a.created_at >= %(created_after)s)
   AND (%(created_before)s::timestamptz IS NULL OR a.created_at < %(created_before)s)
   AND (%(after_key)s::timestamptz IS NULL
        OR (a.expires_at, a.id) > (%(after_key)s::timestamptz, %(after_id)s::uuid))
 ORDER BY a.expires_at, a.id
 LIMIT %(limit)s;

-- name: pending_newest
-- One page of the pending requests a viewer may see, newest first.
SELECT a.* FROM approval_requests a
 WHERE a.status = 'pending'
   AND (%(operator)s OR a.approvers && %(groups)s::text[]
        OR (%(default_member)s AND a.approvers = '{}'))
   AND (%(decidable)s::boolean IS NULL OR %(decidable)s = (
        %(person)s::text IS NOT NULL
        AND (a.approvers && %(groups)s::text[] OR (%(default_member)s AND a.approvers = '{}'))
        AND a.requested_by <> %(principal)s
        AND a.requested_by_person IS DISTINCT FROM %(person)s
        AND (a.proposed_by IS NULL OR a.proposed_by NOT IN (%(principal)s, %(person)s))))
   AND (%(tool)s::text IS NULL OR a.tool = %(tool)s)
   AND (%(group)s::text IS NULL OR a.approvers @> ARRAY[%(group)s::text]
        OR (%(group_is_default)s AND a.approvers = '{}'))
   AND (%(run_id)s::uuid IS NULL OR a.run_id = %(run_id)s::uuid)
   AND (%(starter)s::text IS NULL OR a.requested_by = %(starter)s)
   AND (%(created_after)s::timestamptz IS NULL OR a.created_at >= %(created_after)s)
   AND (%(created_before)s::timestamptz IS NULL OR a.created_at < %(created_before)s)
   AND (%(after_key)s::timestamptz IS NULL
        OR (a.created_at, a.id) < (%(after_key)s::timestamptz, %(after_id)s::uuid))
 ORDER BY a.created_at DESC, a.id DESC
 LIMIT %(limit)s;

-- name: pending_counts
-- How many pending requests a viewer may see, per approver group that may decide them (a
-- request naming none counts for the default group; one naming several counts for each) and
-- in all: one GROUP BY over approval_requests_pending_groups, then per group.
WITH combos AS (
    SELECT a.approvers, count(*) AS n
      FROM approval_requests a
     WHERE a.status = 'pending'
       AND (%(operator)s OR a.approvers && %(groups)s::text[]
            OR (%(default_member)s AND a.approvers = '{}'))
     GROUP BY a.approvers
)
SELECT g.name AS approver_group, sum(c.n)::bigint AS n,
       (SELECT sum(n) FROM combos)::bigint AS total
  FROM combos c,
       unnest(CASE WHEN cardinality(c.approvers) = 0 THEN ARRAY[%(default_group)s::text]
                   ELSE c.approvers END) AS g(name)
 GROUP BY g.name
 ORDER BY g.name;

-- name: decided_page
-- One page of the decided (or expired, superseded, cancelled) requests a viewer may see,
-- newest decision first, with who decided what and what happened after (the history). The
-- page is chosen first, then only its rows are joined to their decision, run and execution.
SELECT a.*, d.kind AS decision_kind, d.principal AS decision_principal,
       d.reason AS decision_reason, r.status AS run_status, t.status AS execution_status
  FROM (SELECT * FROM approval_requests a
         WHERE a.status <> 'pending' AND a.decided_at IS NOT NULL
           AND (%(operator)s OR a.approvers && %(groups)s::text[]
                OR (%(default_member)s AND a.approvers = '{}'))
           AND (%(tool)s::text IS NULL OR a.tool = %(tool)s)
           AND (%(group)s::text IS NULL OR a.approvers @> ARRAY[%(group)s::text]
                OR (%(group_is_default)s AND a.approvers = '{}'))
           AND (%(run_id)s::uuid IS NULL OR a.run_id = %(run_id)s::uuid)
           AND (%(starter)s::text IS NULL OR a.requested_by = %(starter)s)
           AND (%(created_after)s::timestamptz IS NULL OR a.created_at >= %(created_after)s)
           AND (%(created_before)s::timestamptz IS NULL OR a.created_at < %(created_before)s)
           AND (%(after_key)s::timestamptz IS NULL
                OR (a.decided_at, a.id) < (%(after_key)s::timestamptz, %(after_id)s::uuid))
         ORDER BY a.decided_at DESC, a.id DESC
         LIMIT %(limit)s) a
  LEFT JOIN decisions d ON d.request_id = a.id
  JOIN runs r ON r.id = a.run_id
  LEFT JOIN tool_executions t ON t.run_id = a.run_id AND t.call_id = a.call_id
 ORDER BY a.decided_at DESC, a.id DESC;

-- name: record_shown_tampered
-- A request whose shown copy no longer matches its digest (edited behind the engine's back):
-- one audit event per request, however often it is looked at.
INSERT INTO audit_events (kind, run_id, request_id, call_id, tool, state_version, principal, data)
SELECT 'request.tampered', a.run_id, a.id, a.call_id, a.tool, a.state_version, %(principal)s,
       jsonb_build_object('shown_digest', a.shown_digest, 'found_digest', %(found)s::text)
  FROM approval_requests a
 WHERE a.id = %(id)s
   AND NOT EXISTS (SELECT 1 FROM audit_events e
                    WHERE e.request_id = a.id AND e.kind = 'request.tampered');

-- name: request_decision
-- The decision of a request, if it was decided.
SELECT d.* FROM decisions d WHERE d.request_id = %(id)s;

-- name: requests_version
-- Changes whenever a request is created or decided: what live views poll.
SELECT count(*) AS n, max(GREATEST(created_at, COALESCE(decided_at, created_at)))::text AS at
  FROM approval_requests;

-- ==== decisions and quorum votes (storage/requests.py: PgDecisions) ====

-- name: decide
-- Consume a pending request once: the conditional update, the decision, the audit entry, the
-- resume job and the wake-up, all or nothing.
WITH consumed AS (
    UPDATE approval_requests
       SET status = %(status)s, decided_at = now()
     WHERE id = %(request_id)s AND status = 'pending' AND expires_at > now()
       -- A request that needs several approvers is consumed by a rejection, or by the vote
       -- that completes its quorum (PgDecisions checks that, under the request's row lock).
       AND (quorum <= 1 OR %(kind)s = 'reject' OR %(quorum_met)s)
    RETURNING *
), decision AS (
    INSERT INTO decisions
        (id, request_id, run_id, call_id, kind, principal, reason, args, args_identity)
    SELECT %(id)s, c.id, c.run_id, c.call_id, %(kind)s, %(principal)s, %(reason)s, %(args)s,
           %(args_identity)s
      FROM consumed c
    RETURNING *
), job AS (
    INSERT INTO resume_queue (request_id, decision_id, run_id, thread_id)
    SELECT c.id, d.id, c.run_id, c.thread_id FROM consumed c, decision d
    RETURNING id, run_id
), audit AS (
    INSERT INTO audit_events
        (kind, run_id, request_id, call_id, tool, state_version, principal, data)
    SELECT 'request.decided', c.run_id, c.id, c.call_id, c.tool, c.state_version,
           %(principal)s,
           jsonb_build_object('decision', %(kind)s::text, 'reason', %(reason)s::text,
                              'identity', c.identity, 'args_identity', %(args_identity)s::text)
           -- An operator's override at the console (approvals decide --as) says so, and who.
           || jsonb_strip_nulls(jsonb_build_object('override_by', %(override_by)s::text))
      -- From the decision row, so that it is stored before the event that states it: the
      -- log's trigger refuses a decision event no decision backs (migration 0027).
      FROM consumed c JOIN decision d ON d.request_id = c.id
    UNION ALL
    SELECT 'resume.queued', c.run_id, c.id, c.call_id, c.tool, c.state_version, %(principal)s,
           jsonb_build_object('job', j.id)
      FROM consumed c, job j
), wake AS (
    SELECT pg_notify('approvals_resume', job.run_id::text) AS sent FROM job
)
SELECT d.*, (SELECT count(*) FROM wake) AS woken FROM decision d;

-- name: request_status
-- Whether a request can still be decided: its status, whether it expired, its quorum.
SELECT status, expires_at <= now() AS expired, quorum FROM approval_requests WHERE id = %(id)s;

-- name: lock_request_row
-- The whole request under its row lock: the approver rules are checked against it in the
-- transaction that consumes it, so an escalation cannot change who may decide in between.
SELECT * FROM approval_requests WHERE id = %(id)s FOR UPDATE;

-- name: lock_request
-- A request's row, locked until the transaction ends (votes count under it), with what
-- deciding it needs.
SELECT status, expires_at <= now() AS expired, quorum, run_id, call_id
  FROM approval_requests WHERE id = %(id)s FOR UPDATE;

-- name: vote
-- One approval towards a request's quorum, once per person (approvals_person_of_v1: a person's
-- tokens and web account are one approver), with its audit entry. Returns the voter's person
-- (NULL for a service token, whose vote is not recorded), whether this vote was counted, the
-- approvals counted with it, and the principal the person voted as before, if they did.
-- The (request, person) key refuses the second vote even if two of one person's principals
-- race; PgDecisions also holds the request's row lock.
WITH who AS (
    SELECT approvals_person_of_v1(%(principal)s) AS person
), voted AS (
    INSERT INTO approval_votes (request_id, principal, person)
    SELECT %(request_id)s, %(principal)s, who.person FROM who WHERE who.person IS NOT NULL
    ON CONFLICT DO NOTHING
    RETURNING request_id, person
), audit AS (
    INSERT INTO audit_events (kind, run_id, request_id, call_id, tool, principal, data)
    SELECT 'request.voted', %(run_id)s, v.request_id, %(call_id)s,
           (SELECT tool FROM approval_requests WHERE id = %(request_id)s), %(principal)s,
           jsonb_build_object('approvals',
               (SELECT count(*) FROM approval_votes WHERE request_id = %(request_id)s) + 1,
               'person', v.person)
           || jsonb_strip_nulls(jsonb_build_object('override_by', %(override_by)s::text))
      FROM voted v
)
-- The statement's snapshot does not see the row it inserts: hence "+ counted".
SELECT who.person,
       (SELECT count(*) FROM voted) > 0 AS counted,
       (SELECT count(*) FROM approval_votes WHERE request_id = %(request_id)s)
           + (SELECT count(*) FROM voted) AS approvals,
       (SELECT e.principal FROM approval_votes e
         WHERE e.request_id = %(request_id)s AND e.person = who.person) AS earlier
  FROM who;

-- name: request_votes
-- The approvals counted towards a request's quorum, in the order they came.
SELECT principal, person, at FROM approval_votes WHERE request_id = %(id)s ORDER BY at, principal;

-- name: person_vote
-- The principal a person approved a request as (any of their principals counts), if they did.
SELECT principal FROM approval_votes WHERE request_id = %(id)s AND person = %(person)s;

-- ==== resume queue (storage/queue.py) ====

-- name: claim_job
-- The oldest queued job nobody holds, with its run's graph; the caller's transaction holds the
-- row (FOR UPDATE), then waits for and holds the thread's advisory lock, until it commits or
-- its connection dies.
-- Nothing here may be read for the resume: this statement's snapshot predates the lock
-- (begin_resume reads, after it, what the thread's last holder may have changed).
-- `skip`: graphs this worker set aside (it could not build them lately): their jobs stay
-- queued, for a worker that can, and the ones behind them are claimed meanwhile.
SELECT q.*, r.graph, a.call_id,
       pg_advisory_xact_lock(approvals_thread_lock_key_v1(q.thread_id))::text AS locked
  FROM (SELECT * FROM resume_queue j
         WHERE status = 'queued'
           AND (cardinality(%(skip)s::text[]) = 0
                OR NOT EXISTS (SELECT 1 FROM runs s
                                WHERE s.id = j.run_id AND s.graph = ANY (%(skip)s::text[])))
         ORDER BY id
         LIMIT 1
         FOR UPDATE SKIP LOCKED) q
  JOIN runs r ON r.id = q.run_id
  JOIN approval_requests a ON a.id = q.request_id;

-- name: thread_lock
-- Take a thread's lock on this session (held until thread_unlock or the connection ends).
SELECT pg_advisory_lock(approvals_thread_lock_key_v1(%(thread_id)s))::text AS locked;

-- name: thread_unlock
-- Release the thread lock this session took (thread_lock, lock_and_create_run).
SELECT pg_advisory_unlock(approvals_thread_lock_key_v1(%(thread_id)s)) AS unlocked;

-- name: finish_job
-- Close a claimed job, and end its step (approvals_settle_step_v4: the step's interception
-- records and node updates, the run's settlement when a status is given, their audit events),
-- then write the job's end (resume.finished, .skipped or .failed), after the settlement locked
-- its rows.
-- Returns the settlement's outcome: 'settled', 'refused' (the run had been cancelled) or
-- 'recorded' (no run status given).
WITH job AS (
    UPDATE resume_queue
       SET status = %(status)s, last_error = %(error)s, attempts = attempts + 1,
           finished_at = now()
     WHERE id = %(id)s
    RETURNING *
), settled AS (
    SELECT approvals_settle_step_v4(%(run_id)s, %(records)s::jsonb, %(run_status)s, %(error)s,
                                    %(answer)s, %(request_ids)s::uuid[],
                                    %(interrupt_ids)s::text[], %(events)s::jsonb) AS outcome
), audit AS (
    INSERT INTO audit_events (kind, run_id, request_id, call_id, tool, state_version, data)
    SELECT CASE job.status WHEN 'done' THEN 'resume.finished' ELSE 'resume.' || job.status END,
           job.run_id, job.request_id, r.call_id, r.tool, r.state_version,
           jsonb_build_object('job', job.id, 'error', left(job.last_error, 500),
                              'settled', (SELECT outcome FROM settled) = 'settled')
      FROM job LEFT JOIN approval_requests r ON r.id = job.request_id
     WHERE (SELECT outcome FROM settled) IS NOT NULL
)
SELECT outcome FROM settled;

-- name: record_resume_failed
-- A claimed job's resume failed and left its run as it was (no settlement): when the run still
-- waits, a 'resume_failed' run event says so, and a stream that followed the resume (after its
-- 'resuming' event) closes instead of waiting for a step that will not come. In the claim's
-- transaction, with the job's close.
WITH failed AS (
    INSERT INTO run_events (run_id, kind, data)
    SELECT id, 'resume_failed', jsonb_build_object('status', status)
      FROM runs WHERE id = %(run_id)s AND status = 'waiting'
    RETURNING run_id
)
SELECT count(pg_notify('approvals_run_events', run_id::text)) AS recorded FROM failed;

-- name: queued_jobs
-- How many resume jobs wait for a worker.
SELECT count(*) AS n FROM resume_queue WHERE status = 'queued';

-- ==== tool ledger (storage/runs.py: PgToolLedger) ====

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

-- ==== a run's trail and its resume check (storage/audit.py, storage/checkpoints.py) ====

-- name: run_audit
-- A run's audit events, oldest first.
SELECT * FROM audit_events WHERE run_id = %(run_id)s ORDER BY id;

-- name: begin_resume
-- A resume begins under the thread's lock: its audit event (resume.started, for a queued job),
-- and what it re-reads, in one statement (so one snapshot, taken after the lock was granted):
-- the run's status, starter and input, its trail's next sequence number. The interrupts the
-- thread's latest checkpoint waits on come from LangGraph's own read of that checkpoint, sent
-- in the same round trip (storage.checkpoints.PgResumeChecks). Also the job's request and its
-- decision (columns d_*), as open_request returns them: the resumed call's answer, not read
-- again.
-- The request's columns come first, so that the check's own names win should a column of
-- approval_requests ever share one. Run on a connection of its own, not in the
-- claim's transaction: an audit insert holds the chain's head until its transaction ends, and
-- the claim's lasts the whole step (whose own events would wait for it).
WITH started AS (
    INSERT INTO audit_events (kind, run_id, request_id, call_id, tool, state_version, data)
    SELECT 'resume.started', q.run_id, q.request_id, a.call_id, a.tool, a.state_version,
           jsonb_build_object('job', q.id, 'attempt', q.attempts + 1)
      FROM resume_queue q JOIN approval_requests a ON a.id = q.request_id
     WHERE q.id = %(job)s
)
SELECT a.*, d.id AS d_id, d.kind AS d_kind, d.principal AS d_principal, d.reason AS d_reason,
       d.args AS d_args, d.args_identity AS d_args_identity, d.decided_at AS d_decided_at,
       r.status AS run_status, r.started_by, r.input,
       (SELECT COALESCE(max(i.sequence) + 1, 0) FROM interception_records i
         WHERE i.run_id = %(run_id)s) AS next_sequence
  FROM (SELECT 1) one
  LEFT JOIN runs r ON r.id = %(run_id)s
  LEFT JOIN approval_requests a ON a.id = %(request_id)s
  LEFT JOIN decisions d ON d.request_id = a.id;

-- name: run_interceptions
-- A run's interception records, in the order they happened.
SELECT sequence, session_id, point, decision, reason, interceptor, mode, input_identity,
       enforced_identity, resolved_by, at
  FROM interception_records
 WHERE run_id = %(run_id)s
 ORDER BY sequence, id;

-- ==== local accounts and API tokens (storage/accounts.py) ====

-- name: create_user
-- A new local account with its audit entry; no row when the name is taken.
WITH created AS (
    INSERT INTO users (name, password_hash, groups)
    VALUES (%(name)s, %(password_hash)s, %(groups)s)
    ON CONFLICT DO NOTHING
    RETURNING name, groups, created_at, disabled
), audit AS (
    INSERT INTO audit_events (kind, principal, data)
    SELECT 'account.created', %(by)s, jsonb_build_object('name', c.name, 'groups', c.groups)
      FROM created c
)
SELECT * FROM created;

-- name: user_credentials
-- What signing in checks: a local account's password hash, groups and whether it is disabled.
SELECT password_hash, groups, disabled FROM users WHERE name = %(name)s;

-- name: list_users
-- Every local account, by name (never a password hash).
SELECT name, groups, created_at, disabled FROM users ORDER BY name;

-- name: user_by_name
-- One local account, as list_users shows it; no row when there is none of that name.
SELECT name, groups, created_at, disabled FROM users WHERE name = %(name)s;

-- name: disable_user
-- Disable a local account, with its audit entry; no row when there is no such enabled account.
-- The users_end_sessions_v1 trigger ends its web sessions in the same statement.
WITH disabled AS (
    UPDATE users SET disabled = true
     WHERE name = %(name)s AND NOT disabled
    RETURNING name
), audit AS (
    INSERT INTO audit_events (kind, principal, data)
    SELECT 'account.disabled', %(by)s, jsonb_build_object('name', d.name) FROM disabled d
)
SELECT * FROM disabled;

-- name: set_user_groups
-- Replace a local account's groups, with its audit entry; no row when there is no such account.
-- The users_end_sessions trigger ends the account's web sessions in the same statement.
WITH changed AS (
    UPDATE users SET groups = %(groups)s
     WHERE name = %(name)s
    RETURNING name, groups
), audit AS (
    INSERT INTO audit_events (kind, principal, data)
    SELECT 'account.groups_changed', %(by)s, jsonb_build_object('name', c.name, 'groups', c.groups)
      FROM changed c
)
SELECT * FROM changed;

-- name: token_owner
-- The account a new token would belong to: its groups, and whether it is disabled.
SELECT groups, disabled FROM users WHERE name = %(name)s;

-- name: create_token
-- A new API token (its digest only) with its audit entry; no row when the name is taken or its
-- owner is not (or no longer) an enabled local account. owner NULL: a service token.
WITH created AS (
    INSERT INTO api_tokens (name, digest, groups, created_by, owner)
    SELECT %(name)s, %(digest)s, %(groups)s, %(created_by)s, %(owner)s
     WHERE %(owner)s::text IS NULL
        OR EXISTS (SELECT 1 FROM users WHERE name = %(owner)s AND NOT disabled)
    ON CONFLICT DO NOTHING
    RETURNING name, groups, created_by, created_at, revoked_at, owner
), audit AS (
    INSERT INTO audit_events (kind, principal, data)
    SELECT 'token.created', c.created_by,
           jsonb_build_object('name', c.name, 'groups', c.groups, 'owner', c.owner)
      FROM created c
)
SELECT * FROM created;

-- name: token_by_digest
-- An unrevoked token. An owned token is dead while its owner is disabled, and holds only the
-- groups its owner still has (a token never does more than the person it acts for).
SELECT t.name, t.owner,
       CASE WHEN t.owner IS NULL THEN t.groups
            ELSE ARRAY(SELECT g FROM unnest(t.groups) g WHERE g = ANY (u.groups) ORDER BY g)
       END AS groups
  FROM api_tokens t
  LEFT JOIN users u ON u.name = t.owner
 WHERE t.digest = %(digest)s AND t.revoked_at IS NULL
   AND (t.owner IS NULL OR NOT u.disabled);

-- name: revoke_token
-- Revoke a live API token, with its audit entry; no row when there is no such live token.
WITH revoked AS (
    UPDATE api_tokens SET revoked_at = now()
     WHERE name = %(name)s AND revoked_at IS NULL
    RETURNING name
), audit AS (
    INSERT INTO audit_events (kind, principal, data)
    SELECT 'token.revoked', %(by)s, jsonb_build_object('name', r.name) FROM revoked r
)
SELECT * FROM revoked;

-- name: list_tokens
-- Every API token, oldest first, revoked ones included (never a digest).
SELECT name, groups, created_by, created_at, revoked_at, owner
  FROM api_tokens ORDER BY created_at, name;

-- ==== request notifications (storage/notifications.py) ====

-- name: claim_notifications
-- One poll of the notifier. Records (and claims) the deliveries owed to pending requests at
-- their current escalation level, insert-if-absent: of two workers, the one whose insert wins
-- sends. Claims due retries and lapsed leases with SKIP LOCKED, and cancels those no longer
-- worth sending (decided, expired or escalated past). A claim is a lease: status 'sending'
-- until next_attempt_at.
WITH fresh AS (
    INSERT INTO notification_deliveries
        (request_id, channel, event, escalation_level, status, attempts, next_attempt_at)
    SELECT r.id, c.channel,
           CASE WHEN coalesce(r.escalation_level, 0) > 0 THEN 'escalated' ELSE 'waiting' END,
           coalesce(r.escalation_level, 0), 'sending', 1,
           now() + make_interval(secs => %(lease_seconds)s::float8)
      FROM approval_requests r
     CROSS JOIN unnest(%(channels)s::text[]) AS c (channel)
     WHERE r.status = 'pending' AND r.expires_at > now()
       AND NOT EXISTS (
           SELECT 1 FROM notification_deliveries d
            WHERE d.request_id = r.id AND d.channel = c.channel
              AND d.escalation_level = coalesce(r.escalation_level, 0))
     ORDER BY r.created_at
     LIMIT %(limit)s
    ON CONFLICT (request_id, channel, escalation_level) DO NOTHING
    RETURNING *
), due AS (
    SELECT d.id
      FROM notification_deliveries d
      JOIN approval_requests r ON r.id = d.request_id
     WHERE d.status IN ('sending', 'retry') AND d.next_attempt_at <= now()
       AND d.channel = ANY (%(channels)s::text[])
       AND r.status = 'pending' AND r.expires_at > now()
       AND d.escalation_level = coalesce(r.escalation_level, 0)
     ORDER BY d.next_attempt_at
     LIMIT %(limit)s
       FOR UPDATE OF d SKIP LOCKED
), retried AS (
    UPDATE notification_deliveries d
       SET status = 'sending', attempts = d.attempts + 1,
           next_attempt_at = now() + make_interval(secs => %(lease_seconds)s::float8)
      FROM due
     WHERE d.id = due.id
    RETURNING d.*
), moot AS (
    SELECT d.id
      FROM notification_deliveries d
      JOIN approval_requests r ON r.id = d.request_id
     WHERE d.status IN ('sending', 'retry') AND d.next_attempt_at <= now()
       AND (r.status <> 'pending' OR r.expires_at <= now()
            OR d.escalation_level <> coalesce(r.escalation_level, 0))
     LIMIT %(limit)s
       FOR UPDATE OF d SKIP LOCKED
), cancelled AS (
    UPDATE notification_deliveries d
       SET status = 'cancelled', finished_at = now()
      FROM moot
     WHERE d.id = moot.id
)
SELECT x.id, x.request_id, x.channel, x.event, x.escalation_level, x.attempts,
       r.run_id, r.tool, r.reason, r.approvers, r.expires_at
  FROM (SELECT * FROM fresh UNION ALL SELECT * FROM retried) AS x
  JOIN approval_requests r ON r.id = x.request_id
 ORDER BY x.id;

-- name: record_notification_attempt
-- Log one attempt and settle its delivery, if the claim is still this sender's (a sender
-- whose lease lapsed and was re-claimed only logs).
WITH logged AS (
    INSERT INTO notification_attempts (delivery_id, attempt, status, response_code, error)
    VALUES (%(id)s, %(attempt)s, %(status)s, %(response_code)s, %(error)s)
)
UPDATE notification_deliveries
   SET status = %(status)s,
       next_attempt_at = CASE WHEN %(status)s::text = 'retry'
                              THEN now() + make_interval(secs => %(retry_in)s::float8)
                              ELSE next_attempt_at END,
       last_error = %(error)s,
       finished_at = CASE WHEN %(status)s::text = 'retry' THEN NULL ELSE now() END
 WHERE id = %(id)s AND status = 'sending' AND attempts = %(attempt)s
RETURNING id;

-- name: request_notifications
-- A request's notification deliveries, by escalation level and channel.
SELECT id, request_id, channel, event, escalation_level, status, attempts, next_attempt_at,
       last_error, created_at, finished_at
  FROM notification_deliveries
 WHERE request_id = %(request_id)s
 ORDER BY escalation_level, channel;

-- name: request_notification_attempts
-- Every attempt to deliver a request's notifications, in order.
SELECT d.request_id, d.channel, d.event, d.escalation_level, a.attempt, a.status,
       a.response_code, a.error, a.at
  FROM notification_attempts a
  JOIN notification_deliveries d ON d.id = a.delivery_id
 WHERE d.request_id = %(request_id)s
 ORDER BY d.escalation_level, d.channel, a.attempt;

-- name: notification_deliveries
-- The newest deliveries first, optionally of one request and/or in one status.
SELECT d.id, d.request_id, a.run_id, a.tool, d.channel, d.event, d.escalation_level, d.status,
       d.attempts, d.next_attempt_at, d.last_error, d.created_at, d.finished_at
  FROM notification_deliveries d
  JOIN approval_requests a ON a.id = d.request_id
 WHERE (%(request_id)s::uuid IS NULL OR d.request_id = %(request_id)s::uuid)
   AND (%(status)s::text IS NULL OR d.status = %(status)s::text)
 ORDER BY d.created_at DESC, d.id DESC
 LIMIT %(limit)s;

-- ==== decision log (storage/audit.py) ====

-- name: audit_head
-- Where the decision log's hash chain ends (read in the verifier's snapshot).
SELECT last_id, hash, legacy_until FROM audit_chain_head;

-- name: audit_chain
-- The whole chain, as the verifier recomputes it: data as its jsonb text. (Read in the same
-- snapshot as the head: an event past the head is one the chain never issued.)
SELECT id, at, kind, run_id, request_id, call_id, principal, state_version, tool,
       data::text AS data_text, prev_hash, hash
  FROM audit_events
 ORDER BY id;

-- name: audit_export
-- Every event, oldest first, optionally from a moment and/or of one run (streamed).
SELECT id, at, kind, run_id, request_id, call_id, tool, principal, state_version, data,
       prev_hash, hash
  FROM audit_events
 WHERE (%(since)s::timestamptz IS NULL OR at >= %(since)s)
   AND (%(run_id)s::uuid IS NULL OR run_id = %(run_id)s)
 ORDER BY id;

-- name: audit_run_interceptions
-- A run's interception records for its timeline, with when each happened (the record's own
-- timestamp, from the interception's context) as well as when it was stored.
SELECT sequence, point, decision, reason, interceptor, mode, resolved_by, enforced_identity,
       record->>'timestamp' AS happened, at
  FROM interception_records
 WHERE run_id = %(run_id)s
 ORDER BY sequence, id;

-- name: audit_search
-- One page of events, newest first, for the operators' view; every filter is optional.
-- decision: a decision's kind (approve, reject, edit) or a policy's (deny, transform).
SELECT id, at, kind, run_id, request_id, call_id, tool, principal, state_version, data, hash
  FROM audit_events
 WHERE (%(run_id)s::uuid IS NULL OR run_id = %(run_id)s)
   AND (%(tool)s::text IS NULL OR tool = %(tool)s)
   AND (%(principal)s::text IS NULL OR principal = %(principal)s)
   AND (%(decision)s::text IS NULL
        OR (kind = 'request.decided' AND data->>'decision' = %(decision)s)
        OR kind = 'policy.' || %(decision)s)
   AND (%(since)s::timestamptz IS NULL OR at >= %(since)s)
   AND (%(until)s::timestamptz IS NULL OR at < %(until)s)
   AND (%(before)s::bigint IS NULL OR id < %(before)s)
 ORDER BY id DESC
 LIMIT %(limit)s;

-- ==== expiry and escalation (storage/expiry.py) ====

-- name: sweep_expired
-- Every pending request past its deadline (up to a batch), each handled exactly once in this
-- one statement: escalated to the next step of its chain, or expired like a rejection (the
-- decision by system:expiry with reason "expired", the audit entries, the resume job and the
-- wake-up). The rows are locked first and re-checked by each update, so a decision racing the
-- sweep either committed before (the row is no longer pending) or finds it expired; decide's
-- own `expires_at > now()` refuses a late one. Rows a decider holds are skipped until the
-- next sweep. Nothing due: one scan of the pending-deadline index.
WITH due AS (
    SELECT id, on_expiry, escalation_chain, approvers AS old_approvers
      FROM approval_requests
     WHERE status = 'pending' AND expires_at <= now()
     ORDER BY expires_at
     LIMIT %(limit)s
       FOR UPDATE SKIP LOCKED
), escalated AS (
    UPDATE approval_requests a
       SET approvers = ARRAY(
               SELECT jsonb_array_elements_text(due.escalation_chain -> 0 -> 'approvers')),
           -- At most `longest_step` (approvals.model.MAX_EXPIRES_IN, which the engine writes
           -- no step past): a chain rewritten behind its back cannot overflow the timestamp and
           -- fail every pass of the sweep on this one row.
           expires_at = now() + make_interval(
               secs => LEAST((due.escalation_chain -> 0 ->> 'expires_in_seconds')::double precision,
                             %(longest_step)s::double precision)),
           escalation_chain = due.escalation_chain - 0,
           escalation_level = a.escalation_level + 1
      FROM due
     WHERE a.id = due.id AND a.status = 'pending' AND a.expires_at <= now()
       AND due.on_expiry = 'escalate' AND jsonb_array_length(due.escalation_chain) > 0
    RETURNING a.*, due.old_approvers
), expired AS (
    UPDATE approval_requests a
       SET status = 'expired', decided_at = now()
      FROM due
     WHERE a.id = due.id AND a.status = 'pending' AND a.expires_at <= now()
       AND NOT (due.on_expiry = 'escalate' AND jsonb_array_length(due.escalation_chain) > 0)
    RETURNING a.*
), decision AS (
    INSERT INTO decisions (id, request_id, run_id, call_id, kind, principal, reason)
    SELECT gen_random_uuid(), e.id, e.run_id, e.call_id, 'reject', 'system:expiry', 'expired'
      FROM expired e
    RETURNING *
), job AS (
    INSERT INTO resume_queue (request_id, decision_id, run_id, thread_id)
    SELECT e.id, d.id, e.run_id, e.thread_id
      FROM expired e JOIN decision d ON d.request_id = e.id
    RETURNING id, request_id, run_id
), audit AS (
    INSERT INTO audit_events
        (kind, run_id, request_id, call_id, tool, state_version, principal, data)
    SELECT 'request.expired', e.run_id, e.id, e.call_id, e.tool, e.state_version,
           'system:expiry',
           jsonb_build_object('decision', 'reject', 'reason', 'expired', 'identity', e.identity,
                              'expires_at', e.expires_at, 'approvers', to_jsonb(e.approvers),
                              'escalation_level', e.escalation_level)
      -- From the decision row: stored before the event that states it (migration 0027).
      FROM expired e JOIN decision d ON d.request_id = e.id
    UNION ALL
    SELECT 'request.escalated', s.run_id, s.id, s.call_id, s.tool, s.state_version,
           'system:expiry',
           jsonb_build_object('identity', s.identity,
                              'from_approvers', to_jsonb(s.old_approvers),
                              'approvers', to_jsonb(s.approvers), 'expires_at', s.expires_at,
                              'escalation_level', s.escalation_level)
      FROM escalated s
    UNION ALL
    SELECT 'resume.queued', j.run_id, j.request_id, e.call_id, e.tool, e.state_version,
           'system:expiry', jsonb_build_object('job', j.id)
      FROM job j JOIN expired e ON e.id = j.request_id
), wake AS (
    SELECT pg_notify('approvals_resume', job.run_id::text) AS sent FROM job
)
SELECT id, 'expired' AS outcome, (SELECT count(*) FROM wake) AS woken FROM expired
UNION ALL
SELECT id, 'escalated' AS outcome, 0 AS woken FROM escalated;

-- ==== operations: metrics, schema versions, runtime role, cancel, prune (storage/ops.py) ====

-- name: ops_counts
-- What /metrics reports, as (family, label, value) rows: one aggregate per table.
SELECT 'runs' AS family, status AS label, count(*)::float8 AS value FROM runs GROUP BY status
UNION ALL
SELECT 'requests', status, count(*) FROM approval_requests GROUP BY status
UNION ALL
SELECT 'decisions', kind, count(*) FROM decisions GROUP BY kind
UNION ALL
SELECT 'jobs', status, count(*) FROM resume_queue GROUP BY status
UNION ALL
-- Failed jobs an operator can still act on (retry them, or cancel the run): their run waits.
-- One beside a run that ended (cancelled, or completed by a sibling's resume) needs nobody.
SELECT 'stranded_jobs', NULL, count(*)
  FROM resume_queue q JOIN runs r ON r.id = q.run_id
 WHERE q.status = 'failed' AND r.status = 'waiting'
UNION ALL
SELECT 'executions', status, count(*) FROM tool_executions GROUP BY status
UNION ALL
SELECT 'oldest_pending', NULL, extract(epoch FROM now() - min(created_at))
  FROM approval_requests WHERE status = 'pending';

-- name: ops_latencies
-- Decision latency (request created -> decided) and resume latency (job queued -> finished),
-- counted per histogram bucket. `bucket` is how many of the metric's bounds lie below the
-- value: the index of the first bound the value is within (len(bounds) when above them all).
SELECT l.metric,
       (SELECT count(*)
          FROM unnest(CASE l.metric WHEN 'decision' THEN %(decision_bounds)s::float8[]
                                    ELSE %(resume_bounds)s::float8[] END) AS b (bound)
         WHERE b.bound < l.seconds) AS bucket,
       count(*) AS n, sum(l.seconds) AS total
  FROM (SELECT 'decision' AS metric,
               extract(epoch FROM d.decided_at - a.created_at)::float8 AS seconds
          FROM decisions d JOIN approval_requests a ON a.id = d.request_id
        UNION ALL
        SELECT 'resume', extract(epoch FROM q.finished_at - q.created_at)::float8
          FROM resume_queue q
         WHERE q.status IN ('done', 'failed') AND q.finished_at IS NOT NULL) l
 GROUP BY 1, 2;

-- name: schema_versions
-- The engine's Alembic revision and LangGraph's checkpoint-table version, as applied.
SELECT (SELECT version_num FROM alembic_version LIMIT 1) AS revision,
       (SELECT max(v) FROM checkpoint_migrations) AS checkpoints;

-- name: grant_runtime_role
-- Grant a runtime role exactly what the engine needs, from nothing (migration 0013); run as
-- the tables' owner.
SELECT object, privileges FROM approvals_grant_runtime_v1(%(role)s);

-- name: connected_role
-- The role this connection acts as (migrations skip granting the runtime role to itself).
SELECT current_user::text AS role;

-- name: lock_run_thread
-- The thread lock of a run, for this transaction: waits until a step in progress settles.
SELECT status, pg_advisory_xact_lock(approvals_thread_lock_key_v1(thread_id))::text AS locked
  FROM runs WHERE id = %(run_id)s;

-- name: cancel_run
-- Cancel a run that has not ended, under its thread's lock: the run, its pending requests and
-- its queued resume jobs, each with its audit entry, all or nothing. A job a worker holds is
-- left to it (SKIP LOCKED): the worker finds the run cancelled and skips it. A decision racing
-- this either consumed its request first (its job is skipped, here or by the worker) or finds
-- the request cancelled. No row: the run had already ended.
WITH run AS (
    UPDATE runs
       SET status = 'cancelled', error = %(error)s, updated_at = now()
     WHERE id = %(run_id)s AND NOT approvals_run_finished_v1(status)
    RETURNING id
), requests AS (
    UPDATE approval_requests a
       SET status = 'cancelled', decided_at = now()
      FROM run
     WHERE a.run_id = run.id AND a.status = 'pending'
    RETURNING a.id, a.run_id, a.call_id
), jobs AS (
    UPDATE resume_queue q
       SET status = 'skipped', last_error = 'run cancelled', finished_at = now()
     WHERE q.id IN (SELECT j.id FROM resume_queue j
                     WHERE j.run_id = (SELECT id FROM run) AND j.status = 'queued'
                       FOR UPDATE SKIP LOCKED)
    RETURNING q.id, q.run_id, q.request_id
), audit AS (
    INSERT INTO audit_events (kind, run_id, request_id, call_id, principal, data)
    SELECT 'request.cancelled', r.run_id, r.id, r.call_id, %(principal)s,
           jsonb_build_object('reason', %(reason)s::text)
      FROM requests r
    UNION ALL
    SELECT 'resume.skipped', j.run_id, j.request_id, NULL, %(principal)s,
           jsonb_build_object('job', j.id, 'error', 'run cancelled', 'settled', false)
      FROM jobs j
    UNION ALL
    SELECT 'run.cancelled', run.id, NULL, NULL, %(principal)s,
           jsonb_build_object('reason', %(reason)s::text,
                              'requests', (SELECT count(*) FROM requests),
                              'jobs', (SELECT count(*) FROM jobs))
      FROM run
)
SELECT run.id, (SELECT count(*) FROM requests) AS requests, (SELECT count(*) FROM jobs) AS jobs
  FROM run;

-- name: retry_failed_jobs
-- Queue again the failed resume jobs of a run that still waits, under its thread's lock (the
-- caller holds it, so no step of the run is in progress and a cancel cannot interleave). Each
-- job goes back to 'queued' with its attempts and last error kept, audited as resume.retried
-- with who asked and why, and the workers are woken. Each requeued job also records the run's
-- `resuming` event, as a decision's new job does (its trigger fires on INSERT only, and this is
-- an UPDATE): a stream of the waiting run closed, and that event is what opens the next step.
-- A retried resume is checked as any other (the run still waits on the call, the decision is
-- the one consumed) and the ledger still runs each call at most once. No row: no such run;
-- jobs = 0: it is not waiting, or nothing of it failed.
WITH run AS (
    SELECT id, status FROM runs WHERE id = %(run_id)s
), jobs AS (
    UPDATE resume_queue q
       SET status = 'queued', finished_at = NULL
      FROM run
     WHERE q.run_id = run.id AND q.status = 'failed' AND run.status = 'waiting'
    RETURNING q.id, q.run_id, q.request_id, q.last_error
), audit AS (
    INSERT INTO audit_events (kind, run_id, request_id, call_id, tool, state_version,
                              principal, data)
    SELECT 'resume.retried', j.run_id, j.request_id, r.call_id, r.tool, r.state_version,
           %(principal)s,
           jsonb_build_object('job', j.id, 'reason', %(reason)s::text,
                              'error', left(j.last_error, 500))
      FROM jobs j LEFT JOIN approval_requests r ON r.id = j.request_id
     ORDER BY j.id
), resuming AS (
    INSERT INTO run_events (run_id, kind, data)
    SELECT j.run_id, 'resuming', '{}'::jsonb FROM jobs j ORDER BY j.id
), wake AS (
    SELECT pg_notify('approvals_resume', run.id::text) AS sent,
           pg_notify('approvals_run_events', run.id::text) AS streams
      FROM run WHERE EXISTS (SELECT 1 FROM jobs)
)
SELECT run.status, (SELECT count(*) FROM jobs) AS jobs, (SELECT count(*) FROM wake) AS woken
  FROM run;

-- name: prunable_threads
-- The next threads (in thread id order, after `after`) whose runs all ended before the cutoff:
-- at most `limit` threads holding at most `max_runs` runs (the first thread whatever its
-- size), each locked for this transaction unless a step holds it (`locked` false: left for
-- later).
SELECT t.thread_id,
       pg_try_advisory_xact_lock(approvals_thread_lock_key_v1(t.thread_id)) AS locked
  FROM (SELECT thread_id, count(*) AS runs, sum(count(*)) OVER (ORDER BY thread_id) AS upto
          FROM runs
         WHERE thread_id > %(after)s
         GROUP BY thread_id
        HAVING bool_and(approvals_run_finished_v1(status))
           AND max(updated_at) < now() - %(older_than)s::interval
         ORDER BY thread_id
         LIMIT %(limit)s) t
 WHERE t.upto <= %(max_runs)s OR t.upto = t.runs
 ORDER BY t.thread_id;

-- name: prune_threads
-- Delete what the given (locked) threads hold, checking again under the lock that every run
-- of each ended before the cutoff: LangGraph's checkpoints, and unless `checkpoints_only` the
-- engine's own rows of their runs, children before parents (every foreign key is checked at
-- the end of the statement, when all of them are gone). A thread with something still in
-- flight (approvals_run_in_flight_v1) keeps its rows (`held`) for a later pass. The audit
-- log is not touched: it is append-only, and it is what stays of a pruned run.
WITH threads AS (
    SELECT thread_id FROM runs
     WHERE thread_id = ANY(%(threads)s::text[])
     GROUP BY thread_id
    HAVING bool_and(approvals_run_finished_v1(status))
       AND max(updated_at) < now() - %(older_than)s::interval
), held AS (
    SELECT DISTINCT r.thread_id
      FROM runs r JOIN threads t USING (thread_id)
     WHERE NOT %(checkpoints_only)s AND approvals_run_in_flight_v1(r.id)
), doomed AS (
    SELECT r.id FROM runs r JOIN threads t USING (thread_id)
     WHERE NOT %(checkpoints_only)s AND r.thread_id NOT IN (SELECT thread_id FROM held)
), requests AS (
    SELECT a.id FROM approval_requests a WHERE a.run_id IN (SELECT id FROM doomed)
), attempts AS (
    DELETE FROM notification_attempts x USING notification_deliveries d
     WHERE x.delivery_id = d.id AND d.request_id IN (SELECT id FROM requests)
    RETURNING 1
), deliveries AS (
    DELETE FROM notification_deliveries d WHERE d.request_id IN (SELECT id FROM requests)
    RETURNING 1
), votes AS (
    DELETE FROM approval_votes v WHERE v.request_id IN (SELECT id FROM requests)
    RETURNING 1
), jobs AS (
    DELETE FROM resume_queue q WHERE q.run_id IN (SELECT id FROM doomed)
    RETURNING 1
), decided AS (
    DELETE FROM decisions d WHERE d.run_id IN (SELECT id FROM doomed)
    RETURNING 1
), executions AS (
    DELETE FROM tool_executions x WHERE x.run_id IN (SELECT id FROM doomed)
    RETURNING 1
), interceptions AS (
    DELETE FROM interception_records i WHERE i.run_id IN (SELECT id FROM doomed)
    RETURNING 1
), run_notifications AS (
    DELETE FROM run_notification_deliveries d USING run_events e
     WHERE d.event_id = e.id AND e.run_id IN (SELECT id FROM doomed)
    RETURNING 1
), events AS (
    DELETE FROM run_events e WHERE e.run_id IN (SELECT id FROM doomed)
    RETURNING 1
), states AS (
    DELETE FROM openai_run_states s WHERE s.run_id IN (SELECT id FROM doomed)
    RETURNING 1
), asked AS (
    DELETE FROM approval_requests a WHERE a.id IN (SELECT id FROM requests)
    RETURNING 1
), gone AS (
    DELETE FROM runs r WHERE r.id IN (SELECT id FROM doomed)
    RETURNING r.thread_id
), blobs AS (
    DELETE FROM checkpoint_blobs WHERE thread_id IN (SELECT thread_id FROM threads)
    RETURNING thread_id
), writes AS (
    DELETE FROM checkpoint_writes WHERE thread_id IN (SELECT thread_id FROM threads)
    RETURNING thread_id
), checkpoints AS (
    DELETE FROM checkpoints WHERE thread_id IN (SELECT thread_id FROM threads)
    RETURNING thread_id
)
SELECT (SELECT count(*) FROM (SELECT thread_id FROM checkpoints UNION SELECT thread_id FROM writes
                              UNION SELECT thread_id FROM blobs UNION SELECT thread_id FROM gone)
                             t) AS threads,
       (SELECT count(*) FROM checkpoints) AS checkpoints,
       (SELECT count(*) FROM writes) AS writes,
       (SELECT count(*) FROM blobs) AS blobs,
       (SELECT count(*) FROM held) AS held,
       (SELECT count(*) FROM gone) AS runs,
       (SELECT count(*) FROM asked) AS approval_requests,
       (SELECT count(*) FROM votes) AS approval_votes,
       (SELECT count(*) FROM decided) AS decisions,
       (SELECT count(*) FROM jobs) AS resume_queue,
       (SELECT count(*) FROM executions) AS tool_executions,
       (SELECT count(*) FROM interceptions) AS interception_records,
       (SELECT count(*) FROM events) AS run_events,
       (SELECT count(*) FROM run_notifications) AS run_notification_deliveries,
       (SELECT count(*) FROM deliveries) AS notification_deliveries,
       (SELECT count(*) FROM attempts) AS notification_attempts,
       (SELECT count(*) FROM states) AS openai_run_states;

-- name: prune_web_sessions
-- Delete up to `limit` expired web sessions (nobody can use them; skips rows another
-- statement holds).
WITH expired AS (
    SELECT id_hash FROM web_sessions
     WHERE expires_at <= now()
     ORDER BY expires_at
     LIMIT %(limit)s
       FOR UPDATE SKIP LOCKED
), gone AS (
    DELETE FROM web_sessions s USING expired e WHERE s.id_hash = e.id_hash
    RETURNING 1
)
SELECT count(*) AS web_sessions FROM gone;

-- name: count_prunable
-- What prune_threads and prune_web_sessions would delete across all threads now (a dry run;
-- no locks taken).
WITH threads AS (
    SELECT thread_id FROM runs
     GROUP BY thread_id
    HAVING bool_and(approvals_run_finished_v1(status))
       AND max(updated_at) < now() - %(older_than)s::interval
), held AS (
    SELECT DISTINCT r.thread_id
      FROM runs r JOIN threads t USING (thread_id)
     WHERE NOT %(checkpoints_only)s AND approvals_run_in_flight_v1(r.id)
), doomed AS (
    SELECT r.id, r.thread_id FROM runs r JOIN threads t USING (thread_id)
     WHERE NOT %(checkpoints_only)s AND r.thread_id NOT IN (SELECT thread_id FROM held)
), requests AS (
    SELECT a.id FROM approval_requests a WHERE a.run_id IN (SELECT id FROM doomed)
), counted AS (
    SELECT t.thread_id,
           (SELECT count(*) FROM checkpoints c WHERE c.thread_id = t.thread_id) AS checkpoints,
           (SELECT count(*) FROM checkpoint_writes w WHERE w.thread_id = t.thread_id) AS writes,
           (SELECT count(*) FROM checkpoint_blobs b WHERE b.thread_id = t.thread_id) AS blobs,
           EXISTS (SELECT 1 FROM doomed d WHERE d.thread_id = t.thread_id) AS doomed
      FROM threads t
)
SELECT count(*) FILTER (WHERE checkpoints + writes + blobs > 0 OR doomed) AS threads,
       COALESCE(sum(checkpoints), 0) AS checkpoints, COALESCE(sum(writes), 0) AS writes,
       COALESCE(sum(blobs), 0) AS blobs,
       (SELECT count(*) FROM held) AS held,
       (SELECT count(*) FROM doomed) AS runs,
       (SELECT count(*) FROM requests) AS approval_requests,
       (SELECT count(*) FROM approval_votes v
         WHERE v.request_id IN (SELECT id FROM requests)) AS approval_votes,
       (SELECT count(*) FROM decisions d
         WHERE d.run_id IN (SELECT id FROM doomed)) AS decisions,
       (SELECT count(*) FROM resume_queue q
         WHERE q.run_id IN (SELECT id FROM doomed)) AS resume_queue,
       (SELECT count(*) FROM tool_executions x
         WHERE x.run_id IN (SELECT id FROM doomed)) AS tool_executions,
       (SELECT count(*) FROM interception_records i
         WHERE i.run_id IN (SELECT id FROM doomed)) AS interception_records,
       (SELECT count(*) FROM run_events e
         WHERE e.run_id IN (SELECT id FROM doomed)) AS run_events,
       (SELECT count(*) FROM run_notification_deliveries d JOIN run_events e ON e.id = d.event_id
         WHERE e.run_id IN (SELECT id FROM doomed)) AS run_notification_deliveries,
       (SELECT count(*) FROM notification_deliveries d
         WHERE d.request_id IN (SELECT id FROM requests)) AS notification_deliveries,
       (SELECT count(*) FROM notification_attempts x
          JOIN notification_deliveries d ON d.id = x.delivery_id
         WHERE d.request_id IN (SELECT id FROM requests)) AS notification_attempts,
       (SELECT count(*) FROM openai_run_states s
         WHERE s.run_id IN (SELECT id FROM doomed)) AS openai_run_states,
       CASE WHEN %(checkpoints_only)s THEN 0
            ELSE (SELECT count(*) FROM web_sessions WHERE expires_at <= now())
       END AS web_sessions
  FROM counted;

-- name: run_was_pruned
-- Whether the decision log knows a run (a run without its row: retention pruned it).
SELECT EXISTS (SELECT 1 FROM audit_events WHERE run_id = %(run_id)s) AS pruned;

-- name: record_prune
-- The audit entry of a retention pass: who pruned what, how old (the log itself stays whole).
INSERT INTO audit_events (kind, principal, data)
VALUES ('retention.pruned', %(principal)s, %(data)s);

-- ==== web sessions (storage/sessions.py) ====

-- name: create_web_session
-- A new session (only the hash of its id is stored); expired sessions are swept on the way.
WITH swept AS (
    DELETE FROM web_sessions WHERE expires_at <= now()
)
INSERT INTO web_sessions (id_hash, principal, name, via, account, groups, expires_at)
VALUES (%(id_hash)s, %(principal)s, %(name)s, %(via)s, %(account)s, %(groups)s,
        now() + make_interval(secs => %(ttl_seconds)s))
RETURNING expires_at;

-- name: web_session
-- The live session with this id hash: not expired and, for a local account, still enabled and
-- in the groups the session holds. A change of groups ends the sessions stored by then; a
-- sign-in that read the groups before it and stored its session after holds the old ones,
-- and is refused here. Its last-seen time is refreshed at most once a minute (not a write per
-- page view).
WITH live AS (
    SELECT s.*
      FROM web_sessions s
      LEFT JOIN users u ON u.name = s.account
     WHERE s.id_hash = %(id_hash)s AND s.expires_at > now()
       AND (s.account IS NULL
            OR (NOT u.disabled AND u.groups @> s.groups AND s.groups @> u.groups))
), touched AS (
    UPDATE web_sessions w SET last_seen_at = now()
      FROM live
     WHERE w.id_hash = live.id_hash AND live.last_seen_at < now() - interval '60 seconds'
)
SELECT principal, name, via, account, groups, created_at, expires_at, last_seen_at FROM live;

-- name: end_web_session
-- Sign-out: the session's row goes; its cookie then names nothing.
DELETE FROM web_sessions WHERE id_hash = %(id_hash)s RETURNING principal;

-- name: end_principal_sessions
-- Every session of one principal (an operator's `approvals sessions end`), with an audit entry
-- when there was any.
WITH ended AS (
    DELETE FROM web_sessions WHERE principal = %(principal)s RETURNING id_hash
), audit AS (
    INSERT INTO audit_events (kind, principal, data)
    SELECT 'sessions.ended', %(by)s,
           jsonb_build_object('principal', %(principal)s::text, 'sessions', count(*))
      FROM ended
    HAVING count(*) > 0
)
SELECT count(*) AS ended FROM ended;

-- name: list_web_sessions
-- Live sessions (all, or one principal's), newest first; never the ids.
SELECT principal, name, via, account, groups, created_at, expires_at, last_seen_at
  FROM web_sessions
 WHERE expires_at > now() AND (%(principal)s::text IS NULL OR principal = %(principal)s)
 ORDER BY created_at DESC
 LIMIT %(limit)s;

-- ==== failed sign-ins, counted for every web process (storage/sign_ins.py) ====

-- name: sign_in_attempt
-- Count a password sign-in attempt unless its (name, address) or its name's count is at its
-- limit in the window (approvals_sign_in_attempt_v1, migration 0028: under the name's lock, so
-- every process counts one name's attempts one at a time). Returns the seconds to wait and the
-- counted row's id (NULL when it waits).
SELECT wait, counted
  FROM approvals_sign_in_attempt_v1(%(account)s, %(client)s, %(attempts)s,
                                    %(account_attempts)s, %(window)s);

-- name: sign_in_succeeded
-- A counted attempt signed in: its client's earlier failures leave the (name, address) count
-- (they stay in the name's), and the attempt itself leaves both. Committed without waiting
-- for the WAL flush, as the attempt was: lost to a crash, the counts only stay higher.
WITH cleared AS (
    UPDATE sign_in_failures SET client_cleared = true
     WHERE account = %(account)s AND client = %(client)s AND NOT client_cleared
       AND id <> %(counted)s
), removed AS (
    DELETE FROM sign_in_failures WHERE id = %(counted)s
)
SELECT set_config('synchronous_commit', 'off', true) AS commit_mode;

-- ==== request events, pushed to live views (storage/request_events.py) ====

-- name: listen_request_events
-- Wake this connection on every request change (the payload is JSON: migration 0020).
LISTEN approvals_request_events;

-- name: listen_sessions_ended
-- Wake this connection when a web session ends (the payload is the hash of its id).
LISTEN approvals_sessions_ended;

-- name: request_event_row
-- Whom a request's change concerns, for a change too big to NOTIFY (hundreds of groups).
SELECT id, run_id, tool, approvers, requested_by, requested_by_person
  FROM approval_requests WHERE id = %(id)s;

-- ==== run events and run notifications (storage/run_events.py) ====

-- name: publish_run_event
-- One node update of a run's step, and a wake-up for whoever streams the run.
WITH event AS (
    INSERT INTO run_events (run_id, kind, node, data)
    VALUES (%(run_id)s, 'update', %(node)s, %(data)s)
    RETURNING id
)
SELECT event.id, pg_notify('approvals_run_events', %(run_id)s::text) AS sent FROM event;

-- name: run_events_after
-- A run's events after `after` (an event id; 0 for all), in order.
SELECT id, kind, node, data, at
  FROM run_events
 WHERE run_id = %(run_id)s AND id > %(after)s
 ORDER BY id
 LIMIT %(limit)s;

-- name: claim_run_notifications
-- One poll of the notifier for runs: records (and claims) a delivery per channel for each
-- status event of the last day that says a run waits or ended, insert-if-absent (of two
-- workers, the one whose insert wins sends), and claims due retries and lapsed leases with
-- SKIP LOCKED. A claim is a lease: status 'sending' until next_attempt_at.
WITH fresh AS (
    INSERT INTO run_notification_deliveries
        (event_id, channel, status, attempts, next_attempt_at)
    SELECT e.id, c.channel, 'sending', 1,
           now() + make_interval(secs => %(lease_seconds)s::float8)
      FROM run_events e
     CROSS JOIN unnest(%(channels)s::text[]) AS c (channel)
     WHERE e.kind = 'status' AND e.at > now() - interval '1 day'
       AND (e.data ->> 'status' = 'waiting' OR approvals_run_finished_v1(e.data ->> 'status'))
       AND NOT EXISTS (
           SELECT 1 FROM run_notification_deliveries d
            WHERE d.event_id = e.id AND d.channel = c.channel)
     ORDER BY e.id
     LIMIT %(limit)s
    ON CONFLICT (event_id, channel) DO NOTHING
    RETURNING *
), due AS (
    SELECT d.id
      FROM run_notification_deliveries d
     WHERE d.status IN ('sending', 'retry') AND d.next_attempt_at <= now()
       AND d.channel = ANY (%(channels)s::text[])
     ORDER BY d.next_attempt_at
     LIMIT %(limit)s
       FOR UPDATE OF d SKIP LOCKED
), retried AS (
    UPDATE run_notification_deliveries d
       SET status = 'sending', attempts = d.attempts + 1,
           next_attempt_at = now() + make_interval(secs => %(lease_seconds)s::float8)
      FROM due
     WHERE d.id = due.id
    RETURNING d.*
)
SELECT x.id, x.channel, x.attempts, e.run_id, e.data ->> 'status' AS status, e.at,
       r.thread_id, r.graph,
       ARRAY(SELECT a.id::text FROM approval_requests a
              WHERE a.run_id = e.run_id AND a.status = 'pending'
              ORDER BY a.created_at, a.id) AS pending
  FROM (SELECT * FROM fresh UNION ALL SELECT * FROM retried) AS x
  JOIN run_events e ON e.id = x.event_id
  JOIN runs r ON r.id = e.run_id
 ORDER BY x.id;

-- name: record_run_notification
-- Settle one run notification attempt, if the claim is still this sender's.
UPDATE run_notification_deliveries
   SET status = %(status)s,
       next_attempt_at = CASE WHEN %(status)s::text = 'retry'
                              THEN now() + make_interval(secs => %(retry_in)s::float8)
                              ELSE next_attempt_at END,
       last_error = %(error)s,
       finished_at = CASE WHEN %(status)s::text = 'retry' THEN NULL ELSE now() END
 WHERE id = %(id)s AND status = 'sending' AND attempts = %(attempt)s
RETURNING id;

-- name: run_notifications
-- A run's notification deliveries, oldest first.
SELECT d.id, d.channel, d.status, d.attempts, d.last_error, e.data ->> 'status' AS event
  FROM run_notification_deliveries d
  JOIN run_events e ON e.id = d.event_id
 WHERE e.run_id = %(run_id)s
 ORDER BY d.id;

-- name: listen_run_events
-- Wake this connection on every run event (the payload is the run's id).
LISTEN approvals_run_events;

-- name: ensure_local_run
-- A run an application invokes itself (graphs.langchain.in_process), recorded with its audit entry the
-- first time one of its calls asks a human; again, nothing.
WITH run AS (
    INSERT INTO runs (id, thread_id, graph, status, started_by, input)
    VALUES (%(id)s, %(thread_id)s, %(graph)s, 'running', %(started_by)s, '{}'::jsonb)
    ON CONFLICT (id) DO NOTHING
    RETURNING *
), audit AS (
    INSERT INTO audit_events (kind, run_id, principal, data)
    SELECT 'run.started', run.id, run.started_by,
           jsonb_build_object('graph', run.graph, 'in_process', true)
      FROM run
    RETURNING 1
)
SELECT count(*) AS created FROM run;
