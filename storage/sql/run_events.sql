-- The statements of storage/run_events.py: run events and run notifications (PgRunEvents,
-- RunEventHub).
--
-- One file per storage module, beside it: what storage/run_events.py runs is here, so a reader
-- of a repository opens one short file (the engine's statements were one file of 1,500 lines,
-- which a reader following one approval opened again at every step). The names are one namespace
-- all the same; storage/queries.py says how the files are read and written, and
-- tests/unit/test_queries.py checks them.

-- name: publish_run_event
-- One node update of a run's step, and a wake-up for whoever streams the run.
WITH event AS (
    INSERT INTO run_events (run_id, kind, node, data)
    VALUES (%(run_id)s, 'update', %(node)s, %(data)s)
    RETURNING id
)
SELECT event.id, pg_notify('approvals_run_events', %(run_id)s::text) AS sent FROM event;

-- name: run_events_after
-- A run's events after `after` (an event id; 0 for all), in order.
SELECT id, kind, node, data, at
  FROM run_events
 WHERE run_id = %(run_id)s AND id > %(after)s
 ORDER BY id
 LIMIT %(limit)s;

-- name: claim_run_notifications
-- One poll of the notifier for runs: records (and claims) a delivery per channel for each
-- status event of the last day that says a run waits or ended, insert-if-absent (of two
-- workers, the one whose insert wins sends), and claims due retries and lapsed leases with
-- SKIP LOCKED. A claim is a lease: status 'sending' until next_attempt_at.
WITH fresh AS (
    INSERT INTO run_notification_deliveries
        (event_id, channel, status, attempts, next_attempt_at)
    SELECT e.id, c.channel, 'sending', 1,
           now() + make_interval(secs => %(lease_seconds)s::float8)
      FROM run_events e
     CROSS JOIN unnest(%(channels)s::text[]) AS c (channel)
     WHERE e.kind = 'status' AND e.at > now() - interval '1 day'
       AND (e.data ->> 'status' = 'waiting' OR approvals_run_finished_v1(e.data ->> 'status'))
       AND NOT EXISTS (
           SELECT 1 FROM run_notification_deliveries d
            WHERE d.event_id = e.id AND d.channel = c.channel)
     ORDER BY e.id
     LIMIT %(limit)s
    ON CONFLICT (event_id, channel) DO NOTHING
    RETURNING *
), due AS (
    SELECT d.id
      FROM run_notification_deliveries d
     WHERE d.status IN ('sending', 'retry') AND d.next_attempt_at <= now()
       AND d.channel = ANY (%(channels)s::text[])
     ORDER BY d.next_attempt_at
     LIMIT %(limit)s
       FOR UPDATE OF d SKIP LOCKED
), retried AS (
    UPDATE run_notification_deliveries d
       SET status = 'sending', attempts = d.attempts + 1,
           next_attempt_at = now() + make_interval(secs => %(lease_seconds)s::float8)
      FROM due
     WHERE d.id = due.id
    RETURNING d.*
)
SELECT x.id, x.channel, x.attempts, e.run_id, e.data ->> 'status' AS status, e.at,
       r.thread_id, r.graph,
       ARRAY(SELECT a.id::text FROM approval_requests a
              WHERE a.run_id = e.run_id AND a.status = 'pending'
              ORDER BY a.created_at, a.id) AS pending
  FROM (SELECT * FROM fresh UNION ALL SELECT * FROM retried) AS x
  JOIN run_events e ON e.id = x.event_id
  JOIN runs r ON r.id = e.run_id
 ORDER BY x.id;

-- name: record_run_notification
-- Settle one run notification attempt, if the claim is still this sender's.
UPDATE run_notification_deliveries
   SET status = %(status)s,
       next_attempt_at = CASE WHEN %(status)s::text = 'retry'
                              THEN now() + make_interval(secs => %(retry_in)s::float8)
                              ELSE next_attempt_at END,
       last_error = %(error)s,
       finished_at = CASE WHEN %(status)s::text = 'retry' THEN NULL ELSE now() END
 WHERE id = %(id)s AND status = 'sending' AND attempts = %(attempt)s
RETURNING id;

-- name: run_notifications
-- A run's notification deliveries, oldest first.
SELECT d.id, d.channel, d.status, d.attempts, d.last_error, e.data ->> 'status' AS event
  FROM run_notification_deliveries d
  JOIN run_events e ON e.id = d.event_id
 WHERE e.run_id = %(run_id)s
 ORDER BY d.id;

-- name: listen_run_events
-- Wake this connection on every run event (the payload is the run's id).
LISTEN approvals_run_events;
