"""Standing grants: an approver's "approve (or reject) always" for one tool in one run.

A request whose escalating rule says ``allow_always`` lets its (sole) approver decide it
``always``. The decision is stored as an approve or a reject, as any other; beside it,
``standing_grants`` keeps the grant it made: for the request's run and tool and the rule that
escalated the call, within the rule's bounds (``within``: the arguments' limits, as JSON). A
later call of that tool in that run, escalated by that rule, is decided by the live grant
instead of opening a request. An operator revokes a grant (``revoked_at``, ``revoked_by``);
from then on the calls ask again. Made, used and revoked grants are audited
(``grant.made``, ``grant.used``, ``grant.revoked``); each call a grant decided is kept in
``standing_grant_uses``, once.

Revision ID: 0031
Revises: 0030
"""

from alembic import op

revision = "0031"
down_revision = "0030"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE standing_grants (
            id uuid PRIMARY KEY,
            run_id uuid NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
            tool text NOT NULL,
            rule text NOT NULL,
            ruling text NOT NULL CHECK (ruling IN ('approve', 'reject')),
            within jsonb NOT NULL DEFAULT '{}'::jsonb,
            request_id uuid NOT NULL UNIQUE
                REFERENCES approval_requests (id) ON DELETE CASCADE,
            granted_by text NOT NULL,
            granted_at timestamptz NOT NULL DEFAULT now(),
            uses integer NOT NULL DEFAULT 0 CHECK (uses >= 0),
            revoked_at timestamptz,
            revoked_by text,
            CHECK ((revoked_at IS NULL) = (revoked_by IS NULL))
        );
        CREATE INDEX standing_grants_live_idx ON standing_grants (run_id, tool, rule)
            WHERE revoked_at IS NULL;
        -- The calls a grant decided, once each: a replayed step finds its call's answer
        -- here (even after a revocation: that call was decided) instead of using it again.
        CREATE TABLE standing_grant_uses (
            grant_id uuid NOT NULL REFERENCES standing_grants (id) ON DELETE CASCADE,
            run_id uuid NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
            call_id text NOT NULL,
            identity text NOT NULL,
            used_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (run_id, call_id, identity)
        );
        CREATE INDEX standing_grant_uses_grant_idx ON standing_grant_uses (grant_id);
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE standing_grant_uses; DROP TABLE standing_grants")
