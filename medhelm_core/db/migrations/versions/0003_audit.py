"""audit trail: who did what, when

A new table only; no existing table changes, so no server defaults are needed.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-02 14:02:48.403153
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = '0003'
down_revision: str | None = '0002'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('auditevent',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('user_id', sa.Integer(), nullable=True),
    sa.Column('actor', sqlmodel.sql.sqltypes.AutoString(length=150), nullable=False),
    sa.Column('action', sqlmodel.sql.sqltypes.AutoString(length=100), nullable=False),
    sa.Column('study_id', sa.Integer(), nullable=True),
    sa.Column('details', sa.JSON(), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('auditevent', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_auditevent_action'), ['action'], unique=False)
        batch_op.create_index('ix_auditevent_at', ['at'], unique=False)
        batch_op.create_index(batch_op.f('ix_auditevent_study_id'), ['study_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_auditevent_user_id'), ['user_id'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('auditevent', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_auditevent_user_id'))
        batch_op.drop_index(batch_op.f('ix_auditevent_study_id'))
        batch_op.drop_index('ix_auditevent_at')
        batch_op.drop_index(batch_op.f('ix_auditevent_action'))

    op.drop_table('auditevent')
