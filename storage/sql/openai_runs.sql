-- The statements of storage/openai_runs.py: the OpenAI Agents SDK host's paused runs: each
-- RunState, kept server-side, and what a resume re-reads (PgOpenAIRunStates).
--
-- One file per storage module, beside it: what storage/openai_runs.py runs is here, so a reader
-- of a repository opens one short file (the engine's statements were one file of 1,500 lines,
-- which a reader following one approval opened again at every step). The names are one namespace
-- all the same; storage/queries.py says how the files are read and written, and
-- tests/unit/test_queries.py checks them.

-- name: save_openai_state
-- Store a run's serialized RunState and its version, and bind the requests it waits on to
-- that version, in one statement: a request never carries a version whose state is not stored.
-- Bound whatever their status: an approver may decide a request between the moment the run
-- records it and this statement, and its resume must find it bound all the same.
WITH saved AS (
    INSERT INTO openai_run_states
        (run_id, agent, state, version, waiting, status, answer, error)
    VALUES (%(run_id)s, %(agent)s, %(state)s, %(version)s, %(waiting)s, %(status)s,
            %(answer)s, %(error)s)
    ON CONFLICT (run_id) DO UPDATE
       SET agent = EXCLUDED.agent, state = EXCLUDED.state, version = EXCLUDED.version,
           waiting = EXCLUDED.waiting, status = EXCLUDED.status, answer = EXCLUDED.answer,
           error = EXCLUDED.error, saved_at = now()
    RETURNING run_id
), bound AS (
    UPDATE approval_requests
       SET state_version = %(version)s
     WHERE run_id = %(run_id)s AND id = ANY(%(request_ids)s::uuid[])
    RETURNING id
)
SELECT (SELECT count(*) FROM saved) AS saved, (SELECT count(*) FROM bound) AS bound;

-- name: load_openai_state
-- A run's stored RunState, its recorded version and the calls it waits on.
SELECT run_id, agent, state, version, waiting, status, answer, error, saved_at
  FROM openai_run_states WHERE run_id = %(run_id)s;

-- name: openai_request_decision
-- A request as a resume re-reads it: its status, the state version it was bound to, and the
-- decision made on it (if any). Never taken from the job or the resume payload.
SELECT r.id, r.run_id, r.call_id, r.tool, r.identity, r.status, r.state_version,
       d.kind AS decision_kind, d.reason AS decision_reason, d.principal AS decided_by
  FROM approval_requests r
  LEFT JOIN decisions d ON d.request_id = r.id
 WHERE r.id = %(request_id)s;

-- name: record_openai_state_refused
-- The audit entry of a resume refused because the stored RunState is not the one the run
-- paused with (its version is not the host's keyed MAC of the row, or not the one the decided
-- request was bound to, or the SDK cannot read it). data: found, expected, reason,
-- state_sha256 (the refused text's plain hash, to find it again).
INSERT INTO audit_events (kind, run_id, request_id, call_id, state_version, data)
VALUES ('run.state_tampered', %(run_id)s, %(request_id)s, %(call_id)s, %(expected)s,
        %(data)s);
