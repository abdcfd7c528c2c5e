"""jury: repeated samples per item and judge (``judgeverdict.sample``), for the judges' self-consistency

A jury with ``samples = k`` asks each judge about each item k times; each answer is one verdict with its sample
index 0..k-1. Existing verdicts are sample 0 (the call a one-sample jury makes, whose cache key is unchanged);
the run/item/judge uniqueness now includes the sample.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-22 12:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0010'
down_revision: str | None = '0009'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('judgeverdict', schema=None) as batch_op:
        batch_op.add_column(sa.Column('sample', sa.Integer(), nullable=False, server_default='0'))
        batch_op.drop_constraint('uq_verdict_run_item_judge', type_='unique')
        batch_op.create_unique_constraint('uq_verdict_run_item_judge_sample',
                                          ['jury_run_id', 'item_id', 'judge', 'sample'])


def downgrade() -> None:
    # Only sample 0 fits the old uniqueness: the repeated samples are dropped.
    op.execute("DELETE FROM judgeverdict WHERE sample <> 0")
    with op.batch_alter_table('judgeverdict', schema=None) as batch_op:
        batch_op.drop_constraint('uq_verdict_run_item_judge_sample', type_='unique')
        batch_op.create_unique_constraint('uq_verdict_run_item_judge', ['jury_run_id', 'item_id', 'judge'])
        batch_op.drop_column('sample')
