"""OpenAI Agents SDK sessions kept by the engine: a thread's conversation history.

An agent registered with ``OpenAIAgent(agent, session="postgres")`` runs with the SDK session of
its run's thread (``storage.openai_sessions``). ``openai_session_items`` holds one row per item
(an SDK input item, as JSON), in the order added (``id``), keyed by thread; each row names the
run that added it, and pruning that run (retention takes a thread's runs together) takes the
row with it. The runs of a thread hold its lock while they read or write the session.

Revision ID: 0030
Revises: 0029
"""

from alembic import op

revision = "0030"
down_revision = "0029"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE openai_session_items (
            id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            thread_id text NOT NULL,
            run_id uuid NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
            item jsonb NOT NULL,
            added_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX openai_session_items_thread_idx ON openai_session_items (thread_id, id);
        CREATE INDEX openai_session_items_run_idx ON openai_session_items (run_id);
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE openai_session_items")
