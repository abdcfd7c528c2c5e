"""rating: indexes for the Rate page's reads at 100,000 items

``ix_assignment_queue`` walks one clinician's assignments of one study in queue order (position, then id) and
carries the item and the repeat flag, so the page's counts, its entry by OFFSET/LIMIT 1 and the next open item
read only the index; ``ix_submission_rater_item`` answers "has this clinician submitted this item (or its
repeat)?" for each of those assignments from the index alone.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-03 20:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = '0013'
down_revision: str | None = '0012'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index('ix_assignment_queue', 'assignment',
                    ['user_id', 'study_id', 'position', 'id', 'item_id', 'retest'], unique=False)
    op.create_index('ix_submission_rater_item', 'ratingsubmission', ['rater_id', 'item_id', 'retest'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_submission_rater_item', table_name='ratingsubmission')
    op.drop_index('ix_assignment_queue', table_name='assignment')
