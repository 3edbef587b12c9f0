"""Alembic migrations for the Galahad catalog, applied automatically at start-up."""
