"""The daemon's own ``log`` and ``shutdown``, and ``report`` (the report's links to traces)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from tracescorer.config.base import Section


class ShutdownSettings(Section):
    grace_s: float = Field(
        20,
        gt=0,
        description="the whole shutdown (SIGTERM/SIGINT) ends within this; judge calls "
        "still running then are cancelled and scored after the next start",
    )


LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]


class LogSettings(Section):
    """``log``: the daemon's own log (third-party libraries log at WARNING and above)."""

    level: LogLevel = Field("INFO", description="debug, info, warning, error or critical, in any case")
    format: Literal["text", "json"] = Field(
        "text", description="json: one object per line (time, level, logger, message, exception)"
    )

    @field_validator("level", mode="before")
    @classmethod
    def _any_case(cls, value: Any) -> Any:
        if isinstance(value, str):
            upper = value.strip().upper()
            return "WARNING" if upper == "WARN" else upper
        return value

    @field_validator("format", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value


class ReportSettings(Section):
    """``tracescorer report``: links from the report to the trace backend."""

    trace_url: str | None = Field(
        None, description="trace link template, e.g. https://jaeger/trace/{trace_id} ({run_id}, {conversation_id} too)"
    )

    @field_validator("trace_url")
    @classmethod
    def _template(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"{value!r} must be an http:// or https:// URL")
        try:
            value.format(trace_id="t", run_id="r", conversation_id="c", scorer_id="s")
        except (KeyError, IndexError, ValueError) as exc:
            raise ValueError(
                f"placeholders may be {{trace_id}}, {{run_id}}, {{conversation_id}}, {{scorer_id}}: {exc}"
            ) from None
        return value
