"""OpenAI Agents SDK runs: each paused run's ``RunState``, kept server-side.

``openai_run_states`` holds one row per OpenAI-SDK run: the SDK's serialized ``RunState``
(``to_json``) exactly as written (``text``, so its hash is stable), its version (the SHA-256
of that text, which the run's pending requests carry as their ``state_version``), the calls
the run waits on (``[{call_id, request_id}]``) and where the run stood. The state is read back
only by the worker that resumes the run; no page or API returns it.

Revision ID: 0019
Revises: 0017
"""

from alembic import op

revision = "0019"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE openai_run_states (
            -- Pruning a run takes its state with it.
            run_id uuid PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
            agent text NOT NULL,
            state text NOT NULL,
            version text NOT NULL,
            waiting jsonb NOT NULL DEFAULT '[]'::jsonb,
            -- Where the run stood when the state was stored: what a resume that finds the
            -- run already moved on settles it from (a worker may die after storing it).
            status text NOT NULL,
            answer text,
            error text,
            saved_at timestamptz NOT NULL DEFAULT now()
        )
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE openai_run_states")
