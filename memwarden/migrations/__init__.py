"""Alembic migrations for the durable store, shipped as package data and run by `SqlStore.migrate()`."""
