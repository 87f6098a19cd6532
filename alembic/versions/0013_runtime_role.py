"""A runtime role that owns nothing; the audit chain's anchored head.

(Slot reserved so that the parts of the security issue can land in any order; a slot whose
part needs no DDL stays a no-op.)

Revision ID: 0013
Revises: 0012
"""

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
