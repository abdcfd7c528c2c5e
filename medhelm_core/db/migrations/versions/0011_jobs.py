"""jobs: the work queue that ``medhelm worker`` processes take from (jury runs, metric batches, report builds)

A job is claimed by one worker at a time and held by a lease the worker renews; a job whose lease has
expired (its worker died) is claimed again. At most one live (queued or running) job per jury run.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-03 20:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = '0011'
down_revision: str | None = '0010'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# As in medhelm_core.db.models.LIVE_JOB_CLAUSE at this revision (a migration must not follow later edits).
LIVE = "status IN ('queued', 'running')"


def upgrade() -> None:
    op.create_table('job',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('kind', sqlmodel.sql.sqltypes.AutoString(length=50), nullable=False),
    sa.Column('status', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
    sa.Column('payload', sa.JSON(), nullable=False),
    sa.Column('study_id', sa.Integer(), nullable=True),
    sa.Column('jury_run_id', sa.Integer(), nullable=True),
    sa.Column('created_by', sqlmodel.sql.sqltypes.AutoString(length=150), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('worker', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=True),
    sa.Column('lease_until', sa.DateTime(timezone=True), nullable=True),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('cancel_requested', sa.Boolean(), nullable=False),
    sa.Column('claimed_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('progress', sa.JSON(), nullable=False),
    sa.Column('result', sa.JSON(), nullable=False),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('output', sa.LargeBinary(), nullable=True),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('job', schema=None) as batch_op:
        batch_op.create_index('ix_job_status_id', ['status', 'id'], unique=False)
        batch_op.create_index(batch_op.f('ix_job_study_id'), ['study_id'], unique=False)
        batch_op.create_index('uq_job_one_live_per_jury_run', ['jury_run_id'], unique=True,
                              sqlite_where=sa.text(LIVE), postgresql_where=sa.text(LIVE))


def downgrade() -> None:
    with op.batch_alter_table('job', schema=None) as batch_op:
        batch_op.drop_index('uq_job_one_live_per_jury_run')
        batch_op.drop_index(batch_op.f('ix_job_study_id'))
        batch_op.drop_index('ix_job_status_id')
    op.drop_table('job')
