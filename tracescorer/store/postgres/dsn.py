"""PostgreSQL connection strings in messages and ``check-config``: never with their password."""

from __future__ import annotations

import re

_URL_PASSWORD = re.compile(r"(://[^:/@\s]*:)[^@\s]*@")
_KV_PASSWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)


def mask_dsn(dsn: str) -> str:
    """The DSN with its password replaced by ``***`` (URL and ``key=value`` forms)."""
    return _KV_PASSWORD.sub(r"\1***", _URL_PASSWORD.sub(r"\1***@", dsn))
