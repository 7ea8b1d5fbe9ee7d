"""The daemon's log: one handler on the root logger, text or JSON lines, quiet libraries.

Libraries log at WARNING and above (the root logger's level; ``THIRD_PARTY`` are set to it
explicitly): LiteLLM writes an INFO line per call
(two, in fact, through its own handler and again through the root logger), httpx one per
request. :func:`quiet_litellm` removes the handlers LiteLLM adds to its loggers when it is
imported, so its warnings go through the one root handler, once.

``format="json"``: one JSON object per line with ``time`` (RFC 3339, UTC, milliseconds),
``level``, ``logger``, ``message`` and, for a record with an exception, ``exception`` (the
formatted traceback); what log shippers (Vector, Fluent Bit, the Collector's filelog receiver)
parse without a regex.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import sys
from typing import Literal

__all__ = ["THIRD_PARTY", "JsonFormatter", "configure", "configured", "current_format", "quiet_litellm", "set_level"]

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
LITELLM_LOGGERS = ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy")
THIRD_PARTY = (
    *LITELLM_LOGGERS,
    "litellm",
    "httpx",
    "httpcore",
    "openai",
    "asyncio",
    "aiohttp",
    "grpc",
    "urllib3",
    "psycopg",
    "psycopg.pool",
)

LogFormat = Literal["text", "json"]
_HANDLER_NAME = "tracescorer"


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message (, exception)."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, str] = {
            "time": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            out["exception"] = record.exc_text
        if record.stack_info:
            out["stack"] = self.formatStack(record.stack_info)
        return json.dumps(out, ensure_ascii=False)


def configure(level: str, fmt: LogFormat = "text") -> None:
    """Log ``level`` and above of this package to stderr through one root handler in ``fmt``;
    libraries at WARNING and above. Replaces handlers configured before (idempotent)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    # every library inherits WARNING from the root; the package logs at the level asked for
    root.setLevel(logging.WARNING)
    logging.getLogger("tracescorer").setLevel(level.upper())
    for name in THIRD_PARTY:  # and those known to set a level of their own are put back to WARNING
        logging.getLogger(name).setLevel(logging.WARNING)
    quiet_litellm()
    logging.captureWarnings(True)  # Python warnings as records of this handler, not bare stderr text


def set_level(level: str) -> None:
    """Log ``level`` and above of this package from now on (a configuration reload)."""
    logging.getLogger("tracescorer").setLevel(level.upper())


def configured() -> bool:
    """Whether :func:`configure` set up this process's log (the daemon, the store process); a
    program using tracescorer as a library keeps its own logging as it is."""
    return any(h.get_name() == _HANDLER_NAME for h in logging.getLogger().handlers)


def current_format() -> LogFormat:
    """The format of the root handler :func:`configure` installed (what child processes use)."""
    json_handler = any(isinstance(h.formatter, JsonFormatter) for h in logging.getLogger().handlers)
    return "json" if json_handler else "text"


def quiet_litellm() -> None:
    """Take LiteLLM's own stream handlers off its loggers (its records reach the root handler by
    propagation: one line each, in our format) and keep them at WARNING. Harmless before
    litellm is imported; call it again after the import, which adds the handlers."""
    for name in LITELLM_LOGGERS:
        logger = logging.getLogger(name)
        for handler in list(logger.handlers):
            logger.removeHandler(handler)
        logger.setLevel(logging.WARNING)
        logger.propagate = True
