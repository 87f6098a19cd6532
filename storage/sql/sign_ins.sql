-- The statements of storage/sign_ins.py: failed sign-ins, counted for every web process
-- (PgSignInCounts).
--
-- One file per storage module, beside it: what storage/sign_ins.py runs is here, so a reader of
-- a repository opens one short file (the engine's statements were one file of 1,500 lines, which
-- a reader following one approval opened again at every step). The names are one namespace all
-- the same; storage/queries.py says how the files are read and written, and
-- tests/unit/test_queries.py checks them.

-- name: sign_in_attempt
-- Count a password sign-in attempt unless its (name, address) or its name's count is at its
-- limit in the window (approvals_sign_in_attempt_v1, migration 0028: under the name's lock, so
-- every process counts one name's attempts one at a time). Returns the seconds to wait and the
-- counted row's id (NULL when it waits).
SELECT wait, counted
  FROM approvals_sign_in_attempt_v1(%(account)s, %(client)s, %(attempts)s,
                                    %(account_attempts)s, %(window)s);

-- name: sign_in_succeeded
-- A counted attempt signed in: its client's earlier failures leave the (name, address) count
-- (they stay in the name's), and the attempt itself leaves both. Committed without waiting
-- for the WAL flush, as the attempt was: lost to a crash, the counts only stay higher.
WITH cleared AS (
    UPDATE sign_in_failures SET client_cleared = true
     WHERE account = %(account)s AND client = %(client)s AND NOT client_cleared
       AND id <> %(counted)s
), removed AS (
    DELETE FROM sign_in_failures WHERE id = %(counted)s
)
SELECT set_config('synchronous_commit', 'off', true) AS commit_mode;
