-- The examples' own table, outside the engine's migrations: `approvals db upgrade` applies this
-- file after them (storage.migrate.EXTENSION_SCHEMAS), as the tables' owner and before the
-- runtime role is granted, so the runtime role gets the same rights on it as on the engine's
-- tables. Written to be run again: a database migrated before this moved here already has it.

-- Every real invocation of an example tool; deliberately no unique constraint so that a double
-- execution would show up as two rows.
CREATE TABLE IF NOT EXISTS demo_side_effects (
    id bigserial PRIMARY KEY,
    run_id uuid NOT NULL,
    call_id text NOT NULL,
    tool text NOT NULL,
    args jsonb NOT NULL,
    at timestamptz NOT NULL DEFAULT now()
);
