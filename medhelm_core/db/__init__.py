"""The plumbing under every step: the engine and transactions, the table models and the StrEnums stored in
them, the alembic migrations, the audit trail and backups.
"""

# The data version counters count writes through session events: registered whenever the database is used.
from medhelm_core.db import data_versions as _data_versions  # noqa: E402,F401
