"""Slack users linked to local accounts: ``approvals users link NAME --slack UXXXX`` says which
Slack user is which account, so that a click on a Slack message's button decides as that
account, under every rule the web applies (``web.faces.slack``). One Slack user is one
account and one account one Slack user; a link goes with its account. Linking is audited
(``account.slack_linked``); so is every click (``slack.decided``, ``slack.asked``,
``slack.refused``), in the audit log, which needs no table here.

Revision ID: 0032
Revises: 0031
"""

from alembic import op

revision = "0032"
down_revision = "0031"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE slack_users (
            -- Slack's user id (U..., or W... on Enterprise Grid), as a payload's user.id.
            slack_user text PRIMARY KEY CHECK (slack_user ~ '^[UW][A-Z0-9]{2,30}$'),
            account text NOT NULL UNIQUE REFERENCES users (name) ON DELETE CASCADE,
            linked_by text NOT NULL,
            linked_at timestamptz NOT NULL DEFAULT now()
        );
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE slack_users")
