"""Run events: what a run's steps produced, in order, for streaming; run notifications.

``run_events`` holds one row per event of a run: its status whenever it changes (written by a
trigger on ``runs``, so every path that settles, fails or cancels a run publishes it), a
resume being queued (a trigger on ``resume_queue``), and the graph's node updates (written by
the runner as the step produces them). Each insert NOTIFYs ``approvals_run_events`` with the
run's id, so a web process streaming the run (which is rarely the process running the step)
wakes up and reads what is new.

``run_notification_deliveries`` is one webhook notification per (status event, channel):
the notifier's insert-if-absent claims it, so it is sent once across workers.

Revision ID: 0016
Revises: 0015
"""

from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE run_events (
            id bigserial PRIMARY KEY,
            -- Pruning a run takes its events with it.
            run_id uuid NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
            kind text NOT NULL CHECK (kind IN ('status', 'resuming', 'update')),
            node text,
            -- Small, and never a call's arguments: a status, or the content of the agent's
            -- own messages and the names of the tools it called.
            data jsonb NOT NULL DEFAULT '{}'::jsonb,
            at timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX run_events_run_idx ON run_events (run_id, id);
        -- The notifier's poll for status events nobody was told about yet.
        CREATE INDEX run_events_status_idx ON run_events (at) WHERE kind = 'status';

        CREATE FUNCTION approvals_run_status_event() RETURNS trigger
            LANGUAGE plpgsql AS $fn$
        BEGIN
            INSERT INTO run_events (run_id, kind, data)
            VALUES (NEW.id, 'status', jsonb_build_object('status', NEW.status));
            PERFORM pg_notify('approvals_run_events', NEW.id::text);
            RETURN NULL;
        END
        $fn$;
        -- UPDATE OF status fires on every settle, also one that leaves the run waiting (a
        -- step answered one of two parallel calls): each step ends with a status event.
        CREATE TRIGGER runs_status_event AFTER INSERT OR UPDATE OF status ON runs
            FOR EACH ROW EXECUTE FUNCTION approvals_run_status_event();

        CREATE FUNCTION approvals_run_resuming_event() RETURNS trigger
            LANGUAGE plpgsql AS $fn$
        BEGIN
            INSERT INTO run_events (run_id, kind, data)
            VALUES (NEW.run_id, 'resuming', '{}'::jsonb);
            PERFORM pg_notify('approvals_run_events', NEW.run_id::text);
            RETURN NULL;
        END
        $fn$;
        -- A decision queued a resume: a stream of the waiting run stays open for its step.
        CREATE TRIGGER resume_queue_resuming_event AFTER INSERT ON resume_queue
            FOR EACH ROW EXECUTE FUNCTION approvals_run_resuming_event();

        CREATE TABLE run_notification_deliveries (
            id bigserial PRIMARY KEY,
            event_id bigint NOT NULL REFERENCES run_events (id) ON DELETE CASCADE,
            channel text NOT NULL,
            status text NOT NULL CHECK (status IN ('sending', 'retry', 'sent', 'failed')),
            attempts integer NOT NULL DEFAULT 0,
            next_attempt_at timestamptz NOT NULL DEFAULT now(),
            last_error text,
            created_at timestamptz NOT NULL DEFAULT now(),
            finished_at timestamptz,
            -- The worker whose insert wins sends it.
            UNIQUE (event_id, channel)
        );
        CREATE INDEX run_notification_deliveries_due_idx
            ON run_notification_deliveries (next_attempt_at) WHERE status IN ('sending', 'retry');
        """
    )


def downgrade() -> None:
    op.execute(
        """
        DROP TABLE run_notification_deliveries;
        DROP TRIGGER resume_queue_resuming_event ON resume_queue;
        DROP FUNCTION approvals_run_resuming_event();
        DROP TRIGGER runs_status_event ON runs;
        DROP FUNCTION approvals_run_status_event();
        DROP TABLE run_events;
        """
    )
