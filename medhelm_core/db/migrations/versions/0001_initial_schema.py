"""initial schema

Revision ID: 0001
Revises: (none)
Create Date: 2026-12-02 13:06:06.023239
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = '0001'
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('rubric',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('name', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('version', sa.Integer(), nullable=False),
    sa.Column('title', sqlmodel.sql.sqltypes.AutoString(length=300), nullable=False),
    sa.Column('description', sa.Text(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('name', 'version', name='uq_rubric_name_version')
    )
    op.create_table('user',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('username', sqlmodel.sql.sqltypes.AutoString(length=150), nullable=False),
    sa.Column('display_name', sqlmodel.sql.sqltypes.AutoString(length=300), nullable=False),
    sa.Column('role', sqlmodel.sql.sqltypes.AutoString(length=30), nullable=False),
    sa.Column('password_hash', sqlmodel.sql.sqltypes.AutoString(length=500), nullable=True),
    sa.Column('is_active', sa.Boolean(), nullable=False),
    sa.Column('meta', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('username')
    )
    op.create_table('criterion',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('rubric_id', sa.Integer(), nullable=False),
    sa.Column('name', sqlmodel.sql.sqltypes.AutoString(length=100), nullable=False),
    sa.Column('label', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('description', sa.Text(), nullable=False),
    sa.Column('scale_min', sa.Integer(), nullable=False),
    sa.Column('scale_max', sa.Integer(), nullable=False),
    sa.Column('position', sa.Integer(), nullable=False),
    sa.Column('anchors', sa.JSON(), nullable=False),
    sa.ForeignKeyConstraint(['rubric_id'], ['rubric.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('rubric_id', 'name', name='uq_criterion_rubric_name')
    )
    with op.batch_alter_table('criterion', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_criterion_rubric_id'), ['rubric_id'], unique=False)

    op.create_table('study',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('name', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('title', sqlmodel.sql.sqltypes.AutoString(length=300), nullable=False),
    sa.Column('description', sa.Text(), nullable=False),
    sa.Column('rubric_id', sa.Integer(), nullable=False),
    sa.Column('show_reference', sa.Boolean(), nullable=False),
    sa.Column('overlap', sa.Integer(), nullable=False),
    sa.Column('order_seed', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['rubric_id'], ['rubric.id'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('name')
    )
    with op.batch_alter_table('study', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_study_rubric_id'), ['rubric_id'], unique=False)

    op.create_table('item',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('study_id', sa.Integer(), nullable=False),
    sa.Column('benchmark', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('instance_id', sqlmodel.sql.sqltypes.AutoString(length=300), nullable=False),
    sa.Column('model', sqlmodel.sql.sqltypes.AutoString(length=300), nullable=False),
    sa.Column('input_text', sa.Text(), nullable=False),
    sa.Column('output_text', sa.Text(), nullable=False),
    sa.Column('reference_text', sa.Text(), nullable=True),
    sa.Column('meta', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['study_id'], ['study.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('study_id', 'benchmark', 'instance_id', 'model', name='uq_item_identity')
    )
    with op.batch_alter_table('item', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_item_benchmark'), ['benchmark'], unique=False)
        batch_op.create_index(batch_op.f('ix_item_study_id'), ['study_id'], unique=False)

    op.create_table('juryrun',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('study_id', sa.Integer(), nullable=False),
    sa.Column('name', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('source', sqlmodel.sql.sqltypes.AutoString(length=30), nullable=False),
    sa.Column('config', sa.JSON(), nullable=False),
    sa.Column('config_hash', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
    sa.Column('status', sqlmodel.sql.sqltypes.AutoString(length=30), nullable=False),
    sa.Column('calls_done', sa.Integer(), nullable=False),
    sa.Column('calls_failed', sa.Integer(), nullable=False),
    sa.Column('prompt_tokens', sa.Integer(), nullable=False),
    sa.Column('completion_tokens', sa.Integer(), nullable=False),
    sa.Column('cost_usd', sa.Float(), nullable=False),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['study_id'], ['study.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('juryrun', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_juryrun_config_hash'), ['config_hash'], unique=False)
        batch_op.create_index(batch_op.f('ix_juryrun_study_id'), ['study_id'], unique=False)

    op.create_table('assignment',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('study_id', sa.Integer(), nullable=False),
    sa.Column('item_id', sa.Integer(), nullable=False),
    sa.Column('user_id', sa.Integer(), nullable=False),
    sa.Column('position', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['item_id'], ['item.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['study_id'], ['study.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['user_id'], ['user.id'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('item_id', 'user_id', name='uq_assignment_item_user')
    )
    with op.batch_alter_table('assignment', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_assignment_item_id'), ['item_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_assignment_study_id'), ['study_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_assignment_user_id'), ['user_id'], unique=False)

    op.create_table('judgeverdict',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('jury_run_id', sa.Integer(), nullable=False),
    sa.Column('item_id', sa.Integer(), nullable=False),
    sa.Column('judge', sqlmodel.sql.sqltypes.AutoString(length=300), nullable=False),
    sa.Column('cache_key', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
    sa.Column('status', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
    sa.Column('scores', sa.JSON(), nullable=False),
    sa.Column('explanations', sa.JSON(), nullable=False),
    sa.Column('prompt', sa.Text(), nullable=False),
    sa.Column('raw_response', sa.Text(), nullable=False),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('prompt_tokens', sa.Integer(), nullable=False),
    sa.Column('completion_tokens', sa.Integer(), nullable=False),
    sa.Column('cost_usd', sa.Float(), nullable=False),
    sa.Column('latency_seconds', sa.Float(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['item_id'], ['item.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['jury_run_id'], ['juryrun.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('jury_run_id', 'item_id', 'judge', name='uq_verdict_run_item_judge')
    )
    with op.batch_alter_table('judgeverdict', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_judgeverdict_item_id'), ['item_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_judgeverdict_jury_run_id'), ['jury_run_id'], unique=False)
        batch_op.create_index('ix_verdict_cache_key', ['cache_key'], unique=False)

    op.create_table('metricscore',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('item_id', sa.Integer(), nullable=False),
    sa.Column('metric', sqlmodel.sql.sqltypes.AutoString(length=100), nullable=False),
    sa.Column('value', sa.Float(), nullable=False),
    sa.Column('settings', sa.JSON(), nullable=False),
    sa.Column('settings_hash', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
    sa.Column('computed_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['item_id'], ['item.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('item_id', 'metric', 'settings_hash', name='uq_metric_item_metric_settings')
    )
    with op.batch_alter_table('metricscore', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_metricscore_item_id'), ['item_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_metricscore_metric'), ['metric'], unique=False)

    op.create_table('ratingsubmission',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('item_id', sa.Integer(), nullable=False),
    sa.Column('rater_id', sa.Integer(), nullable=False),
    sa.Column('revision', sa.Integer(), nullable=False),
    sa.Column('scores', sa.JSON(), nullable=False),
    sa.Column('comment', sa.Text(), nullable=False),
    sa.Column('flag', sqlmodel.sql.sqltypes.AutoString(length=30), nullable=True),
    sa.Column('request_id', sqlmodel.sql.sqltypes.AutoString(length=100), nullable=True),
    sa.Column('elapsed_seconds', sa.Float(), nullable=True),
    sa.Column('submitted_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['item_id'], ['item.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['rater_id'], ['user.id'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('item_id', 'rater_id', 'revision', name='uq_submission_revision'),
    sa.UniqueConstraint('request_id')
    )
    with op.batch_alter_table('ratingsubmission', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_ratingsubmission_rater_id'), ['rater_id'], unique=False)
        batch_op.create_index('ix_submission_item_rater', ['item_id', 'rater_id'], unique=False)

    op.create_table('rating',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('item_id', sa.Integer(), nullable=False),
    sa.Column('rater_id', sa.Integer(), nullable=False),
    sa.Column('criterion', sqlmodel.sql.sqltypes.AutoString(length=100), nullable=False),
    sa.Column('score', sa.Integer(), nullable=False),
    sa.Column('submission_id', sa.Integer(), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['item_id'], ['item.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['rater_id'], ['user.id'], ),
    sa.ForeignKeyConstraint(['submission_id'], ['ratingsubmission.id'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('item_id', 'rater_id', 'criterion', name='uq_rating_current')
    )
    with op.batch_alter_table('rating', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_rating_item_id'), ['item_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_rating_rater_id'), ['rater_id'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('rating', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_rating_rater_id'))
        batch_op.drop_index(batch_op.f('ix_rating_item_id'))

    op.drop_table('rating')
    with op.batch_alter_table('ratingsubmission', schema=None) as batch_op:
        batch_op.drop_index('ix_submission_item_rater')
        batch_op.drop_index(batch_op.f('ix_ratingsubmission_rater_id'))

    op.drop_table('ratingsubmission')
    with op.batch_alter_table('metricscore', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_metricscore_metric'))
        batch_op.drop_index(batch_op.f('ix_metricscore_item_id'))

    op.drop_table('metricscore')
    with op.batch_alter_table('judgeverdict', schema=None) as batch_op:
        batch_op.drop_index('ix_verdict_cache_key')
        batch_op.drop_index(batch_op.f('ix_judgeverdict_jury_run_id'))
        batch_op.drop_index(batch_op.f('ix_judgeverdict_item_id'))

    op.drop_table('judgeverdict')
    with op.batch_alter_table('assignment', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_assignment_user_id'))
        batch_op.drop_index(batch_op.f('ix_assignment_study_id'))
        batch_op.drop_index(batch_op.f('ix_assignment_item_id'))

    op.drop_table('assignment')
    with op.batch_alter_table('juryrun', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_juryrun_study_id'))
        batch_op.drop_index(batch_op.f('ix_juryrun_config_hash'))

    op.drop_table('juryrun')
    with op.batch_alter_table('item', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_item_study_id'))
        batch_op.drop_index(batch_op.f('ix_item_benchmark'))

    op.drop_table('item')
    with op.batch_alter_table('study', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_study_rubric_id'))

    op.drop_table('study')
    with op.batch_alter_table('criterion', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_criterion_rubric_id'))

    op.drop_table('criterion')
    op.drop_table('user')
    op.drop_table('rubric')
