"""API tokens belong to accounts: the rules count people, not principals.

(Slot reserved so that the parts of the security issue can land in any order; a slot whose
part needs no DDL stays a no-op.)

Revision ID: 0011
Revises: 0010
"""

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
