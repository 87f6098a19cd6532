-- All SQL the engine runs against its own tables. One query per `-- name: x` header.

-- name: create_run
INSERT INTO runs (id, thread_id, graph, status, started_by, input)
VALUES (%(id)s, %(thread_id)s, %(graph)s, 'running', %(started_by)s, %(input)s)
RETURNING *;

-- name: get_run
SELECT * FROM runs WHERE id = %(id)s;

-- name: set_run_status
UPDATE runs
   SET status = %(status)s, error = %(error)s, answer = COALESCE(%(answer)s, answer),
       updated_at = now()
 WHERE id = %(id)s;

-- name: supersede_other_pending
UPDATE approval_requests
   SET status = 'superseded', decided_at = now()
 WHERE run_id = %(run_id)s AND call_id = %(call_id)s AND status = 'pending'
   AND identity <> %(identity)s
RETURNING id;

-- name: upsert_request
INSERT INTO approval_requests
    (id, run_id, thread_id, call_id, tool, shown, args_schema, identity, reason,
     requested_by, expires_at)
VALUES
    (%(id)s, %(run_id)s, %(thread_id)s, %(call_id)s, %(tool)s, %(shown)s, %(args_schema)s,
     %(identity)s, %(reason)s, %(requested_by)s, %(expires_at)s)
ON CONFLICT (run_id, call_id, identity) DO UPDATE SET run_id = EXCLUDED.run_id
RETURNING *, (xmax = 0) AS inserted;

-- name: find_request
SELECT * FROM approval_requests
 WHERE run_id = %(run_id)s AND call_id = %(call_id)s AND identity = %(identity)s;

-- name: get_request
SELECT * FROM approval_requests WHERE id = %(id)s;

-- name: list_requests
SELECT * FROM approval_requests
 WHERE (%(status)s::text IS NULL OR status = %(status)s)
 ORDER BY created_at DESC, id
 LIMIT %(limit)s;

-- name: run_requests
SELECT * FROM approval_requests WHERE run_id = %(run_id)s ORDER BY created_at, id;

-- name: attach_interrupt
UPDATE approval_requests
   SET interrupt_id = %(interrupt_id)s, state_version = COALESCE(%(state_version)s, state_version)
 WHERE id = %(id)s AND interrupt_id IS DISTINCT FROM %(interrupt_id)s;

-- name: consume_request
UPDATE approval_requests
   SET status = %(status)s, decided_at = now()
 WHERE id = %(id)s AND status = 'pending' AND expires_at > now()
RETURNING *;

-- name: request_status
SELECT status, expires_at <= now() AS expired FROM approval_requests WHERE id = %(id)s;

-- name: insert_decision
INSERT INTO decisions (id, request_id, run_id, call_id, kind, principal, reason, args, args_identity)
VALUES (%(id)s, %(request_id)s, %(run_id)s, %(call_id)s, %(kind)s, %(principal)s, %(reason)s,
        %(args)s, %(args_identity)s)
RETURNING *;

-- name: decision_for_request
SELECT * FROM decisions WHERE request_id = %(request_id)s;

-- name: enqueue_resume
INSERT INTO resume_queue (request_id, decision_id, run_id, thread_id)
VALUES (%(request_id)s, %(decision_id)s, %(run_id)s, %(thread_id)s)
RETURNING id;

-- name: notify_resume
SELECT pg_notify('approvals_resume', %(run_id)s);

-- name: claim_job
SELECT * FROM resume_queue
 WHERE status = 'queued'
 ORDER BY id
 LIMIT 1
 FOR UPDATE SKIP LOCKED;

-- name: finish_job
UPDATE resume_queue
   SET status = %(status)s, last_error = %(error)s, attempts = attempts + 1, finished_at = now()
 WHERE id = %(id)s;

-- name: queued_jobs
SELECT count(*) AS n FROM resume_queue WHERE status = 'queued';

-- name: thread_lock
SELECT pg_advisory_xact_lock(hashtextextended(%(thread_id)s, 7277));

-- name: begin_execution
INSERT INTO tool_executions (run_id, call_id, tool, idempotency_key, args_identity, status)
VALUES (%(run_id)s, %(call_id)s, %(tool)s, %(key)s, %(args_identity)s, 'started')
ON CONFLICT (run_id, call_id) DO NOTHING
RETURNING *;

-- name: get_execution
SELECT * FROM tool_executions WHERE run_id = %(run_id)s AND call_id = %(call_id)s;

-- name: finish_execution
UPDATE tool_executions
   SET status = %(status)s, result = %(result)s, error = %(error)s, finished_at = now()
 WHERE run_id = %(run_id)s AND call_id = %(call_id)s AND status = 'started'
RETURNING *;

-- name: mark_unknown
UPDATE tool_executions
   SET status = 'outcome_unknown', finished_at = now()
 WHERE run_id = %(run_id)s AND call_id = %(call_id)s AND status = 'started'
RETURNING *;

-- name: run_executions
SELECT * FROM tool_executions WHERE run_id = %(run_id)s ORDER BY id;

-- name: insert_audit
INSERT INTO audit_events (kind, run_id, request_id, call_id, principal, data)
VALUES (%(kind)s, %(run_id)s, %(request_id)s, %(call_id)s, %(principal)s, %(data)s);

-- name: run_audit
SELECT * FROM audit_events WHERE run_id = %(run_id)s ORDER BY id;

-- name: record_side_effect
INSERT INTO demo_side_effects (run_id, call_id, tool, args)
VALUES (%(run_id)s, %(call_id)s, %(tool)s, %(args)s);

-- name: side_effects_for_call
SELECT * FROM demo_side_effects WHERE run_id = %(run_id)s AND call_id = %(call_id)s ORDER BY id;
