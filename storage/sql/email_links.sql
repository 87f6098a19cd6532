-- The statements of storage/email_links.py: the audit entries of one-time e-mail links
-- (PgEmailLinks).
--
-- One file per storage module, beside it: what storage/email_links.py runs is here, so a reader
-- of a repository opens one short file. The names are one namespace all the same;
-- storage/queries.py says how the files are read and written, and tests/unit/test_queries.py
-- checks them.

-- name: record_email_link
-- What became of a one-time e-mail link that was posted: used (it decided), or refused and why
-- (reused, expired, a disabled account, one no longer allowed). Audited with the request it
-- names, when the request is still there (retention may have pruned it).
INSERT INTO audit_events (kind, run_id, request_id, call_id, tool, state_version, principal, data)
SELECT %(kind)s, a.run_id, %(request_id)s::uuid, a.call_id, a.tool, a.state_version,
       %(principal)s, %(data)s
  FROM (SELECT 1) AS one
  LEFT JOIN approval_requests a ON a.id = %(request_id)s::uuid;
