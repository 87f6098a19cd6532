"""The decision log: append-only, hash-chained.

Each event gets its id, its time and its place in the chain from a BEFORE INSERT trigger:
``hash = sha256(prev_hash || canonical(event))`` (``approvals.audit`` defines the canonical form
and recomputes it independently). The chain's head (last id, last hash) is one row that the
trigger locks, so inserts are serialised until their transaction ends and ids are gapless:
a missing id is a removed event. UPDATE, DELETE and TRUNCATE are refused.

Revision ID: 0005
Revises: 0004
"""

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        ALTER TABLE audit_events
            ADD COLUMN state_version text,
            ADD COLUMN tool text,
            ADD COLUMN prev_hash text,
            ADD COLUMN hash text;
        -- Ids come from the chain's head, under its lock: gapless, in chain order.
        ALTER TABLE audit_events ALTER COLUMN id DROP DEFAULT;
        CREATE INDEX audit_events_at_idx ON audit_events (at);

        -- Where the chain ends. legacy_until: ids up to it were numbered before the chain (by a
        -- sequence, which leaves gaps on rollback), so a gap there is not a removal.
        CREATE TABLE audit_chain_head (
            singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
            last_id bigint NOT NULL,
            hash text NOT NULL,
            legacy_until bigint NOT NULL
        );

        -- The canonical form of an event: JSON, keys sorted, no spaces, strings escaped as
        -- to_json does; at in UTC with microseconds; data is its jsonb text, spliced verbatim.
        CREATE FUNCTION approvals_audit_canonical(e audit_events) RETURNS text
        LANGUAGE sql STABLE AS $fn$
            SELECT '{"at":'
                || to_json(to_char(e.at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))::text
                || ',"call_id":' || COALESCE(to_json(e.call_id)::text, 'null')
                || ',"data":' || e.data::text
                || ',"id":' || e.id::text
                || ',"kind":' || to_json(e.kind)::text
                || ',"principal":' || COALESCE(to_json(e.principal)::text, 'null')
                || ',"request_id":' || COALESCE(to_json(e.request_id::text)::text, 'null')
                || ',"run_id":' || COALESCE(to_json(e.run_id::text)::text, 'null')
                || ',"state_version":' || COALESCE(to_json(e.state_version)::text, 'null')
                || ',"tool":' || COALESCE(to_json(e.tool)::text, 'null')
                || '}'
        $fn$;

        CREATE FUNCTION approvals_audit_hash(prev_hash text, e audit_events) RETURNS text
        LANGUAGE sql STABLE AS $fn$
            SELECT encode(sha256(convert_to(prev_hash || approvals_audit_canonical(e), 'UTF8')),
                          'hex')
        $fn$;

        -- Chain the events written so far, in id order.
        UPDATE audit_events
           SET state_version = data->>'state_version', tool = data->>'tool';
        DO $do$
        DECLARE
            e audit_events;
            prev text := repeat('0', 64);
            last bigint := 0;
        BEGIN
            FOR e IN SELECT * FROM audit_events ORDER BY id LOOP
                e.prev_hash := prev;
                e.hash := approvals_audit_hash(prev, e);
                UPDATE audit_events SET prev_hash = e.prev_hash, hash = e.hash WHERE id = e.id;
                prev := e.hash;
                last := e.id;
            END LOOP;
            INSERT INTO audit_chain_head (last_id, hash, legacy_until) VALUES (last, prev, last);
        END
        $do$;
        ALTER TABLE audit_events
            ALTER COLUMN prev_hash SET NOT NULL,
            ALTER COLUMN hash SET NOT NULL;

        -- Every new event: the next id, the database's clock (a caller cannot backdate), and
        -- its link. The head's row lock is held until the transaction ends, so the next event
        -- links to this one only once it is committed (or to its predecessor, if rolled back).
        CREATE FUNCTION approvals_audit_chain() RETURNS trigger LANGUAGE plpgsql AS $fn$
        DECLARE
            head audit_chain_head;
        BEGIN
            SELECT * INTO STRICT head FROM audit_chain_head FOR UPDATE;
            NEW.id := head.last_id + 1;
            NEW.at := clock_timestamp();
            NEW.data := COALESCE(NEW.data, '{}'::jsonb);
            NEW.prev_hash := head.hash;
            NEW.hash := approvals_audit_hash(head.hash, NEW);
            UPDATE audit_chain_head SET last_id = NEW.id, hash = NEW.hash;
            RETURN NEW;
        END
        $fn$;
        CREATE TRIGGER audit_events_chain BEFORE INSERT ON audit_events
            FOR EACH ROW EXECUTE FUNCTION approvals_audit_chain();

        CREATE FUNCTION approvals_audit_refuse() RETURNS trigger LANGUAGE plpgsql AS $fn$
        BEGIN
            -- The head moves only with an insert into the log (the trigger above, one level
            -- down); nothing else may touch it.
            IF TG_TABLE_NAME = 'audit_chain_head' AND TG_OP = 'UPDATE'
               AND pg_trigger_depth() > 1 THEN
                RETURN NULL;
            END IF;
            RAISE EXCEPTION 'the decision log is append-only: % on % is refused',
                TG_OP, TG_TABLE_NAME
                USING ERRCODE = 'insufficient_privilege',
                      HINT = 'events are hash-chained; `approvals audit verify` checks them';
        END
        $fn$;
        CREATE TRIGGER audit_events_append_only
            BEFORE UPDATE OR DELETE OR TRUNCATE ON audit_events
            FOR EACH STATEMENT EXECUTE FUNCTION approvals_audit_refuse();
        CREATE TRIGGER audit_chain_head_guard
            BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON audit_chain_head
            FOR EACH STATEMENT EXECUTE FUNCTION approvals_audit_refuse();
        """
    )


def downgrade() -> None:
    op.execute(
        """
        DROP TRIGGER audit_events_append_only ON audit_events;
        DROP TRIGGER audit_events_chain ON audit_events;
        DROP TABLE audit_chain_head;
        DROP FUNCTION approvals_audit_refuse();
        DROP FUNCTION approvals_audit_chain();
        DROP FUNCTION approvals_audit_hash(text, audit_events);
        DROP FUNCTION approvals_audit_canonical(audit_events);
        DROP INDEX audit_events_at_idx;
        ALTER TABLE audit_events
            DROP COLUMN hash,
            DROP COLUMN prev_hash,
            DROP COLUMN tool,
            DROP COLUMN state_version;
        SELECT setval('audit_events_id_seq', COALESCE((SELECT max(id) FROM audit_events), 0) + 1,
                      false);
        ALTER TABLE audit_events ALTER COLUMN id SET DEFAULT nextval('audit_events_id_seq');
        """
    )
