-- The statements of storage/ops.py: operations: metrics, cancel, retry, retention
-- (PgOperations).
--
-- One file per storage module, beside it: what storage/ops.py runs is here, so a reader of a
-- repository opens one short file (the engine's statements were one file of 1,500 lines, which a
-- reader following one approval opened again at every step). The names are one namespace all the
-- same; storage/queries.py says how the files are read and written, and
-- tests/unit/test_queries.py checks them.

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
-- flight (approvals_run_in_flight_v1) keeps its rows (`held`) for a later pass. A thread's
-- langgraph_threads row (its metadata) goes with its runs. The audit log is not touched: it
-- is append-only, and it is what stays of a pruned run.
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
), kept_threads AS (
    -- A thread the LangGraph face kept (its metadata) goes with its runs.
    DELETE FROM langgraph_threads m WHERE m.thread_id IN (SELECT thread_id FROM gone)
    RETURNING 1
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
