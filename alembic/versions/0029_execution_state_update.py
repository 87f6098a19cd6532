"""A tool execution keeps the state update its tool asked for, to give it back with its result.

A LangChain tool may return ``Command(update={...})``: its state keys change with its result.
When the ledger answers for a call that ran before (the step that ran it was re-run: another
call of the turn paused the same ``ToolNode`` task, or the process died before the step was
checkpointed), the answer carried the result only, and the update was lost. It is stored with
the execution, serialized by the graph's checkpointer (``state_update_type``, ``state_update``:
the checkpointer's own type tag and bytes), so the ledger's answer carries it too. The call's
own result message is never in it (that is the result, as ``post_tool_call`` released it).

Revision ID: 0029
Revises: 0028
"""

from alembic import op

revision = "0029"
down_revision = "0028"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        ALTER TABLE tool_executions
            ADD COLUMN state_update_type text,
            ADD COLUMN state_update bytea,
            ADD CONSTRAINT tool_executions_state_update_typed
                CHECK ((state_update IS NULL) = (state_update_type IS NULL));
        """
    )


def downgrade() -> None:
    op.execute(
        """
        ALTER TABLE tool_executions
            DROP CONSTRAINT tool_executions_state_update_typed,
            DROP COLUMN state_update,
            DROP COLUMN state_update_type;
        """
    )
