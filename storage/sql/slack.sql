-- The statements of storage/slack.py: Slack users linked to local accounts, and the audit
-- entries of clicks on Slack messages' buttons (PgSlack).
--
-- One file per storage module, beside it: what storage/slack.py runs is here, so a reader
-- of a repository opens one short file. The names are one namespace all the same;
-- storage/queries.py says how the files are read and written, and tests/unit/test_queries.py
-- checks them.

-- name: link_slack_user
-- Link a Slack user to a local account (replacing the account's earlier link), with its
-- audit entry. Nothing is linked when there is no such account, or when the Slack user is
-- another account's (taken names it): a Slack user is one person.
WITH target AS (
    SELECT name FROM users WHERE name = %(account)s
), taken AS (
    SELECT account FROM slack_users
     WHERE slack_user = %(slack_user)s AND account <> %(account)s
), linked AS (
    INSERT INTO slack_users (slack_user, account, linked_by)
    SELECT %(slack_user)s, t.name, %(by)s FROM target t
     WHERE NOT EXISTS (SELECT 1 FROM taken)
    ON CONFLICT (account) DO UPDATE
       SET slack_user = EXCLUDED.slack_user, linked_by = EXCLUDED.linked_by, linked_at = now()
    RETURNING account, slack_user
), audit AS (
    INSERT INTO audit_events (kind, principal, data)
    SELECT 'account.slack_linked', %(by)s,
           jsonb_build_object('name', l.account, 'slack_user', l.slack_user)
      FROM linked l
)
SELECT EXISTS (SELECT 1 FROM target) AS found,
       (SELECT account FROM taken) AS taken,
       EXISTS (SELECT 1 FROM linked) AS linked;

-- name: slack_account
-- The local account a Slack user is linked to (no row: none).
SELECT account FROM slack_users WHERE slack_user = %(slack_user)s;

-- name: account_slack_user
-- The Slack user a local account is linked to (no row: none).
SELECT slack_user FROM slack_users WHERE account = %(account)s;

-- name: record_slack_click
-- What became of a click on a Slack message's button (or a modal's submission): it decided,
-- it opened a modal that asks for a reason or an answer, or it was refused and why. Audited
-- with the request it names (none when the click named no request id at all), and with
-- its run and tool while the request is still there.
INSERT INTO audit_events (kind, run_id, request_id, call_id, tool, state_version, principal, data)
SELECT %(kind)s, a.run_id, %(request_id)s::uuid, a.call_id, a.tool, a.state_version, %(principal)s, %(data)s
  FROM (SELECT 1) AS one
  LEFT JOIN approval_requests a ON a.id = %(request_id)s::uuid;

-- name: unlink_slack_oidc_principal
-- Before an OpenID Connect principal's link: its link to another Slack user goes (one
-- principal, one Slack user). The audit entry is the new link's.
DELETE FROM slack_oidc_users
 WHERE principal = %(principal)s AND slack_user <> %(slack_user)s;

-- name: link_slack_oidc_user
-- Link a Slack user to an OpenID Connect principal that signed in with the configured claim
-- naming it (replacing the Slack user's earlier link), audited as account.slack_linked when
-- the link is new or changed (not at each sign-in). changed: whether it was.
WITH linked AS (
    INSERT INTO slack_oidc_users (slack_user, principal)
    VALUES (%(slack_user)s, %(principal)s)
    ON CONFLICT (slack_user) DO UPDATE
       SET principal = EXCLUDED.principal, linked_at = now()
     WHERE slack_oidc_users.principal <> EXCLUDED.principal
    RETURNING slack_user, principal
), audit AS (
    INSERT INTO audit_events (kind, principal, data)
    SELECT 'account.slack_linked', l.principal,
           jsonb_build_object('principal', l.principal, 'slack_user', l.slack_user,
                              'via', 'oidc')
      FROM linked l
)
SELECT EXISTS (SELECT 1 FROM linked) AS changed;

-- name: slack_oidc_principal
-- The OpenID Connect principal a Slack user is linked to, with the name and the groups of its
-- newest live web session, its last sign-in's (live: null; no row: not linked).
SELECT o.principal, s.name, s.groups
  FROM slack_oidc_users o
  LEFT JOIN LATERAL (
      SELECT name, groups FROM web_sessions w
       WHERE w.principal = o.principal AND w.via = 'oidc' AND w.expires_at > now()
       ORDER BY w.created_at DESC
       LIMIT 1) s ON true
 WHERE o.slack_user = %(slack_user)s;

-- name: oidc_slack_user
-- The Slack user an OpenID Connect principal is linked to (no row: none).
SELECT slack_user FROM slack_oidc_users WHERE principal = %(principal)s;
