"""Edits re-checked by the policy; reused call ids; shown copies checked against their identity.

(Slot reserved so that the parts of the security issue can land in any order; a slot whose
part needs no DDL stays a no-op.)

Revision ID: 0012
Revises: 0011
"""

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
