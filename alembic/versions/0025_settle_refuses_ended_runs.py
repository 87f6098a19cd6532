"""A run that ended is never settled again: ``approvals_settle_step_v4`` refuses a settlement
over any final status (completed, blocked, failed, cancelled), where v3 refused one only over
'cancelled'.

Nothing in the engine settles a step over an ended run today; this is defence in depth, found
by an attack test: a resume job that failed after an earlier job had completed its run
settled it as failed, rewriting "completed" although both of its calls had run. A refused
settlement keeps the step's interception records and node updates, and is audited as
``run.settle_refused`` with the status it would have written and the one the run has.

v1, v2 and v3 stay beside it for processes of earlier releases during a rolling upgrade.

Revision ID: 0025
Revises: 0024
"""

from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE FUNCTION approvals_settle_step_v4(
            p_run_id uuid, p_records jsonb, p_status text, p_error text, p_answer text,
            p_request_ids uuid[], p_interrupt_ids text[], p_events jsonb
        ) RETURNS text LANGUAGE plpgsql AS $fn$
        DECLARE
            run_status text;
            outcome text := 'recorded';
        BEGIN
            -- The step's node updates not yet recorded, in the order they happened, before
            -- the status event the run's UPDATE below writes (runs_status_event): a stream
            -- closes at that event, so it must already have sent them.
            IF jsonb_array_length(COALESCE(p_events, '[]'::jsonb)) > 0 THEN
                INSERT INTO run_events (run_id, kind, node, data)
                SELECT p_run_id, 'update', e.value ->> 'node', COALESCE(e.value -> 'data', '{}')
                  FROM jsonb_array_elements(p_events) WITH ORDINALITY AS e(value, n)
                 ORDER BY e.n;
                PERFORM pg_notify('approvals_run_events', p_run_id::text);
            END IF;

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
                -- NO KEY UPDATE, not UPDATE: a decision on one of the run's requests holds that
                -- request's row and then inserts rows referencing the run, whose foreign key
                -- checks take a key-share lock on this row. FOR UPDATE made them wait for
                -- each other (a deadlock); NO KEY UPDATE still serializes with a cancel.
                SELECT status INTO run_status FROM runs WHERE id = p_run_id FOR NO KEY UPDATE;
                -- A run that ended stays as it ended: no later step rewrites a completed,
                -- blocked, failed or cancelled run (v3 refused only over 'cancelled'). A
                -- cancel's own settlement over its cancellation is still taken.
                IF approvals_run_finished_v1(run_status)
                   AND NOT (run_status = 'cancelled' AND p_status = 'cancelled') THEN
                    outcome := 'refused';
                ELSE
                    outcome := 'settled';
                    UPDATE approval_requests r
                       SET interrupt_id = b.interrupt_id
                      FROM unnest(p_request_ids, p_interrupt_ids) AS b(request_id, interrupt_id)
                     WHERE r.id = b.request_id
                       AND r.interrupt_id IS DISTINCT FROM b.interrupt_id;
                    UPDATE runs
                       SET status = p_status, error = p_error,
                           answer = COALESCE(p_answer, answer), updated_at = now()
                     WHERE id = p_run_id;
                END IF;
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

            IF outcome = 'settled' THEN
                INSERT INTO audit_events (kind, run_id, data)
                VALUES ('run.' || p_status, p_run_id,
                        jsonb_build_object('error', left(p_error, 500)));
            ELSIF outcome = 'refused' THEN
                INSERT INTO audit_events (kind, run_id, data)
                VALUES ('run.settle_refused', p_run_id,
                        jsonb_build_object('status', p_status, 'run_status', run_status,
                                           'error', left(p_error, 500)));
            END IF;
            RETURN outcome;
        END
        $fn$;
        """
    )


def downgrade() -> None:
    op.execute(
        "DROP FUNCTION approvals_settle_step_v4"
        "(uuid, jsonb, text, text, text, uuid[], text[], jsonb)"
    )
