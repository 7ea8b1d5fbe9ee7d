"""The ``monitors:`` and ``score_metrics:`` configuration sections (validated at start).

The monitor keys (``id``, ``scorer``, ``aggregate``, ``window``, ``below``/``above``,
``min_samples``, ``cooldown``, ``notify`` with ``webhook``/``slack``) are a contract; the others
are optional refinements with defaults. The keys against flapping and silence take their names
from Prometheus rules (``for``, ``keep_firing_for``), Grafana alerting (``recovery_threshold``) and
Alertmanager (``repeat_interval``); docs/monitors.md explains them.
"""

from __future__ import annotations

import fnmatch
import itertools
import math
import re
from collections.abc import Sequence
from typing import Any, Literal, Protocol
from urllib.parse import urlsplit

from pydantic import ConfigDict, Field, ValidationInfo, field_validator, model_validator

from tracescorer.config.base import Section

# tracescorer.metrics.DEFAULT_SCORE_BUCKETS, not imported: prometheus_client would cost every CLI command 0.05 s
DEFAULT_SCORE_BUCKETS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)

Aggregate = Literal["mean", "pass_rate", "error_rate", "count", "coverage"]
#: aggregates that are fractions between 0 and 1
FRACTIONS = ("pass_rate", "error_rate", "coverage")

_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
MAX_WINDOW_S = 366 * 86400.0


