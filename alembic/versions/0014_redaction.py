"""Redacted arguments: what approvers are shown, apart from what the identity binds.

(Slot reserved so that the parts of the security issue can land in any order; a slot whose
part needs no DDL stays a no-op.)

Revision ID: 0014
Revises: 0013
"""

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
