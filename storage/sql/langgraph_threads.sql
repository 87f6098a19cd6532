-- The statements of storage/langgraph_threads.py: the LangGraph Server face's threads and the
-- metadata their creators gave them (PgLangGraphThreads).
--
-- One file per storage module, beside it: what storage/langgraph_threads.py runs is here, so a
-- reader of a repository opens one short file. The names are one namespace all the same;
-- storage/queries.py says how the files are read and written, and tests/unit/test_queries.py
-- checks them.

-- name: create_langgraph_thread
-- Keep a new thread with its metadata. Nothing is kept (no row) when the id is taken: a
-- thread already kept, or one a run was started on (thread ids are one namespace).
INSERT INTO langgraph_threads (thread_id, metadata, created_by)
SELECT %(thread_id)s, %(metadata)s, %(by)s
 WHERE NOT EXISTS (SELECT 1 FROM runs WHERE thread_id = %(thread_id)s)
ON CONFLICT (thread_id) DO NOTHING
RETURNING thread_id, metadata, created_by, created_at;

-- name: langgraph_thread
-- A kept thread (no row: none).
SELECT thread_id, metadata, created_by, created_at
  FROM langgraph_threads WHERE thread_id = %(thread_id)s;

-- name: langgraph_threads_matching
-- The metadata of the given threads (a JSON array of {thread_id, graph}: each thread and its
-- latest run's graph): what was kept, with graph_id and assistant_id over it; only the threads
-- whose metadata contains `wanted` (jsonb containment).
SELECT c.thread_id,
       COALESCE(m.metadata, '{}'::jsonb)
       || jsonb_build_object('graph_id', c.graph, 'assistant_id', c.graph) AS metadata
  FROM jsonb_to_recordset(%(threads)s::jsonb) AS c (thread_id text, graph text)
  LEFT JOIN langgraph_threads m ON m.thread_id = c.thread_id
 WHERE (COALESCE(m.metadata, '{}'::jsonb)
        || jsonb_build_object('graph_id', c.graph, 'assistant_id', c.graph)) @> %(wanted)s::jsonb;

-- name: own_langgraph_threads_without_runs
-- The threads a principal created that hold no run yet, whose metadata contains `wanted`
-- (among `ids` when given), newest first.
SELECT m.thread_id, m.metadata, m.created_by, m.created_at
  FROM langgraph_threads m
 WHERE m.created_by = %(by)s
   AND m.metadata @> %(wanted)s::jsonb
   AND (%(ids)s::text[] IS NULL OR m.thread_id = ANY(%(ids)s::text[]))
   AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.thread_id = m.thread_id)
 ORDER BY m.created_at DESC
 LIMIT %(limit)s;
