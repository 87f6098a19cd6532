"""One function ends a step: its interception records, the run's settlement, their audit events.

A run's step ends in two places: the process that started the run (when it lets go of the
thread) and a worker closing a resume job. Both wrote the same three things in their own copy
of one long statement; ``approvals_settle_step`` is now the only copy.

Revision ID: 0009
Revises: 0008
"""

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        -- The end of a step, in this order: the step's payload-free interception records; when
        -- p_status is given, the run's settlement (approvals_settle_run); then the audit events
        -- of the step's policy denials and transforms (in emission order) and of the run's new
        -- status. Returns how many audit events it wrote.
        CREATE FUNCTION approvals_settle_step(
            p_run_id uuid, p_records jsonb, p_status text, p_error text, p_answer text,
            p_request_ids uuid[], p_interrupt_ids text[]
        ) RETURNS integer LANGUAGE plpgsql AS $fn$
        DECLARE
            written integer := 0;
            n integer;
        BEGIN
            INSERT INTO interception_records
                (run_id, session_id, sequence, point, decision, reason, interceptor, mode,
                 input_identity, enforced_identity, resolved_by, record)
            SELECT p_run_id, x.session_id, x.sequence, x.point, x.decision, x.reason,
                   x.interceptor, x.mode, x.input_identity, x.enforced_identity,
                   x.resolved_by, x.record
              FROM jsonb_to_recordset(COALESCE(p_records, '[]'::jsonb)) AS x(
                   session_id text, sequence bigint, point text, decision text, reason text,
                   interceptor text, mode text, input_identity text, enforced_identity text,
                   resolved_by text, record jsonb);

            IF p_status IS NOT NULL THEN
                PERFORM approvals_settle_run(p_run_id, p_status, p_error, p_answer,
                                             p_request_ids, p_interrupt_ids);
            END IF;

            INSERT INTO audit_events (kind, run_id, data)
            SELECT 'policy.' || x.decision, p_run_id,
                   jsonb_build_object('point', x.point, 'reason', x.reason,
                                      'interceptor', x.interceptor, 'mode', x.mode,
                                      'sequence', x.sequence, 'session_id', x.session_id,
                                      'input_identity', x.input_identity,
                                      'enforced_identity', x.enforced_identity,
                                      'resolved_by', x.resolved_by)
              FROM jsonb_to_recordset(COALESCE(p_records, '[]'::jsonb)) AS x(
                   session_id text, sequence bigint, point text, decision text, reason text,
                   interceptor text, mode text, input_identity text, enforced_identity text,
                   resolved_by text, record jsonb)
             WHERE x.decision IN ('deny', 'transform')
             ORDER BY x.sequence;
            GET DIAGNOSTICS n = ROW_COUNT;
            written := written + n;

            IF p_status IS NOT NULL THEN
                INSERT INTO audit_events (kind, run_id, data)
                VALUES ('run.' || p_status, p_run_id,
                        jsonb_build_object('error', left(p_error, 500)));
                written := written + 1;
            END IF;
            RETURN written;
        END;
        $fn$;
        """
    )


def downgrade() -> None:
    op.execute("DROP FUNCTION approvals_settle_step;")
