-- The statements of storage/audit.py: the decision log, and a run's trail (PgAuditLog).
--
-- One file per storage module, beside it: what storage/audit.py runs is here, so a reader of a
-- repository opens one short file (the engine's statements were one file of 1,500 lines, which a
-- reader following one approval opened again at every step). The names are one namespace all the
-- same; storage/queries.py says how the files are read and written, and
-- tests/unit/test_queries.py checks them.

-- ==== a run's trail ====

-- name: run_audit
-- A run's audit events, oldest first.
SELECT * FROM audit_events WHERE run_id = %(run_id)s ORDER BY id;

-- name: run_interceptions
-- A run's interception records, in the order they happened.
SELECT sequence, session_id, point, decision, reason, interceptor, mode, input_identity,
       enforced_identity, resolved_by, at
  FROM interception_records
 WHERE run_id = %(run_id)s
 ORDER BY sequence, id;

-- ==== decision log ====

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