def parse_duration(value: str | float | int) -> float:
    """Seconds in ``90s``, ``30m``, ``1h``, ``1d``, ``1h30m`` (Prometheus style) or a plain number."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a duration")
    if isinstance(value, (int, float)):
        seconds = float(value)
    else:
        text = value.strip()
        try:
            seconds = float(text)
        except ValueError:
            parts = _PART.findall(text)
            if not text or "".join(n + u for n, u in parts) != text:
                raise ValueError(f"{value!r} is not a duration (use e.g. 90s, 30m, 1h, 1d or 1h30m)") from None
            seconds = sum(float(n) * _UNITS[u] for n, u in parts)
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"{value!r} is not a duration (must be a finite, non-negative length of time)")
    return seconds


def format_duration(seconds: float) -> str:
    """The shortest ``1d2h30m15s`` form of ``seconds`` (what notifications and the CLI show)."""
    if seconds <= 0:
        return "0s"
    whole = int(seconds)
    if whole != seconds or whole < 1:
        return f"{seconds:g}s"
    out = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, whole = divmod(whole, size)
        if count:
            out.append(f"{count}{unit}")
    return "".join(out)


class NotifySettings(Section):
    """One notification target: exactly one of ``webhook`` (generic JSON POST) or ``slack``
    (a Slack incoming-webhook URL)."""

    webhook: str | None = None
    slack: str | None = None
    headers: dict[str, str] = Field({}, description="extra HTTP headers (e.g. Authorization); webhook only")
    timeout_s: float = Field(10.0, gt=0, le=300, description="per attempt")
    retries: int = Field(3, ge=0, le=20, description="further attempts after a failed one (backoff doubles)")
    retry_initial_s: float = Field(1.0, gt=0, le=60)

    @model_validator(mode="after")
    def _one_target(self) -> NotifySettings:
        if (self.webhook is None) == (self.slack is None):
            raise ValueError("give exactly one of 'webhook' or 'slack'")
        key, url = ("webhook", self.webhook) if self.webhook is not None else ("slack", self.slack)
        assert url is not None
        if not url.strip():
            raise ValueError(f"{key}: the URL is empty (is the environment variable it refers to set?)")
        parts = urlsplit(url.strip())
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"{key}: expected an http(s) URL, got {_redacted(url)!r}")
        if self.slack is not None and self.headers:
            raise ValueError("headers are only sent to generic webhooks, not to slack")
        return self

    @property
    def kind(self) -> Literal["webhook", "slack"]:
        return "webhook" if self.webhook is not None else "slack"

    @property
    def url(self) -> str:
        return (self.webhook if self.webhook is not None else self.slack or "").strip()

    @property
    def display(self) -> str:
        """Where it goes, safe to log: Slack URLs are secrets, so only the host is shown."""
        return f"{self.kind} {_redacted(self.url)}"


def _redacted(url: str) -> str:
    parts = urlsplit(url.strip())
    return f"{parts.scheme}://{parts.netloc}/…" if parts.netloc else "…"


#: ``for`` when not given: a minute (Grafana's default pending period), or the window if shorter.
DEFAULT_FOR_S = 60.0
DEFAULT_REPEAT_INTERVAL = "4h"  # Alertmanager's default
MIN_REPEAT_INTERVAL_S = 1.0

# keys of other alerting tools (or guesses at ours) and the key that does that here
_OTHER_NAMES = {
    "pending": "for",
    "pending_for": "for",
    "pending_period": "for",
    "for_s": "for",
    "resolve_for": "keep_firing_for",
    "recovery_for": "keep_firing_for",
    "clear_for": "keep_firing_for",
    "hysteresis": "recovery_threshold",
    "resolve_threshold": "recovery_threshold",
    "resolve_below": "recovery_threshold",
    "resolve_above": "recovery_threshold",
    "recover_below": "recovery_threshold",
    "recover_above": "recovery_threshold",
    "repeat": "repeat_interval",
    "renotify": "repeat_interval",
    "renotify_interval": "repeat_interval",
    "reminder_interval": "repeat_interval",
}


class MonitorSettings(Section):
    """A threshold on an aggregate of one scorer's (or a glob of scorers') live scores; ``coverage``:
    of their live decisions (the share of the targets they should have scored that got a score)."""

    model_config = ConfigDict(extra="forbid", validate_default=True, serialize_by_alias=True)

    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")
    scorer: str = Field(min_length=1, description="a scorer id or a glob such as multi-turn-judge-*")
    aggregate: Aggregate
    window: str
    below: float | None = None
    above: float | None = None
    min_samples: int = Field(
        10, ge=1, description="fewer scores (coverage: eligible targets) in the window: no verdict (count ignores it)"
    )
    for_: str | None = Field(
        None, alias="for", description="breaching this long before it fires (default 1m, or the window if shorter)"
    )
    keep_firing_for: str | None = Field(None, description="clear this long before it resolves (default: as for)")
    recovery_threshold: float | None = Field(
        None, description="clear only past this value (default: the threshold); between the two it stays as it is"
    )
    cooldown: str = Field("0s", description="no second firing message sooner than this after one (held, not lost)")
    repeat_interval: str = Field(DEFAULT_REPEAT_INTERVAL, description="remind while still firing; 0s: never")
    notify: list[NotifySettings] = []
    notify_resolved: bool = Field(True, description="also notify when a notified firing resolves")
    trace_url: str | None = Field(None, description="link template for examples, e.g. https://ui/trace/{trace_id}")

    @model_validator(mode="before")
    @classmethod
    def _known_names(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key, ours in _OTHER_NAMES.items():
                if key in data:
                    raise ValueError(
                        f"unknown key {key!r}; did you mean {ours!r}? "
                        "(docs/monitors.md: for, keep_firing_for, recovery_threshold, cooldown, repeat_interval)"
                    )
        return data

    @field_validator("window", "cooldown", "for_", "keep_firing_for", "repeat_interval", mode="before")
    @classmethod
    def _duration(cls, value: Any, info: ValidationInfo) -> str | None:
        if value is None:
            return None
        try:
            parse_duration(value)
        except ValueError as exc:
            raise ValueError(str(exc)) from None
        return str(value).strip() if isinstance(value, str) else f"{value}s"

    @field_validator("window")
    @classmethod
    def _positive_window(cls, value: str, info: ValidationInfo) -> str:
        seconds = parse_duration(value)
        if not 1 <= seconds <= MAX_WINDOW_S:
            raise ValueError(f"window {value!r} must be between 1s and 366d")
        return value

    @field_validator("for_", "keep_firing_for", "cooldown")
    @classmethod
    def _bounded(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None and parse_duration(value) > MAX_WINDOW_S:
            key = "for" if info.field_name == "for_" else info.field_name
            raise ValueError(f"{key} {value!r} must be at most 366d")
        return value

    @field_validator("repeat_interval")
    @classmethod
    def _repeat(cls, value: str, info: ValidationInfo) -> str:
        seconds = parse_duration(value)
        if seconds and not MIN_REPEAT_INTERVAL_S <= seconds <= MAX_WINDOW_S:
            raise ValueError(f"repeat_interval {value!r} must be 0s (no reminders) or between 1s and 366d")
        return value

    @field_validator("trace_url")
    @classmethod
    def _template(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            value.format(trace_id="t", conversation_id="c", run_id="r", scorer_id="s")
        except (KeyError, IndexError, ValueError) as exc:
            raise ValueError(
                f"placeholders may be {{trace_id}}, {{conversation_id}}, {{run_id}}, {{scorer_id}}: {exc}"
            ) from None
        return value

    @model_validator(mode="after")
    def _one_threshold(self) -> MonitorSettings:
        if (self.below is None) == (self.above is None):
            raise ValueError("give exactly one of 'below' or 'above'")
        threshold = self.threshold
        if not math.isfinite(threshold):
            raise ValueError("the threshold must be a finite number")
        if self.aggregate in FRACTIONS and not 0 <= threshold <= 1:
            raise ValueError(
                f"{self.aggregate} is a fraction between 0 and 1 (0.8 means 80%), got {self.comparison}: {threshold:g}"
            )
        recovery = self.recovery_threshold
        if recovery is not None:
            if not math.isfinite(recovery):
                raise ValueError("recovery_threshold must be a finite number")
            if self.aggregate in FRACTIONS and not 0 <= recovery <= 1:
                raise ValueError(f"recovery_threshold is a fraction between 0 and 1, got {recovery:g}")
            wrong_side = recovery < threshold if self.comparison == "below" else recovery > threshold
            if wrong_side:
                side = "at or above" if self.comparison == "below" else "at or below"
                raise ValueError(
                    f"recovery_threshold {recovery:g} must be {side} the threshold ({self.comparison}: "
                    f"{threshold:g}): the monitor resolves once the value is back {side} it"
                )
        return self

    @property
    def comparison(self) -> Literal["below", "above"]:
        return "below" if self.below is not None else "above"

    @property
    def threshold(self) -> float:
        value = self.below if self.below is not None else self.above
        assert value is not None
        return value

    @property
    def recovery(self) -> float:
        """The value a firing monitor must get back to (``recovery_threshold``, else the threshold)."""
        return self.recovery_threshold if self.recovery_threshold is not None else self.threshold

    @property
    def window_s(self) -> float:
        return parse_duration(self.window)

    @property
    def for_s(self) -> float:
        """The pending period: given, else a minute or the window if shorter."""
        return parse_duration(self.for_) if self.for_ is not None else min(DEFAULT_FOR_S, self.window_s)

    @property
    def keep_firing_for_s(self) -> float:
        """How long readings must be clear before it resolves: given, else the pending period."""
        return parse_duration(self.keep_firing_for) if self.keep_firing_for is not None else self.for_s

    @property
    def cooldown_s(self) -> float:
        return parse_duration(self.cooldown)

    @property
    def repeat_interval_s(self) -> float:
        """0: no reminders."""
        return parse_duration(self.repeat_interval)

    def matches(self, scorer_id: str) -> bool:
        return fnmatch.fnmatchcase(scorer_id, self.scorer)


class ScoreMetricsSettings(Section):
    """The score metrics on ``/metrics``: the ``agent`` label, and the histogram's buckets."""

    max_agents: int = Field(20, ge=0, description="agent names kept as label values; later ones are '_other'")
    buckets: list[float] = Field(list(DEFAULT_SCORE_BUCKETS), min_length=1, max_length=50)

    @field_validator("buckets")
    @classmethod
    def _increasing(cls, value: list[float]) -> list[float]:
        if any(not math.isfinite(v) for v in value) or any(b <= a for a, b in itertools.pairwise(value)):
            raise ValueError("buckets must be finite and strictly increasing")
        return value


class _Binding(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def threshold(self) -> float | None: ...


def check_monitors(monitors: Sequence[MonitorSettings], scorers: Sequence[_Binding]) -> None:
    """Cross-checks against the scorer bindings; raises ValueError naming the monitor."""
    seen: set[str] = set()
    for i, monitor in enumerate(monitors):
        where = f"monitors.{i} ({monitor.id})"
        if monitor.id in seen:
            raise ValueError(f"{where}: duplicate monitor id {monitor.id!r}")
        seen.add(monitor.id)
        matched = [b for b in scorers if monitor.matches(b.id)]
        if not matched:
            known = ", ".join(b.id for b in scorers) or "none"
            raise ValueError(f"{where}: scorer {monitor.scorer!r} matches no scorer binding (bound: {known})")
        if monitor.aggregate == "pass_rate" and not any(b.threshold is not None for b in matched):
            raise ValueError(
                f"{where}: pass_rate needs a 'threshold' on the scorer binding "
                f"({', '.join(b.id for b in matched)} label no score pass/fail)"
            )
