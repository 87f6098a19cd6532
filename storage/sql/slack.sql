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
