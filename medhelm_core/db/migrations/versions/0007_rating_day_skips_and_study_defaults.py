"""rating day: skips with a reason, a study's instructions for clinicians and the Agreement page's defaults

``ratingskip`` holds a clinician's skip of an assigned item (its reason and an optional note). The study gets
``instructions`` (shown on the Rate page), ``agreement_protocol`` and ``agreement_benchmarks`` (how the
Agreement page and the report open). Existing studies get the defaults the models give: no instructions, the
MedHELM protocol, every benchmark.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-20 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = '0007'
down_revision: str | None = '0006'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('study', schema=None) as batch_op:
        batch_op.add_column(sa.Column('instructions', sa.Text(), nullable=False, server_default=''))
        batch_op.add_column(sa.Column('agreement_protocol', sqlmodel.sql.sqltypes.AutoString(length=20),
                                      nullable=False, server_default='medhelm'))
        batch_op.add_column(sa.Column('agreement_benchmarks', sa.JSON(), nullable=False, server_default='[]'))

    op.create_table('ratingskip',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('item_id', sa.Integer(), nullable=False),
    sa.Column('rater_id', sa.Integer(), nullable=False),
    sa.Column('reason', sqlmodel.sql.sqltypes.AutoString(length=30), nullable=False),
    sa.Column('note', sa.Text(), nullable=False),
    sa.Column('retest', sa.Boolean(), nullable=False),
    sa.Column('skipped_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['item_id'], ['item.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['rater_id'], ['user.id'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('item_id', 'rater_id', 'retest', name='uq_skip_item_rater')
    )
    with op.batch_alter_table('ratingskip', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_ratingskip_item_id'), ['item_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_ratingskip_rater_id'), ['rater_id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('ratingskip', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_ratingskip_rater_id'))
        batch_op.drop_index(batch_op.f('ix_ratingskip_item_id'))
    op.drop_table('ratingskip')

    with op.batch_alter_table('study', schema=None) as batch_op:
        batch_op.drop_column('agreement_benchmarks')
        batch_op.drop_column('agreement_protocol')
        batch_op.drop_column('instructions')
