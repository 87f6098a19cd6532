-- The statements of storage/migrate.py: the schema versions applied and the role connected as
-- (`approvals db upgrade`; PgOperations reads the versions too, for readiness).
--
-- One file per storage module, beside it: what storage/migrate.py runs is here, so a reader of a
-- repository opens one short file (the engine's statements were one file of 1,500 lines, which a
-- reader following one approval opened again at every step). The names are one namespace all the
-- same; storage/queries.py says how the files are read and written, and
-- tests/unit/test_queries.py checks them.

-- name: schema_versions
-- The engine's Alembic revision and LangGraph's checkpoint-table version, as applied.
SELECT (SELECT version_num FROM alembic_version LIMIT 1) AS revision,
       (SELECT max(v) FROM checkpoint_migrations) AS checkpoints;

-- name: connected_role
-- The role this connection acts as (migrations skip granting the runtime role to itself).
SELECT current_user::text AS role;
