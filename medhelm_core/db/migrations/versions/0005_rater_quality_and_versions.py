"""rater quality and versions: per-study speed threshold, test-retest, the study-size plan, gold ranges and
versioned judge prompt templates

New non-null columns get server defaults so that rows written before this revision take the values the
models default to (20 s speed threshold, test-retest off, a gap of 10 items, not a retest). The two unique
keys that now include ``retest`` are dropped and recreated (batch mode, so SQLite copies the table).

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02 18:40:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = '0005'
down_revision: str | None = '0004'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('study', schema=None) as batch_op:
        batch_op.add_column(sa.Column('speed_threshold_seconds', sa.Float(), nullable=False, server_default='20'))
        batch_op.add_column(sa.Column('retest_share', sa.Float(), nullable=False, server_default='0'))
        batch_op.add_column(sa.Column('retest_gap', sa.Integer(), nullable=False, server_default='10'))
        batch_op.add_column(sa.Column('plan', sa.JSON(), nullable=True))

    with op.batch_alter_table('assignment', schema=None) as batch_op:
        batch_op.add_column(sa.Column('retest', sa.Boolean(), nullable=False, server_default=sa.false()))
        batch_op.drop_constraint('uq_assignment_item_user', type_='unique')
        batch_op.create_unique_constraint('uq_assignment_item_user', ['item_id', 'user_id', 'retest'])

    with op.batch_alter_table('ratingsubmission', schema=None) as batch_op:
        batch_op.add_column(sa.Column('retest', sa.Boolean(), nullable=False, server_default=sa.false()))
        batch_op.drop_constraint('uq_submission_revision', type_='unique')
        batch_op.create_unique_constraint('uq_submission_revision', ['item_id', 'rater_id', 'retest', 'revision'])

    op.create_table('goldrange',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('item_id', sa.Integer(), nullable=False),
    sa.Column('criterion', sqlmodel.sql.sqltypes.AutoString(length=100), nullable=False),
    sa.Column('low', sa.Integer(), nullable=False),
    sa.Column('high', sa.Integer(), nullable=False),
    sa.Column('note', sa.Text(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['item_id'], ['item.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('item_id', 'criterion', name='uq_gold_item_criterion')
    )
    with op.batch_alter_table('goldrange', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_goldrange_item_id'), ['item_id'], unique=False)

    op.create_table('prompttemplate',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('name', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('version', sa.Integer(), nullable=False),
    sa.Column('text', sa.Text(), nullable=False),
    sa.Column('text_hash', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
    sa.Column('note', sa.Text(), nullable=False),
    sa.Column('created_by', sqlmodel.sql.sqltypes.AutoString(length=150), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('name', 'version', name='uq_prompt_template_name_version')
    )
    with op.batch_alter_table('prompttemplate', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_prompttemplate_text_hash'), ['text_hash'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('prompttemplate', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_prompttemplate_text_hash'))
    op.drop_table('prompttemplate')

    with op.batch_alter_table('goldrange', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_goldrange_item_id'))
    op.drop_table('goldrange')

    # Retest rows cannot live under the old keys: drop them first (their ratings are kept nowhere else).
    op.execute(sa.text("DELETE FROM ratingsubmission WHERE retest"))
    op.execute(sa.text("DELETE FROM assignment WHERE retest"))
    with op.batch_alter_table('ratingsubmission', schema=None) as batch_op:
        batch_op.drop_constraint('uq_submission_revision', type_='unique')
        batch_op.create_unique_constraint('uq_submission_revision', ['item_id', 'rater_id', 'revision'])
        batch_op.drop_column('retest')

    with op.batch_alter_table('assignment', schema=None) as batch_op:
        batch_op.drop_constraint('uq_assignment_item_user', type_='unique')
        batch_op.create_unique_constraint('uq_assignment_item_user', ['item_id', 'user_id'])
        batch_op.drop_column('retest')

    with op.batch_alter_table('study', schema=None) as batch_op:
        batch_op.drop_column('plan')
        batch_op.drop_column('retest_gap')
        batch_op.drop_column('retest_share')
        batch_op.drop_column('speed_threshold_seconds')
