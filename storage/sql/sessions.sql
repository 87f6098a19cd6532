-- The statements of storage/sessions.py: the web app's server-side sessions (PgSessions).
--
-- One file per storage module, beside it: what storage/sessions.py runs is here, so a reader of
-- a repository opens one short file (the engine's statements were one file of 1,500 lines, which
-- a reader following one approval opened again at every step). The names are one namespace all
-- the same; storage/queries.py says how the files are read and written, and
-- tests/unit/test_queries.py checks them.

-- name: create_web_session
-- A new session (only the hash of its id is stored); expired sessions are swept on the way.
WITH swept AS (
    DELETE FROM web_sessions WHERE expires_at <= now()
)
INSERT INTO web_sessions (id_hash, principal, name, via, account, groups, expires_at)
VALUES (%(id_hash)s, %(principal)s, %(name)s, %(via)s, %(account)s, %(groups)s,
        now() + make_interval(secs => %(ttl_seconds)s))
RETURNING expires_at;

-- name: web_session
-- The live session with this id hash: not expired and, for a local account, still enabled and
-- in the groups the session holds. A change of groups ends the sessions stored by then; a
-- sign-in that read the groups before it and stored its session after holds the old ones,
-- and is refused here. Its last-seen time is refreshed at most once a minute (not a write per
-- page view).
WITH live AS (
    SELECT s.*
      FROM web_sessions s
      LEFT JOIN users u ON u.name = s.account
     WHERE s.id_hash = %(id_hash)s AND s.expires_at > now()
       AND (s.account IS NULL
            OR (NOT u.disabled AND u.groups @> s.groups AND s.groups @> u.groups))
), touched AS (
    UPDATE web_sessions w SET last_seen_at = now()
      FROM live
     WHERE w.id_hash = live.id_hash AND live.last_seen_at < now() - interval '60 seconds'
)
SELECT principal, name, via, account, groups, created_at, expires_at, last_seen_at FROM live;

-- name: end_web_session
-- Sign-out: the session's row goes; its cookie then names nothing.
DELETE FROM web_sessions WHERE id_hash = %(id_hash)s RETURNING principal;

-- name: end_principal_sessions
-- Every session of one principal (an operator's `approvals sessions end`), with an audit entry
-- when there was any.
WITH ended AS (
    DELETE FROM web_sessions WHERE principal = %(principal)s RETURNING id_hash
), audit AS (
    INSERT INTO audit_events (kind, principal, data)
    SELECT 'sessions.ended', %(by)s,
           jsonb_build_object('principal', %(principal)s::text, 'sessions', count(*))
      FROM ended
    HAVING count(*) > 0
)
SELECT count(*) AS ended FROM ended;

-- name: list_web_sessions
-- Live sessions (all, or one principal's), newest first; never the ids.
SELECT principal, name, via, account, groups, created_at, expires_at, last_seen_at
  FROM web_sessions
 WHERE expires_at > now() AND (%(principal)s::text IS NULL OR principal = %(principal)s)
 ORDER BY created_at DESC
 LIMIT %(limit)s;
