"""PostgreSQL connection strings in messages: never with their password (see config.mask_dsn)."""

from __future__ import annotations

from tracescorer.config import mask_dsn

__all__ = ["mask_dsn"]
