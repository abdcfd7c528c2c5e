"""verdict: the study's pre-registered acceptance protocol, when it was fixed and when results were first viewed

``study.verdict_protocol`` holds the verdict's protocol (tests, epsilon, delta, alpha, minimum items and
clinicians) as JSON; ``verdict_protocol_fixed_at`` when it was last set; ``verdict_viewed_at`` when the
verdict's results were first shown, so that a protocol fixed after that is flagged in the report.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-21 12:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0009'
down_revision: str | None = '0008'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('study', schema=None) as batch_op:
        batch_op.add_column(sa.Column('verdict_protocol', sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column('verdict_protocol_fixed_at', sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column('verdict_viewed_at', sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('study', schema=None) as batch_op:
        batch_op.drop_column('verdict_viewed_at')
        batch_op.drop_column('verdict_protocol_fixed_at')
        batch_op.drop_column('verdict_protocol')
