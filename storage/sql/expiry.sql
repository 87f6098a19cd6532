-- The statements of storage/expiry.py: expiry and escalation of requests past their deadline
-- (PgExpiry).
--
-- One file per storage module, beside it: what storage/expiry.py runs is here, so a reader of a
-- repository opens one short file (the engine's statements were one file of 1,500 lines, which a
-- reader following one approval opened again at every step). The names are one namespace all the
-- same; storage/queries.py says how the files are read and written, and
-- tests/unit/test_queries.py checks them.

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
