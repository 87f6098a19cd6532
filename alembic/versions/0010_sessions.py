"""Server-side sessions: a signed cookie names a session row, checked on every request.

The cookie used to carry the principal and its groups, so nothing could end a session before
its cookie expired: not signing out, not disabling the account. Now a session is a row, found
by the SHA-256 of its id (the id itself is never stored, so a copy of the table signs no one
in), and deleted by signing out, by an operator (``approvals sessions end``) or, through the
trigger below, by any change to the local account it belongs to.

Revision ID: 0010
Revises: 0009
"""

from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        -- One row per signed-in browser. account is the local account (users.name) for
        -- password sessions and NULL for OpenID Connect ones; groups are the principal's at
        -- sign-in (a local account's change of groups deletes the row, see below).
        CREATE TABLE web_sessions (
            id_hash text PRIMARY KEY,
            principal text NOT NULL,
            name text NOT NULL,
            via text NOT NULL CHECK (via IN ('password', 'oidc')),
            account text REFERENCES users (name) ON DELETE CASCADE,
            groups text[] NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            expires_at timestamptz NOT NULL,
            last_seen_at timestamptz NOT NULL DEFAULT now(),
            CHECK ((via = 'password') = (account IS NOT NULL))
        );
        CREATE INDEX web_sessions_principal ON web_sessions (principal);
        CREATE INDEX web_sessions_account ON web_sessions (account) WHERE account IS NOT NULL;
        CREATE INDEX web_sessions_expires ON web_sessions (expires_at);

        -- Disabling a local account, changing its groups or its password ends its sessions,
        -- whichever path made the change (the CLI, the engine, or SQL by hand), in the same
        -- transaction: there is no moment where the account changed and a session lives on.
        CREATE FUNCTION approvals_end_account_sessions() RETURNS trigger
        LANGUAGE plpgsql AS $fn$
        BEGIN
            DELETE FROM web_sessions WHERE account = OLD.name;
            RETURN NULL;
        END
        $fn$;
        CREATE TRIGGER users_end_sessions
            AFTER UPDATE OF disabled, groups, password_hash ON users
            FOR EACH ROW
            WHEN (OLD.disabled IS DISTINCT FROM NEW.disabled
                  OR OLD.groups IS DISTINCT FROM NEW.groups
                  OR OLD.password_hash IS DISTINCT FROM NEW.password_hash)
            EXECUTE FUNCTION approvals_end_account_sessions();

        -- The live view (/events) asks every listener's question, "created or decided since
        -- when?", every 1.5 s: these keep it off a scan of every request ever made.
        CREATE INDEX approval_requests_created_idx ON approval_requests (created_at);
        CREATE INDEX approval_requests_decided_idx ON approval_requests (decided_at)
            WHERE decided_at IS NOT NULL;
        """
    )


def downgrade() -> None:
    op.execute(
        """
        DROP INDEX approval_requests_decided_idx;
        DROP INDEX approval_requests_created_idx;
        DROP TRIGGER users_end_sessions ON users;
        DROP FUNCTION approvals_end_account_sessions();
        DROP TABLE web_sessions;
        """
    )
