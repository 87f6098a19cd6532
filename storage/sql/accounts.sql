-- The statements of storage/accounts.py: local accounts and API tokens (PgAccounts).
--
-- One file per storage module, beside it: what storage/accounts.py runs is here, so a reader of
-- a repository opens one short file (the engine's statements were one file of 1,500 lines, which
-- a reader following one approval opened again at every step). The names are one namespace all
-- the same; storage/queries.py says how the files are read and written, and
-- tests/unit/test_queries.py checks them.

-- name: create_user
-- A new local account with its audit entry; no row when the name is taken.
WITH created AS (
    INSERT INTO users (name, password_hash, groups)
    VALUES (%(name)s, %(password_hash)s, %(groups)s)
    ON CONFLICT DO NOTHING
    RETURNING name, groups, created_at, disabled
), audit AS (
    INSERT INTO audit_events (kind, principal, data)
    SELECT 'account.created', %(by)s, jsonb_build_object('name', c.name, 'groups', c.groups)
      FROM created c
)
SELECT * FROM created;

-- name: user_credentials
-- What signing in checks: a local account's password hash, groups and whether it is disabled.
SELECT password_hash, groups, disabled FROM users WHERE name = %(name)s;

-- name: rehash_password
-- A local account's password hash replaced by one of today's scheme after the password was
-- checked against it (an scrypt hash, or older Argon2id parameters); only while the stored
-- hash is still the one checked, so a password changed meanwhile is never overwritten.
UPDATE users SET password_hash = %(new)s WHERE name = %(name)s AND password_hash = %(old)s;

-- name: list_users
-- Every local account, by name (never a password hash).
SELECT name, groups, created_at, disabled FROM users ORDER BY name;

-- name: user_by_name
-- One local account, as list_users shows it; no row when there is none of that name.
SELECT name, groups, created_at, disabled FROM users WHERE name = %(name)s;

-- name: disable_user
-- Disable a local account, with its audit entry; no row when there is no such enabled account.
-- The users_end_sessions_v1 trigger ends its web sessions in the same statement.
WITH disabled AS (
    UPDATE users SET disabled = true
     WHERE name = %(name)s AND NOT disabled
    RETURNING name
), audit AS (
    INSERT INTO audit_events (kind, principal, data)
    SELECT 'account.disabled', %(by)s, jsonb_build_object('name', d.name) FROM disabled d
)
SELECT * FROM disabled;

-- name: set_user_groups
-- Replace a local account's groups, with its audit entry; no row when there is no such account.
-- The users_end_sessions trigger ends the account's web sessions in the same statement.
WITH changed AS (
    UPDATE users SET groups = %(groups)s
     WHERE name = %(name)s
    RETURNING name, groups
), audit AS (
    INSERT INTO audit_events (kind, principal, data)
    SELECT 'account.groups_changed', %(by)s, jsonb_build_object('name', c.name, 'groups', c.groups)
      FROM changed c
)
SELECT * FROM changed;

-- name: token_owner
-- The account a new token would belong to: its groups, and whether it is disabled.
SELECT groups, disabled FROM users WHERE name = %(name)s;

-- name: create_token
-- A new API token (its digest only) with its audit entry; no row when the name is taken or its
-- owner is not (or no longer) an enabled local account. owner NULL: a service token.
WITH created AS (
    INSERT INTO api_tokens (name, digest, groups, created_by, owner)
    SELECT %(name)s, %(digest)s, %(groups)s, %(created_by)s, %(owner)s
     WHERE %(owner)s::text IS NULL
        OR EXISTS (SELECT 1 FROM users WHERE name = %(owner)s AND NOT disabled)
    ON CONFLICT DO NOTHING
    RETURNING name, groups, created_by, created_at, revoked_at, owner
), audit AS (
    INSERT INTO audit_events (kind, principal, data)
    SELECT 'token.created', c.created_by,
           jsonb_build_object('name', c.name, 'groups', c.groups, 'owner', c.owner)
      FROM created c
)
SELECT * FROM created;

-- name: token_by_digest
-- An unrevoked token. An owned token is dead while its owner is disabled, and holds only the
-- groups its owner still has (a token never does more than the person it acts for).
SELECT t.name, t.owner,
       CASE WHEN t.owner IS NULL THEN t.groups
            ELSE ARRAY(SELECT g FROM unnest(t.groups) g WHERE g = ANY (u.groups) ORDER BY g)
       END AS groups
  FROM api_tokens t
  LEFT JOIN users u ON u.name = t.owner
 WHERE t.digest = %(digest)s AND t.revoked_at IS NULL
   AND (t.owner IS NULL OR NOT u.disabled);

-- name: revoke_token
-- Revoke a live API token, with its audit entry; no row when there is no such live token.
WITH revoked AS (
    UPDATE api_tokens SET revoked_at = now()
     WHERE name = %(name)s AND revoked_at IS NULL
    RETURNING name
), audit AS (
    INSERT INTO audit_events (kind, principal, data)
    SELECT 'token.revoked', %(by)s, jsonb_build_object('name', r.name) FROM revoked r
)
SELECT * FROM revoked;

-- name: list_tokens
-- Every API token, oldest first, revoked ones included (never a digest).
SELECT name, groups, created_by, created_at, revoked_at, owner
  FROM api_tokens ORDER BY created_at, name;
