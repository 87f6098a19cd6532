-- The statements of storage/local_runs.py: the runs an application invokes itself (PgLocalRuns).
--
-- One file per storage module, beside it: what storage/local_runs.py runs is here, so a reader
-- of a repository opens one short file (the engine's statements were one file of 1,500 lines,
-- which a reader following one approval opened again at every step). The names are one namespace
-- all the same; storage/queries.py says how the files are read and written, and
-- tests/unit/test_queries.py checks them.

-- name: ensure_local_run
-- A run an application invokes itself (graphs.langchain.in_process), recorded with its audit
-- entry the first time one of its calls asks a human; again, nothing.
WITH run AS (
    INSERT INTO runs (id, thread_id, graph, status, started_by, input)
    VALUES (%(id)s, %(thread_id)s, %(graph)s, 'running', %(started_by)s, '{}'::jsonb)
    ON CONFLICT (id) DO NOTHING
    RETURNING *
), audit AS (
    INSERT INTO audit_events (kind, run_id, principal, data)
    SELECT 'run.started', run.id, run.started_by,
           jsonb_build_object('graph', run.graph, 'in_process', true)
      FROM run
    RETURNING 1
)
SELECT count(*) AS created FROM run;
