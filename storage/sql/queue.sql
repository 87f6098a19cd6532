-- The statements of storage/queue.py: the resume queue (PgResumeQueue).
--
-- One file per storage module, beside it: what storage/queue.py runs is here, so a reader of a
-- repository opens one short file (the engine's statements were one file of 1,500 lines, which a
-- reader following one approval opened again at every step). The names are one namespace all the
-- same; storage/queries.py says how the files are read and written, and
-- tests/unit/test_queries.py checks them.

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

-- name: queued_jobs_by_graph
-- The resume jobs waiting for a worker, by the graph of their run (approvals status).
SELECT r.graph, count(*) AS n
  FROM resume_queue q JOIN runs r ON r.id = q.run_id
 WHERE q.status = 'queued'
 GROUP BY r.graph ORDER BY r.graph;
