"""adjudication: adjudicated scores kept apart from the raw ratings, and a per-study threshold

The new column on study is nullable (None: adjudication off), so it needs no server default.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02 14:43:40.574124
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = '0004'
down_revision: str | None = '0003'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('adjudication',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('item_id', sa.Integer(), nullable=False),
    sa.Column('adjudicator_id', sa.Integer(), nullable=False),
    sa.Column('criterion', sqlmodel.sql.sqltypes.AutoString(length=100), nullable=False),
    sa.Column('score', sa.Integer(), nullable=False),
    sa.Column('comment', sa.Text(), nullable=False),
    sa.Column('revision', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['adjudicator_id'], ['user.id'], ),
    sa.ForeignKeyConstraint(['item_id'], ['item.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('item_id', 'criterion', 'revision', name='uq_adjudication_revision')
    )
    with op.batch_alter_table('adjudication', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_adjudication_adjudicator_id'), ['adjudicator_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_adjudication_item_id'), ['item_id'], unique=False)

    with op.batch_alter_table('study', schema=None) as batch_op:
        batch_op.add_column(sa.Column('adjudication_threshold', sa.Integer(), nullable=True))



def downgrade() -> None:
    with op.batch_alter_table('study', schema=None) as batch_op:
        batch_op.drop_column('adjudication_threshold')

    with op.batch_alter_table('adjudication', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_adjudication_item_id'))
        batch_op.drop_index(batch_op.f('ix_adjudication_adjudicator_id'))

    op.drop_table('adjudication')
