"""models: the probability with which the "rate these next" mode drew an assignment's item

``assignment.draw_probability`` records, for an item drawn at random among its model and benchmark's unrated
items, the probability it had of being drawn; balanced assignments (which give every item) leave it NULL.
It is what lets the clinician-anchored model scores treat the rated items as a random sample.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-20 12:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0008'
down_revision: str | None = '0007'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('assignment', schema=None) as batch_op:
        batch_op.add_column(sa.Column('draw_probability', sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('assignment', schema=None) as batch_op:
        batch_op.drop_column('draw_probability')
