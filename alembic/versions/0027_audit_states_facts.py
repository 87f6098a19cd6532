"""An audit event that states a decision, a vote or a tool execution must match the stored fact.

The chain proves the log's order and that no event was changed or removed, not that an event
describes something that happened: the runtime role may INSERT into the log, so it could
append ``request.decided`` by ``local:ceo`` for a request nobody decided, and ``audit verify``
passed. Now a BEFORE INSERT trigger, ``audit_events_states_fact_v1``, refuses such an event
unless the row it describes is stored, as it says, and no event stated it before:

- ``request.decided``: the request's decision (principal, kind, reason, edited arguments'
  identity), on the request's run, call, tool, state version and identity; the request is no
  longer pending. ``request.expired``: the same, by ``system:expiry``, the request expired.
  One such event per request.
- ``request.voted``: the vote of that principal as that person on that request; one per
  (request, person).
- ``resume.queued``: the decision's resume job, on its request and run, by the decision's
  principal; one per job.
- ``tool.started``: the ledger's row of (run, call) for that tool and those arguments;
  ``tool.succeeded``, ``.failed``, ``.outcome_unknown``: that row, ended so (one end per
  call); ``tool.reconciled``: an ``outcome_unknown`` end reconciled to the status it states
  (once); ``tool.refused``: a ledger row of other arguments for the reused call id.

The engine writes each of these in the statement that writes the fact (storage/sql/queries.sql),
so the real events always pass. The trigger fires after ``audit_events_chain_v1`` (triggers
fire in name order), so it runs holding the chain's head: a concurrent writer of the same
event waits for it and then sees it. It is SECURITY DEFINER with a pinned search_path, as the
chain trigger is: a caller's temporary table cannot stand in for the facts it reads.

A partial index on the bound kinds keeps the "stated before" lookups to a call's few events.

Revision ID: 0027
Revises: 0026
"""

