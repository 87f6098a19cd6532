-- The statements of storage/grants.py: standing grants ("always" for one tool in one run),
-- kept beside the requests they came from, each change written with its audit event.
--
-- One file per storage module, beside it: what storage/grants.py runs is here, so a reader of
-- a repository opens one short file. The names are one namespace all the same;
-- storage/queries.py says how the files are read and written, and tests/unit/test_queries.py
-- checks them.

-- name: make_grant
-- The grant an "always" decision made, with its audit event: for the decided request's run
-- and tool, bound to the rule that escalated it. The event follows the decision's in the log.
WITH made AS (
    INSERT INTO standing_grants (id, run_id, tool, rule, ruling, within, request_id, granted_by)
    SELECT %(id)s, r.run_id, r.tool, %(rule)s, %(ruling)s, %(within)s, r.id, %(principal)s
      FROM approval_requests r
      JOIN decisions d ON d.request_id = r.id AND d.id = %(decision_id)s
     WHERE r.id = %(request_id)s
    RETURNING *
), audit AS (
    INSERT INTO audit_events (kind, run_id, request_id, call_id, tool, principal, data)
    SELECT 'grant.made', m.run_id, m.request_id, r.call_id, m.tool, %(principal)s,
           jsonb_build_object('grant', m.id, 'decision', m.ruling, 'rule', m.rule,
                              'within', m.within)
      FROM made m JOIN approval_requests r ON r.id = m.request_id
)
SELECT * FROM made;

-- name: live_grants
-- The live grants of a run for a tool and the rule that escalates its call: a rejecting
-- grant first (fail closed), then the newest.
SELECT * FROM standing_grants
 WHERE run_id = %(run_id)s AND tool = %(tool)s AND rule = %(rule)s AND revoked_at IS NULL
 ORDER BY ruling = 'approve', granted_at DESC, id;

-- name: grant_used_for
-- The grant that already decided this call (a replayed step asks again): its answer stands.
SELECT g.* FROM standing_grant_uses u JOIN standing_grants g ON g.id = u.grant_id
 WHERE u.run_id = %(run_id)s AND u.call_id = %(call_id)s AND u.identity = %(identity)s;

-- name: use_grant
-- One use of a grant that is still live, kept, counted and audited in one statement. A grant
-- revoked in between decides nothing (no row), nor does one for a call that has a request of
-- its own already (opened before the grant was made): a human's decision on it stands.
WITH used AS (
    UPDATE standing_grants SET uses = uses + 1
     WHERE id = %(id)s AND revoked_at IS NULL
       AND NOT EXISTS (SELECT 1 FROM approval_requests r
                        WHERE r.run_id = %(run_id)s AND r.call_id = %(call_id)s
                          AND r.identity = %(identity)s)
    RETURNING *
), kept AS (
    INSERT INTO standing_grant_uses (grant_id, run_id, call_id, identity)
    SELECT u.id, u.run_id, %(call_id)s, %(identity)s FROM used u
), audit AS (
    INSERT INTO audit_events (kind, run_id, request_id, call_id, tool, principal, data)
    SELECT 'grant.used', u.run_id, u.request_id, %(call_id)s, u.tool, u.granted_by,
           jsonb_build_object('grant', u.id, 'decision', u.ruling, 'rule', u.rule,
                              'identity', %(identity)s::text, 'use', u.uses)
      FROM used u
)
SELECT * FROM used;

-- name: run_grants
-- Every grant made in a run, live or revoked, oldest first.
SELECT * FROM standing_grants WHERE run_id = %(run_id)s ORDER BY granted_at, id;

-- name: revoke_grant
-- Revoke a live grant, with its audit event; a revoked grant is returned as it is.
WITH revoked AS (
    UPDATE standing_grants SET revoked_at = now(), revoked_by = %(principal)s
     WHERE id = %(id)s AND revoked_at IS NULL
    RETURNING *
), audit AS (
    INSERT INTO audit_events (kind, run_id, request_id, tool, principal, data)
    SELECT 'grant.revoked', v.run_id, v.request_id, v.tool, %(principal)s,
           jsonb_build_object('grant', v.id, 'decision', v.ruling, 'rule', v.rule,
                              'uses', v.uses)
      FROM revoked v
)
SELECT * FROM revoked
UNION ALL
SELECT * FROM standing_grants
 WHERE id = %(id)s AND NOT EXISTS (SELECT 1 FROM revoked);

-- name: grant_by_id
-- One grant, live or revoked.
SELECT * FROM standing_grants WHERE id = %(id)s;
