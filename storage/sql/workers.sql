-- The statements of storage/workers.py: the live workers and what they serve (migration 0035).
--
-- One file per storage module, beside it (storage/queries.py says how the files are read).

-- name: worker_seen
-- A worker says it is alive, and which graphs it serves (its row made or refreshed).
INSERT INTO workers (id, host, pid, graphs, config_digest)
VALUES (%(id)s, %(host)s, %(pid)s, %(graphs)s, %(config_digest)s)
ON CONFLICT (id) DO UPDATE
   SET graphs = EXCLUDED.graphs, config_digest = EXCLUDED.config_digest, seen_at = now();

-- name: worker_gone
-- A worker that stops takes its row with it.
DELETE FROM workers WHERE id = %(id)s;

-- name: live_workers
-- The workers seen within the last %(within)s seconds, newest first.
SELECT id, host, pid, graphs, config_digest, started_at, seen_at
  FROM workers
 WHERE seen_at > now() - make_interval(secs => %(within)s)
 ORDER BY seen_at DESC;

-- name: unserved_jobs
-- The queued resume jobs, by their run's graph, that no worker seen within the last
-- %(within)s seconds serves.
SELECT r.graph, count(*) AS n
  FROM resume_queue q JOIN runs r ON r.id = q.run_id
 WHERE q.status = 'queued'
   AND NOT EXISTS (
       SELECT 1 FROM workers w
        WHERE w.seen_at > now() - make_interval(secs => %(within)s)
          AND r.graph = ANY (w.graphs))
 GROUP BY r.graph ORDER BY r.graph;

-- name: forget_stale_workers
-- Rows of workers not seen for a long while (killed, never deleted their row).
DELETE FROM workers WHERE seen_at < now() - make_interval(secs => %(older_than)s);