from alembic import op

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE INDEX audit_events_facts_v1 ON audit_events (run_id, call_id, kind)
            WHERE kind IN ('request.decided', 'request.expired', 'request.voted',
                           'resume.queued', 'tool.started', 'tool.succeeded', 'tool.failed',
                           'tool.outcome_unknown', 'tool.reconciled', 'tool.refused');

        CREATE FUNCTION approvals_audit_states_fact_v1() RETURNS trigger
        LANGUAGE plpgsql AS $fn$
        DECLARE
            -- The kinds bound to a fact (and in the index above).
            bound constant text[] := ARRAY['request.decided', 'request.expired',
                                           'request.voted', 'resume.queued', 'tool.started',
                                           'tool.succeeded', 'tool.failed',
                                           'tool.outcome_unknown', 'tool.reconciled',
                                           'tool.refused'];
            founded boolean;
            ended constant text[] := ARRAY['tool.succeeded', 'tool.failed',
                                           'tool.outcome_unknown'];
        BEGIN
            IF NEW.kind <> ALL (bound) THEN
                RETURN NEW;
            END IF;
            -- Whether an event of these kinds was already written for this call: the second
            -- statement of one fact is a forgery, however well it matches.
            IF EXISTS (
                SELECT 1 FROM audit_events e
                 WHERE e.run_id = NEW.run_id AND e.call_id = NEW.call_id
                   AND e.kind = ANY (bound)
                   AND CASE
                       WHEN NEW.kind IN ('request.decided', 'request.expired') THEN
                           e.kind IN ('request.decided', 'request.expired')
                           AND e.request_id = NEW.request_id
                       WHEN NEW.kind = 'request.voted' THEN
                           e.kind = 'request.voted' AND e.request_id = NEW.request_id
                           AND e.data ->> 'person' = NEW.data ->> 'person'
                       WHEN NEW.kind = 'resume.queued' THEN
                           e.kind = 'resume.queued' AND e.data -> 'job' = NEW.data -> 'job'
                       WHEN NEW.kind = ANY (ended) THEN e.kind = ANY (ended)
                       WHEN NEW.kind IN ('tool.started', 'tool.reconciled') THEN
                           e.kind = NEW.kind
                       ELSE false
                   END) THEN
                RAISE EXCEPTION 'the decision log already states this %: a second % event for'
                    ' run %, call % is refused', NEW.kind, NEW.kind, NEW.run_id, NEW.call_id
                    USING ERRCODE = 'check_violation',
                          HINT = 'the engine writes it once, with the fact it states';
            END IF;

            founded := CASE
                WHEN NEW.kind IN ('request.decided', 'request.expired') THEN EXISTS (
                    SELECT 1 FROM decisions d JOIN approval_requests a ON a.id = d.request_id
                     WHERE d.request_id = NEW.request_id
                       AND d.run_id = NEW.run_id AND d.call_id = NEW.call_id
                       AND a.tool IS NOT DISTINCT FROM NEW.tool
                       AND a.state_version IS NOT DISTINCT FROM NEW.state_version
                       AND a.identity = NEW.data ->> 'identity'
                       AND d.principal = NEW.principal
                       AND d.kind = NEW.data ->> 'decision'
                       AND d.reason IS NOT DISTINCT FROM NEW.data ->> 'reason'
                       AND CASE NEW.kind
                           WHEN 'request.decided' THEN
                               a.status NOT IN ('pending', 'expired')
                               AND d.args_identity IS NOT DISTINCT FROM
                                   NEW.data ->> 'args_identity'
                           ELSE a.status = 'expired' AND d.principal = 'system:expiry'
                       END)
                WHEN NEW.kind = 'request.voted' THEN EXISTS (
                    SELECT 1 FROM approval_votes v JOIN approval_requests a
                        ON a.id = v.request_id
                     WHERE v.request_id = NEW.request_id
                       AND v.principal = NEW.principal
                       AND v.person = NEW.data ->> 'person'
                       AND a.run_id = NEW.run_id AND a.call_id = NEW.call_id
                       AND a.tool IS NOT DISTINCT FROM NEW.tool)
                WHEN NEW.kind = 'resume.queued' THEN EXISTS (
                    SELECT 1 FROM resume_queue q JOIN decisions d ON d.id = q.decision_id
                     WHERE q.request_id = NEW.request_id
                       AND q.id::text = NEW.data ->> 'job'
                       AND q.run_id = NEW.run_id AND d.call_id = NEW.call_id
                       AND d.principal = NEW.principal)
                ELSE EXISTS (
                    SELECT 1 FROM tool_executions t
                     WHERE t.run_id = NEW.run_id AND t.call_id = NEW.call_id
                       AND CASE
                           WHEN NEW.kind = 'tool.started' THEN
                               t.tool = NEW.tool
                               AND t.args_identity = NEW.data ->> 'args_identity'
                           WHEN NEW.kind = ANY (ended) THEN
                               t.tool = NEW.tool
                               AND t.status = substr(NEW.kind, length('tool.') + 1)
                               AND left(t.error, 500) IS NOT DISTINCT FROM NEW.data ->> 'error'
                           WHEN NEW.kind = 'tool.reconciled' THEN
                               t.status IN ('succeeded', 'failed')
                               AND t.status = NEW.data ->> 'status'
                               AND t.error IS NOT DISTINCT FROM NEW.data ->> 'error'
                               AND EXISTS (
                                   SELECT 1 FROM audit_events u
                                    WHERE u.run_id = NEW.run_id AND u.call_id = NEW.call_id
                                      AND u.kind = 'tool.outcome_unknown')
                           ELSE -- tool.refused: the call id was used by other arguments
                               NEW.data ->> 'reason' = 'call_id_reused'
                               AND t.args_identity = NEW.data ->> 'executed_identity'
                               AND t.args_identity IS DISTINCT FROM
                                   NEW.data ->> 'args_identity'
                       END)
            END;
            IF NOT founded THEN
                RAISE EXCEPTION 'the decision log refuses a % event that no stored fact backs'
                    ' (run %, request %, call %, principal %)',
                    NEW.kind, NEW.run_id, NEW.request_id, NEW.call_id, NEW.principal
                    USING ERRCODE = 'check_violation',
                          HINT = 'an event stating a decision, a vote or a tool execution'
                                 ' is written by the statement that stores it';
            END IF;
            RETURN NEW;
        END
        $fn$;
        DO $do$
        BEGIN
            EXECUTE format('ALTER FUNCTION approvals_audit_states_fact_v1() SECURITY DEFINER'
                           ' SET search_path = %I, pg_temp', current_schema());
        END
        $do$;
        -- A trigger function is never called directly; firing it checks no EXECUTE right.
        REVOKE EXECUTE ON FUNCTION approvals_audit_states_fact_v1() FROM PUBLIC;

        -- After audit_events_chain_v1 (name order): it runs holding the chain's head.
        CREATE TRIGGER audit_events_states_fact_v1 BEFORE INSERT ON audit_events
            FOR EACH ROW EXECUTE FUNCTION approvals_audit_states_fact_v1();
        """
    )


def downgrade() -> None:
    op.execute(
        """
        DROP TRIGGER audit_events_states_fact_v1 ON audit_events;
        DROP FUNCTION approvals_audit_states_fact_v1();
        DROP INDEX audit_events_facts_v1;
        """
    )
