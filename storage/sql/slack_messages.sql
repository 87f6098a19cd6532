-- The statements of storage/slack_messages.py: the Slack messages posted for requests, and
-- the updates they owe once their request no longer waits for them (PgSlackMessages).
--
-- One file per storage module, beside it: what storage/slack_messages.py runs is here, so a
-- reader of a repository opens one short file. The names are one namespace all the same;
-- storage/queries.py says how the files are read and written, and tests/unit/test_queries.py
-- checks them.

-- name: record_slack_message
-- A message chat.postMessage posted for a request at its escalation level, to a configured
-- channel (target) that Slack answered with its channel id and the message's ts. A repeated
-- post of the same target at the same level (a retry) replaces the earlier ts.
INSERT INTO slack_messages (request_id, escalation_level, target, channel, ts)
VALUES (%(request_id)s, %(escalation_level)s, %(target)s, %(channel)s, %(ts)s)
ON CONFLICT (request_id, escalation_level, target) DO UPDATE
   SET channel = EXCLUDED.channel, ts = EXCLUDED.ts, posted_at = now();

-- name: slack_posted_targets
-- The configured channels a request's message was already posted to at its escalation level
-- (a retry of the post sends only to the others).
SELECT target FROM slack_messages
 WHERE request_id = %(request_id)s AND escalation_level = %(escalation_level)s;

-- name: claim_slack_updates
-- One poll of the notifier: claims the messages whose request no longer waits for them (it
-- was decided, expired, superseded or cancelled, or escalated past the message's level), and
-- due retries and lapsed leases, with SKIP LOCKED. A claim is a lease: status 'updating'
-- until next_attempt_at.
WITH due AS (
    SELECT m.id
      FROM slack_messages m
      JOIN approval_requests r ON r.id = m.request_id
     WHERE m.status IN ('posted', 'updating', 'retry') AND m.next_attempt_at <= now()
       AND (r.status <> 'pending' OR coalesce(r.escalation_level, 0) > m.escalation_level)
     ORDER BY m.next_attempt_at
     LIMIT %(limit)s
       FOR UPDATE OF m SKIP LOCKED
)
UPDATE slack_messages m
   SET status = 'updating', attempts = m.attempts + 1,
       next_attempt_at = now() + make_interval(secs => %(lease_seconds)s::float8)
  FROM due
 WHERE m.id = due.id
RETURNING m.id, m.request_id::text AS request_id, m.escalation_level, m.channel, m.ts,
          m.attempts;

-- name: record_slack_update
-- Settle one attempt to update a message, if the claim is still this sender's: 'retry' is
-- due again in retry_in seconds.
UPDATE slack_messages
   SET status = %(status)s,
       next_attempt_at = CASE WHEN %(status)s::text = 'retry'
                              THEN now() + make_interval(secs => %(retry_in)s::float8)
                              ELSE next_attempt_at END,
       last_error = %(error)s,
       updated_at = CASE WHEN %(status)s::text = 'updated' THEN now() ELSE updated_at END
 WHERE id = %(id)s AND status = 'updating' AND attempts = %(attempt)s
RETURNING id;

-- name: slack_message_settled
-- A message the interactions face updated itself to show how its request ended (after a
-- click): the notifier owes it nothing more.
UPDATE slack_messages
   SET status = 'updated', updated_at = now(), last_error = NULL
 WHERE channel = %(channel)s AND ts = %(ts)s AND status IN ('posted', 'retry');

-- name: request_slack_messages
-- A request's messages, oldest first.
SELECT id, request_id::text AS request_id, escalation_level, target, channel, ts, status,
       attempts, last_error, posted_at, updated_at
  FROM slack_messages
 WHERE request_id = %(request_id)s
 ORDER BY id;
