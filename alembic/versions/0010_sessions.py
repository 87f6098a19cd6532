"""Server-side sessions: a signed cookie names a session row, checked on every request.

(Slot reserved so that the parts of the security issue can land in any order; a slot whose
part needs no DDL stays a no-op.)

Revision ID: 0010
Revises: 0009
"""

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
