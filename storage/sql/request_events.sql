-- The statements of storage/request_events.py: request events, pushed to live views
-- (RequestEventHub, RequestFeed).
--
-- One file per storage module, beside it: what storage/request_events.py runs is here, so a
-- reader of a repository opens one short file (the engine's statements were one file of 1,500
-- lines, which a reader following one approval opened again at every step). The names are one
-- namespace all the same; storage/queries.py says how the files are read and written, and
-- tests/unit/test_queries.py checks them.

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
