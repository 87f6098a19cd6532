"""Request changes are pushed, not polled: NOTIFY on approval requests and on ended sessions.

Every change a live view cares about NOTIFYs ``approvals_request_events`` (delivered at commit,
and only if the transaction commits), whichever statement made it: a request opened, decided
(approved, rejected, answered), expired, escalated to other approvers, superseded or cancelled.
The payload is a small JSON object: the request's id, run, tool, what happened (``kind``), its
status, its approver groups (and, for an escalation, the groups it had before) and who
started its run; that is all a web process needs to tell which of its streams may hear of it,
without reading the database. A NOTIFY payload must stay under 8000 bytes: one that would not
(hundreds of approver groups) carries only ``{id, kind, status, more: true}``, and the
listener reads the row.

Ending a web session (sign-out, an operator ending a principal's sessions, a disabled or
changed account, an expired row swept) NOTIFYs ``approvals_sessions_ended`` with the hash of
its id (what the table keeps; it signs no one in), so a live page closes its stream at once
instead of asking for its session every few seconds.

Revision ID: 0020
Revises: 0019
"""

from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE FUNCTION approvals_request_event_v1() RETURNS trigger
            LANGUAGE plpgsql AS $fn$
        DECLARE
            kind text;
            payload text;
        BEGIN
            IF TG_OP = 'INSERT' THEN
                kind := 'opened';
            ELSIF OLD.status IS DISTINCT FROM NEW.status THEN
                kind := CASE NEW.status
                            WHEN 'approved' THEN 'decided'
                            WHEN 'rejected' THEN 'decided'
                            WHEN 'answered' THEN 'decided'
                            ELSE NEW.status
                        END;
            ELSE
                -- Still pending, moved to the next approvers of its chain (or given others).
                kind := 'escalated';
            END IF;
            payload := jsonb_build_object(
                'id', NEW.id, 'run_id', NEW.run_id, 'tool', NEW.tool, 'kind', kind,
                'status', NEW.status, 'approvers', to_jsonb(NEW.approvers),
                'requested_by', NEW.requested_by,
                'requested_by_person', NEW.requested_by_person)
                || CASE WHEN kind = 'escalated'
                        THEN jsonb_build_object('from_approvers', to_jsonb(OLD.approvers))
                        ELSE '{}'::jsonb END;
            IF octet_length(payload) >= 7900 THEN
                payload := jsonb_build_object('id', NEW.id, 'kind', kind, 'status', NEW.status,
                                              'more', true);
            END IF;
            PERFORM pg_notify('approvals_request_events', payload);
            RETURN NULL;
        END
        $fn$;
        CREATE TRIGGER approval_requests_opened_event_v1 AFTER INSERT ON approval_requests
            FOR EACH ROW EXECUTE FUNCTION approvals_request_event_v1();
        -- Other updates (the interrupt id a settled step stores, the person column) are no
        -- news to an approver.
        CREATE TRIGGER approval_requests_changed_event_v1
            AFTER UPDATE OF status, approvers, escalation_level ON approval_requests
            FOR EACH ROW
            WHEN (OLD.status IS DISTINCT FROM NEW.status
                  OR OLD.approvers IS DISTINCT FROM NEW.approvers
                  OR OLD.escalation_level IS DISTINCT FROM NEW.escalation_level)
            EXECUTE FUNCTION approvals_request_event_v1();

        CREATE FUNCTION approvals_session_ended_v1() RETURNS trigger
            LANGUAGE plpgsql AS $fn$
        BEGIN
            PERFORM pg_notify('approvals_sessions_ended', OLD.id_hash);
            RETURN NULL;
        END
        $fn$;
        CREATE TRIGGER web_sessions_ended_v1 AFTER DELETE ON web_sessions
            FOR EACH ROW EXECUTE FUNCTION approvals_session_ended_v1();
        """
    )


def downgrade() -> None:
    op.execute(
        """
        DROP TRIGGER web_sessions_ended_v1 ON web_sessions;
        DROP FUNCTION approvals_session_ended_v1();
        DROP TRIGGER approval_requests_changed_event_v1 ON approval_requests;
        DROP TRIGGER approval_requests_opened_event_v1 ON approval_requests;
        DROP FUNCTION approvals_request_event_v1();
        """
    )
