"""jury: batch API submissions of a run (``jurybatch``), so a run in batch mode resumes and never submits twice

Each row is one provider batch: its input file id (stored before the batch is created), the provider's batch id once
it is known, the verdict cache keys it carries (its requests' custom_id) and a token sent as the batch's metadata,
by which a resumed run finds a batch whose id was never stored.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-03 20:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = '0012'
down_revision: str | None = '0011'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        'jurybatch',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('jury_run_id', sa.Integer(), nullable=False),
        sa.Column('judge', sqlmodel.sql.sqltypes.AutoString(length=300), nullable=False),
        sa.Column('token', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column('custom_ids', sa.JSON(), nullable=False),
        sa.Column('input_file_id', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column('batch_id', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=True),
        sa.Column('status', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
        sa.Column('provider_status', sqlmodel.sql.sqltypes.AutoString(length=30), nullable=True),
        sa.Column('error', sa.Text(), nullable=True),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('collected_at', sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(['jury_run_id'], ['juryrun.id'], ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('token', name='uq_jurybatch_token'),
    )
    with op.batch_alter_table('jurybatch', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_jurybatch_jury_run_id'), ['jury_run_id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('jurybatch', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_jurybatch_jury_run_id'))
    op.drop_table('jurybatch')
