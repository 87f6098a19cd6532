"""Local accounts and API tokens.

Revision ID: 0003
Revises: 0002
"""

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        -- Local accounts. password_hash is scrypt$N$r$p$salt$key (approvals.passwords); the
        -- password itself is never stored.
        CREATE TABLE users (
            name text PRIMARY KEY,
            password_hash text NOT NULL,
            groups text[] NOT NULL DEFAULT '{}',
            created_at timestamptz NOT NULL DEFAULT now(),
            disabled boolean NOT NULL DEFAULT false
        );

        -- API tokens. digest is the SHA-256 (hex) of the secret, which is shown once and never
        -- stored; a token is looked up by its digest.
        CREATE TABLE api_tokens (
            name text PRIMARY KEY,
            digest text NOT NULL UNIQUE,
            groups text[] NOT NULL,
            created_by text NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            revoked_at timestamptz
        );
        """
    )


def downgrade() -> None:
    op.execute(
        """
        DROP TABLE api_tokens;
        DROP TABLE users;
        """
    )
