"""The plumbing under every step: the engine and transactions, the table models and the StrEnums stored in
them, the alembic migrations, the audit trail and backups.
"""
