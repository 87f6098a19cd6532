-- The statements of storage/roles.py: the runtime role's grants (grant_runtime).
--
-- One file per storage module, beside it: what storage/roles.py runs is here, so a reader of a
-- repository opens one short file (the engine's statements were one file of 1,500 lines, which a
-- reader following one approval opened again at every step). The names are one namespace all the
-- same; storage/queries.py says how the files are read and written, and
-- tests/unit/test_queries.py checks them.

-- name: grant_runtime_role
-- Grant a runtime role exactly what the engine needs, from nothing (migration 0013); run as
-- the tables' owner.
SELECT object, privileges FROM approvals_grant_runtime_v1(%(role)s);
