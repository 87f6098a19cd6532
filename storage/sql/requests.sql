-- The statements of storage/requests.py: approval requests (PgApprovalRequests), and decisions
-- and quorum votes (PgDecisions).
--
-- One file per storage module, beside it: what storage/requests.py runs is here, so a reader of
-- a repository opens one short file (the engine's statements were one file of 1,500 lines, which
-- a reader following one approval opened again at every step). The names are one namespace all
-- the same; storage/queries.py says how the files are read and written, and
-- tests/unit/test_queries.py checks them.

-- ==== approval requests (PgApprovalRequests) ====

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

-- ==== decisions and quorum votes (PgDecisions) ====

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
