"""Core tables: runs, approval requests, decisions, resume queue, tool ledger, audit.

This revision once also created the demo's ``demo_side_effects`` table; the examples own it
now (``graphs/examples/schema.sql``), and a database migrated before keeps it.

Revision ID: 0001
Revises:
"""

from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE runs (
            id uuid PRIMARY KEY,
            thread_id text NOT NULL,
            graph text NOT NULL,
            status text NOT NULL CHECK (status IN ('running', 'waiting', 'completed', 'failed')),
            started_by text NOT NULL,
            input jsonb NOT NULL,
            error text,
            answer text,
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX runs_thread_idx ON runs (thread_id);

        CREATE TABLE approval_requests (
            id uuid PRIMARY KEY,
            run_id uuid NOT NULL REFERENCES runs (id),
            thread_id text NOT NULL,
            call_id text NOT NULL,
            tool text NOT NULL,
            shown jsonb NOT NULL,
            args_schema jsonb NOT NULL,
            identity text NOT NULL,
            reason text,
            interrupt_id text,
            state_version text,
            requested_by text NOT NULL,
            status text NOT NULL DEFAULT 'pending'
                CHECK (status IN ('pending', 'approved', 'rejected', 'expired', 'superseded')),
            created_at timestamptz NOT NULL DEFAULT now(),
            expires_at timestamptz NOT NULL,
            decided_at timestamptz,
            UNIQUE (run_id, call_id, identity)
        );
        -- At most one live request per call: a changed call supersedes the old one.
        CREATE UNIQUE INDEX approval_requests_one_pending
            ON approval_requests (run_id, call_id) WHERE status = 'pending';
        CREATE INDEX approval_requests_status_idx ON approval_requests (status, created_at);

        CREATE TABLE decisions (
            id uuid PRIMARY KEY,
            -- UNIQUE: a request is decided at most once, whatever the code above does.
            request_id uuid NOT NULL UNIQUE REFERENCES approval_requests (id),
            run_id uuid NOT NULL REFERENCES runs (id),
            call_id text NOT NULL,
            kind text NOT NULL CHECK (kind IN ('approve', 'reject', 'edit')),
            principal text NOT NULL,
            reason text,
            args jsonb,
            args_identity text,
            decided_at timestamptz NOT NULL DEFAULT now()
        );

        CREATE TABLE resume_queue (
            id bigserial PRIMARY KEY,
            request_id uuid NOT NULL REFERENCES approval_requests (id),
            decision_id uuid NOT NULL UNIQUE REFERENCES decisions (id),
            run_id uuid NOT NULL REFERENCES runs (id),
            thread_id text NOT NULL,
            status text NOT NULL DEFAULT 'queued'
                CHECK (status IN ('queued', 'done', 'skipped', 'failed')),
            attempts integer NOT NULL DEFAULT 0,
            last_error text,
            created_at timestamptz NOT NULL DEFAULT now(),
            finished_at timestamptz
        );
        CREATE INDEX resume_queue_queued_idx ON resume_queue (id) WHERE status = 'queued';

        CREATE TABLE tool_executions (
            id bigserial PRIMARY KEY,
            run_id uuid NOT NULL REFERENCES runs (id),
            call_id text NOT NULL,
            tool text NOT NULL,
            idempotency_key text NOT NULL UNIQUE,
            args_identity text NOT NULL,
            status text NOT NULL
                CHECK (status IN ('started', 'succeeded', 'failed', 'outcome_unknown')),
            result jsonb,
            error text,
            started_at timestamptz NOT NULL DEFAULT now(),
            finished_at timestamptz,
            UNIQUE (run_id, call_id)
        );

        CREATE TABLE audit_events (
            id bigserial PRIMARY KEY,
            at timestamptz NOT NULL DEFAULT now(),
            kind text NOT NULL,
            run_id uuid,
            request_id uuid,
            call_id text,
            principal text,
            data jsonb NOT NULL DEFAULT '{}'::jsonb
        );
        CREATE INDEX audit_events_run_idx ON audit_events (run_id, id);

        -- Where a run stands after a step: its status, and the interrupt id of each call it now
        -- waits on. Shared by the statements that end a step (a run's lease, a resume job).
        CREATE FUNCTION approvals_settle_run(
            p_run_id uuid, p_status text, p_error text, p_answer text,
            p_request_ids uuid[], p_interrupt_ids text[]
        ) RETURNS void LANGUAGE sql AS $fn$
            UPDATE approval_requests r
               SET interrupt_id = b.interrupt_id
              FROM unnest(p_request_ids, p_interrupt_ids) AS b(request_id, interrupt_id)
             WHERE r.id = b.request_id AND r.interrupt_id IS DISTINCT FROM b.interrupt_id;
            UPDATE runs
               SET status = p_status, error = p_error, answer = COALESCE(p_answer, answer),
                   updated_at = now()
             WHERE id = p_run_id;
        $fn$;
        """
    )


def downgrade() -> None:
    op.execute(
        """
        DROP FUNCTION approvals_settle_run;
        DROP TABLE IF EXISTS demo_side_effects;  -- created here before the examples owned it
        DROP TABLE audit_events;
        DROP TABLE tool_executions;
        DROP TABLE resume_queue;
        DROP TABLE decisions;
        DROP TABLE approval_requests;
        DROP TABLE runs;
        """
    )
