-- The statements of storage/checkpoints.py: the start of a resume, under the thread's lock
-- (PgResumeChecks).
--
-- One file per storage module, beside it: what storage/checkpoints.py runs is here, so a reader
-- of a repository opens one short file (the engine's statements were one file of 1,500 lines,
-- which a reader following one approval opened again at every step). The names are one namespace
-- all the same; storage/queries.py says how the files are read and written, and
-- tests/unit/test_queries.py checks them.

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
