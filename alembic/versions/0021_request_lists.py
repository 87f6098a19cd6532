"""Indexes for lists of requests selected by visibility and paged by keyset.

The inbox, ``GET /api/v1/pending`` and the history select in SQL what their viewer may see
(its approver groups, or everything for an operator) and page by (sort key, id). At a million
pending requests each page must read about as many rows as it shows:

- ``approval_requests_pending_deadline_v2`` (expires_at, id) over pending requests: the
  inbox's order, soonest deadline first, walked from a cursor; it replaces the deadline-only
  index, whose scans (the expiry sweep's) it serves as well.
- ``approval_requests_pending_newest`` (created_at, id) over pending requests: newest first.
- ``approval_requests_pending_approvers`` GIN over the pending requests' approver groups: a
  group with few requests is found through it instead of by walking the order.
- ``approval_requests_pending_groups`` btree over the same arrays: counts per group are one
  GROUP BY over it (an index-only scan once vacuumed).
- ``approval_requests_decided_v2`` (decided_at, id) over decided requests: the history,
  newest decision first; it replaces the decided_at-only index (the live view's scan).
- ``runs_newest`` (created_at, id): the runs a principal may see, newest first.

Revision ID: 0021
Revises: 0020
"""

from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE INDEX approval_requests_pending_deadline_v2
            ON approval_requests (expires_at, id) WHERE status = 'pending';
        DROP INDEX approval_requests_pending_deadline_idx;
        CREATE INDEX approval_requests_pending_newest
            ON approval_requests (created_at, id) WHERE status = 'pending';
        CREATE INDEX approval_requests_pending_approvers
            ON approval_requests USING gin (approvers) WHERE status = 'pending';
        CREATE INDEX approval_requests_pending_groups
            ON approval_requests (approvers) WHERE status = 'pending';
        CREATE INDEX approval_requests_decided_v2
            ON approval_requests (decided_at, id) WHERE decided_at IS NOT NULL;
        DROP INDEX approval_requests_decided_idx;
        CREATE INDEX runs_newest ON runs (created_at, id);
        """
    )


def downgrade() -> None:
    op.execute(
        """
        DROP INDEX runs_newest;
        CREATE INDEX approval_requests_decided_idx
            ON approval_requests (decided_at) WHERE decided_at IS NOT NULL;
        DROP INDEX approval_requests_decided_v2;
        DROP INDEX approval_requests_pending_groups;
        DROP INDEX approval_requests_pending_approvers;
        DROP INDEX approval_requests_pending_newest;
        CREATE INDEX approval_requests_pending_deadline_idx
            ON approval_requests (expires_at) WHERE status = 'pending';
        DROP INDEX approval_requests_pending_deadline_v2;
        """
    )
