-- The statements of storage/notifications.py: request notifications: deliveries and their
-- attempts (PgNotifications).
--
-- One file per storage module, beside it: what storage/notifications.py runs is here, so a
-- reader of a repository opens one short file (the engine's statements were one file of 1,500
-- lines, which a reader following one approval opened again at every step). The names are one
-- namespace all the same; storage/queries.py says how the files are read and written, and
-- tests/unit/test_queries.py checks them.

-- name: claim_notifications
-- One poll of the notifier. Records (and claims) the deliveries owed to pending requests at
-- their current escalation level, insert-if-absent: of two workers, the one whose insert wins
-- sends. Claims due retries and lapsed leases with SKIP LOCKED, and cancels those no longer
-- worth sending (decided, expired or escalated past). A claim is a lease: status 'sending'
-- until next_attempt_at.
WITH fresh AS (
    INSERT INTO notification_deliveries
        (request_id, channel, event, escalation_level, status, attempts, next_attempt_at)
    SELECT r.id, c.channel,
           CASE WHEN coalesce(r.escalation_level, 0) > 0 THEN 'escalated' ELSE 'waiting' END,
           coalesce(r.escalation_level, 0), 'sending', 1,
           now() + make_interval(secs => %(lease_seconds)s::float8)
      FROM approval_requests r
     CROSS JOIN unnest(%(channels)s::text[]) AS c (channel)
     WHERE r.status = 'pending' AND r.expires_at > now()
       AND NOT EXISTS (
           SELECT 1 FROM notification_deliveries d
            WHERE d.request_id = r.id AND d.channel = c.channel
              AND d.escalation_level = coalesce(r.escalation_level, 0))
     ORDER BY r.created_at
     LIMIT %(limit)s
    ON CONFLICT (request_id, channel, escalation_level) DO NOTHING
    RETURNING *
), due AS (
    SELECT d.id
      FROM notification_deliveries d
      JOIN approval_requests r ON r.id = d.request_id
     WHERE d.status IN ('sending', 'retry') AND d.next_attempt_at <= now()
       AND d.channel = ANY (%(channels)s::text[])
       AND r.status = 'pending' AND r.expires_at > now()
       AND d.escalation_level = coalesce(r.escalation_level, 0)
     ORDER BY d.next_attempt_at
     LIMIT %(limit)s
       FOR UPDATE OF d SKIP LOCKED
), retried AS (
    UPDATE notification_deliveries d
       SET status = 'sending', attempts = d.attempts + 1,
           next_attempt_at = now() + make_interval(secs => %(lease_seconds)s::float8)
      FROM due
     WHERE d.id = due.id
    RETURNING d.*
), moot AS (
    SELECT d.id
      FROM notification_deliveries d
      JOIN approval_requests r ON r.id = d.request_id
     WHERE d.status IN ('sending', 'retry') AND d.next_attempt_at <= now()
       AND (r.status <> 'pending' OR r.expires_at <= now()
            OR d.escalation_level <> coalesce(r.escalation_level, 0))
     LIMIT %(limit)s
       FOR UPDATE OF d SKIP LOCKED
), cancelled AS (
    UPDATE notification_deliveries d
       SET status = 'cancelled', finished_at = now()
      FROM moot
     WHERE d.id = moot.id
)
SELECT x.id, x.request_id, x.channel, x.event, x.escalation_level, x.attempts,
       r.run_id, r.tool, r.reason, r.approvers, r.expires_at
  FROM (SELECT * FROM fresh UNION ALL SELECT * FROM retried) AS x
  JOIN approval_requests r ON r.id = x.request_id
 ORDER BY x.id;

-- name: record_notification_attempt
-- Log one attempt and settle its delivery, if the claim is still this sender's (a sender
-- whose lease lapsed and was re-claimed only logs).
WITH logged AS (
    INSERT INTO notification_attempts (delivery_id, attempt, status, response_code, error)
    VALUES (%(id)s, %(attempt)s, %(status)s, %(response_code)s, %(error)s)
)
UPDATE notification_deliveries
   SET status = %(status)s,
       next_attempt_at = CASE WHEN %(status)s::text = 'retry'
                              THEN now() + make_interval(secs => %(retry_in)s::float8)
                              ELSE next_attempt_at END,
       last_error = %(error)s,
       finished_at = CASE WHEN %(status)s::text = 'retry' THEN NULL ELSE now() END
 WHERE id = %(id)s AND status = 'sending' AND attempts = %(attempt)s
RETURNING id;

-- name: request_notifications
-- A request's notification deliveries, by escalation level and channel.
SELECT id, request_id, channel, event, escalation_level, status, attempts, next_attempt_at,
       last_error, created_at, finished_at
  FROM notification_deliveries
 WHERE request_id = %(request_id)s
 ORDER BY escalation_level, channel;

-- name: request_notification_attempts
-- Every attempt to deliver a request's notifications, in order.
SELECT d.request_id, d.channel, d.event, d.escalation_level, a.attempt, a.status,
       a.response_code, a.error, a.at
  FROM notification_attempts a
  JOIN notification_deliveries d ON d.id = a.delivery_id
 WHERE d.request_id = %(request_id)s
 ORDER BY d.escalation_level, d.channel, a.attempt;

-- name: notification_deliveries
-- The newest deliveries first, optionally of one request and/or in one status.
SELECT d.id, d.request_id, a.run_id, a.tool, d.channel, d.event, d.escalation_level, d.status,
       d.attempts, d.next_attempt_at, d.last_error, d.created_at, d.finished_at
  FROM notification_deliveries d
  JOIN approval_requests a ON a.id = d.request_id
 WHERE (%(request_id)s::uuid IS NULL OR d.request_id = %(request_id)s::uuid)
   AND (%(status)s::text IS NULL OR d.status = %(status)s::text)
 ORDER BY d.created_at DESC, d.id DESC
 LIMIT %(limit)s;
