"""A step's node updates are written by its settlement: one statement per step end.

The runner wrote each node update of a step (a run event, what a run's stream shows) with a
statement of its own as the node finished: three or four statements per approval cycle, each a
round trip and its share of the client's CPU. It now keeps them until the step ends and hands
those not yet written (a step that runs longer than a moment writes them on the way, so a
stream stays live) to the settlement. ``approvals_settle_step_v3`` is v2 (migration 0023: the
run's row locked FOR NO KEY UPDATE) that first inserts them, in order, and wakes the run's
streams, so they come before the status event the settlement writes, as they did.

v1 and v2 stay beside it for processes of earlier releases during a rolling upgrade: they write
no node updates but lose none either (those processes write them themselves).

Revision ID: 0024
Revises: 0023
"""

from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE FUNCTION approvals_settle_step_v3(
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
                IF run_status = 'cancelled' AND p_status <> 'cancelled' THEN
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
        "DROP FUNCTION approvals_settle_step_v3"
        "(uuid, jsonb, text, text, text, uuid[], text[], jsonb)"
    )
