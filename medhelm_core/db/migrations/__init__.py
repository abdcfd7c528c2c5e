"""Alembic migrations, shipped inside the package so ``medhelm init`` works from any install."""
