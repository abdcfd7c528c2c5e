"""one active jury run per configuration: a partial unique index on (study, config hash) of running runs

The same jury configuration started twice at once (two pages, a page and the CLI) made two runs, or two
workers on one run, and paid for every call twice. The index lets the database refuse the second worker.

A database written before this revision may hold more than one active run of a configuration (the race
above, or workers that died): all but the newest of them are marked ``stopped`` first, as their heartbeats
would say anyway, so the index can be built; a stopped run resumes with the same command.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-04 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0006'
down_revision: str | None = '0005'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# As in medhelm_core.db.models.ACTIVE_RUN_CLAUSE at this revision (a migration must not follow later edits).
ACTIVE = "source = 'litellm' AND status IN ('running', 'stopping')"
INDEX = 'uq_juryrun_one_active_per_config'


def upgrade() -> None:
    op.execute(
        "UPDATE juryrun SET status = 'stopped' "
        f"WHERE {ACTIVE} AND id NOT IN ("
        f"SELECT newest FROM (SELECT MAX(id) AS newest FROM juryrun WHERE {ACTIVE} "
        "GROUP BY study_id, config_hash) AS kept)"
    )
    with op.batch_alter_table('juryrun', schema=None) as batch_op:
        batch_op.create_index(INDEX, ['study_id', 'config_hash'], unique=True,
                              sqlite_where=sa.text(ACTIVE), postgresql_where=sa.text(ACTIVE))


def downgrade() -> None:
    with op.batch_alter_table('juryrun', schema=None) as batch_op:
        batch_op.drop_index(INDEX)
