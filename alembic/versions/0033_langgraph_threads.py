"""Threads of the LangGraph Server face (``/langgraph``) and the metadata their creators give
them: ``POST /threads`` with ``metadata`` keeps it, ``GET /threads/{id}`` returns it and
``POST /threads/search`` filters on it by containment (``@>``, which the GIN index serves).
A thread is otherwise still its runs': who may see it is who may see its latest run (its
creator alone while it holds none). Retention deletes the row with the thread's runs.

Revision ID: 0033
Revises: 0032
"""

from alembic import op

revision = "0033"
down_revision = "0032"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE langgraph_threads (
            -- The thread id its runs carry (runs.thread_id): one namespace.
            thread_id text PRIMARY KEY CHECK (length(thread_id) BETWEEN 1 AND 200),
            metadata jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(metadata) = 'object'),
            -- The principal id of the API token that created it.
            created_by text NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX langgraph_threads_metadata ON langgraph_threads
            USING gin (metadata jsonb_path_ops);
        CREATE INDEX langgraph_threads_creator ON langgraph_threads (created_by, created_at);
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE langgraph_threads")
