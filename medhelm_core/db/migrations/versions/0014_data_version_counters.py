"""agreement: constant-time data versions (``dataversion``: a counter per study and benchmark, bumped at commit)

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-03 20:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = '0014'
down_revision: str | None = '0013'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Empty at first: a study without a row reads as version "none yet", and its next write creates the row.
    op.create_table(
        'dataversion',
        sa.Column('study_id', sa.Integer(), nullable=False),
        sa.Column('scope', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column('version', sa.Integer(), nullable=False),
        sa.Column('token', sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.PrimaryKeyConstraint('study_id', 'scope'),
    )


def downgrade() -> None:
    op.drop_table('dataversion')
