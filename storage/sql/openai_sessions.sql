-- The statements of storage/openai_sessions.py: the conversation history of the OpenAI Agents
-- SDK sessions the engine keeps (PgOpenAISessions), one session per thread.
--
-- One file per storage module, beside it: what storage/openai_sessions.py runs is here, so a
-- reader of a repository opens one short file. The names are one namespace all the same;
-- storage/queries.py says how the files are read and written, and tests/unit/test_queries.py
-- checks them. Runs of one thread hold its lock while they read or write its session, so
-- these statements need no lock of their own.

-- name: openai_session_items
-- A thread's session items in the order they were added; the latest `limit` of them when a
-- limit is given (NULL: all of them), still oldest first.
SELECT item FROM (
    SELECT id, item FROM openai_session_items
     WHERE thread_id = %(thread_id)s
     ORDER BY id DESC
     LIMIT %(limit)s
) latest
 ORDER BY id;

-- name: add_openai_session_items
-- Append items to a thread's session, in the order given, marked with the run that added
-- them (pruning the run's thread takes them with it).
INSERT INTO openai_session_items (thread_id, run_id, item)
SELECT %(thread_id)s, %(run_id)s, given.item
  FROM jsonb_array_elements(%(items)s::jsonb) WITH ORDINALITY AS given (item, n)
 ORDER BY given.n;

-- name: pop_openai_session_item
-- Remove a thread's most recent session item and return it (no row: the session is empty).
DELETE FROM openai_session_items
 WHERE id = (SELECT id FROM openai_session_items
              WHERE thread_id = %(thread_id)s ORDER BY id DESC LIMIT 1)
RETURNING item;

-- name: clear_openai_session
-- Remove every item of a thread's session.
DELETE FROM openai_session_items WHERE thread_id = %(thread_id)s;
