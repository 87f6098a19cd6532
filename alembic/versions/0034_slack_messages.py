"""The Slack messages posted for each request (``storage.slack_messages``): a row per message
``chat.postMessage`` posted (its channel and ts), so that when the request leaves ``pending``
by any route (a click, the web, the API, the CLI, an e-mail link, expiry, a cancelled run) or
is escalated past the message's approvers, the notifier updates the message (``chat.update``)
to say how it ended, its buttons removed. The update is retried like a post: ``status``,
``attempts``, ``next_attempt_at`` (a lease while ``updating``) and ``last_error``.

A message goes with its request (``ON DELETE CASCADE``): retention prunes it with its run.

``slack_oidc_users`` links a Slack user to an OpenID Connect principal, written when that
principal signs in with ``APPROVALS_SLACK_OIDC_CLAIM`` in its ID token (as ``slack_users`` links
a local account, by an operator). One Slack user is one principal, and one principal one Slack
user; a click decides with the groups of the principal's newest live web session.

Revision ID: 0034
Revises: 0033
"""

from alembic import op

revision = "0034"
down_revision = "0033"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE slack_messages (
            id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            request_id uuid NOT NULL REFERENCES approval_requests (id) ON DELETE CASCADE,
            -- The request's escalation level when posted: a later level takes its buttons.
            escalation_level integer NOT NULL,
            -- The channel as configured (a group's, or the default), and as Slack answered.
            target text NOT NULL,
            channel text NOT NULL,
            ts text NOT NULL,
            posted_at timestamptz NOT NULL DEFAULT now(),
            status text NOT NULL DEFAULT 'posted'
                CHECK (status IN ('posted', 'updating', 'retry', 'updated', 'failed',
                                  'skipped')),
            attempts integer NOT NULL DEFAULT 0,
            next_attempt_at timestamptz NOT NULL DEFAULT now(),
            last_error text,
            updated_at timestamptz,
            UNIQUE (channel, ts),
            UNIQUE (request_id, escalation_level, target)
        );
        -- The notifier's poll: the messages that may still owe an update.
        CREATE INDEX slack_messages_owed_idx ON slack_messages (next_attempt_at)
         WHERE status IN ('posted', 'updating', 'retry');

        CREATE TABLE slack_oidc_users (
            slack_user text PRIMARY KEY CHECK (slack_user ~ '^[UW][A-Z0-9]{2,30}$'),
            principal text NOT NULL UNIQUE CHECK (starts_with(principal, 'oidc:')),
            linked_at timestamptz NOT NULL DEFAULT now()
        );
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE slack_oidc_users")
    op.execute("DROP TABLE slack_messages")
