"""The one ``Settings`` model: every section, the checks across sections, and the configuration as
shown (secrets masked)."""

from __future__ import annotations

import re
from typing import Any

from pydantic import PrivateAttr, field_validator, model_validator

from tracescorer.config.base import Section
from tracescorer.config.daemon import LogSettings, ReportSettings, ShutdownSettings
from tracescorer.config.envexpand import Unset, UnsetVariables
from tracescorer.config.errors import ConfigError
from tracescorer.config.export import ExportSettings
from tracescorer.config.monitors import MonitorSettings, ScoreMetricsSettings, check_monitors
from tracescorer.config.receiver import ApiSettings, MetricsSettings, ReceiverSettings
from tracescorer.config.scoring import JudgeSettings, ScorerBinding, ScoringSettings
from tracescorer.config.spans import AssemblySettings, SegmentLogSettings, TriageSettings, WorkersSettings
from tracescorer.config.store import StoreSettings

SECRET_KEYS = frozenset({"auth_token", "api_key", "api_token", "headers", "token", "slack"})


class Settings(Section):
    """The whole daemon configuration (see config/tracescorer.yaml for every key)."""

    receiver: ReceiverSettings = ReceiverSettings()
    store: StoreSettings = StoreSettings()
    segment_log: SegmentLogSettings = SegmentLogSettings()
    workers: WorkersSettings = WorkersSettings()
    triage: TriageSettings = TriageSettings()
    assembly: AssemblySettings = AssemblySettings()
    judge: JudgeSettings = JudgeSettings()
    scoring: ScoringSettings = ScoringSettings()
    scorers: list[ScorerBinding] = []
    export: ExportSettings = ExportSettings()
    api: ApiSettings = ApiSettings()
    metrics: MetricsSettings = MetricsSettings()
    shutdown: ShutdownSettings = ShutdownSettings()
    score_metrics: ScoreMetricsSettings = ScoreMetricsSettings()
    monitors: list[MonitorSettings] = []
    log: LogSettings = LogSettings()
    report: ReportSettings = ReportSettings()
    # read commands: variables left unset under keys only serve uses (see tracescorer.config.envexpand)
    _deferred: tuple[Unset, ...] = PrivateAttr(default=())

    @model_validator(mode="before")
    @classmethod
    def _log_level_alias(cls, data: Any) -> Any:
        if isinstance(data, dict) and "log_level" in data:
            data = dict(data)
            level = data.pop("log_level")
            log = data.get("log")
            if isinstance(log, dict) and "level" in log:
                raise ValueError("log_level is the old name of log.level: set only log.level")
            data["log"] = {**(log if isinstance(log, dict) else {}), "level": level}
        return data

    @field_validator("scorers")
    @classmethod
    def _unique_ids(cls, value: list[ScorerBinding]) -> list[ScorerBinding]:
        seen: set[str] = set()
        for binding in value:
            if binding.id in seen:
                raise ValueError(f"duplicate scorer id {binding.id!r}")
            seen.add(binding.id)
        return value

    @model_validator(mode="after")
    def _monitors_match_scorers(self) -> Settings:
        check_monitors(self.monitors, self.scorers)
        return self

    @property
    def deferred(self) -> tuple[Unset, ...]:
        """Variables a read command left unset (their keys are left out); empty for ``serve``."""
        return self._deferred

    def require_environment(self) -> None:
        """Raise :class:`ConfigError` listing every variable a read command's load left unset:
        what needs the judge, export or notifications (``backfill`` on the file) calls this."""
        if self._deferred:
            raise ConfigError(f"invalid configuration: {UnsetVariables(self._deferred)}")

    def masked(self) -> dict[str, Any]:
        """The effective configuration as plain data, secrets replaced by ``***``."""
        masked: dict[str, Any] = _mask(self.model_dump(mode="json"))
        return masked


_URL_PASSWORD = re.compile(r"(://[^:/@\s]*:)[^@\s]*@")
_KV_PASSWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)


def mask_dsn(dsn: str) -> str:
    """A PostgreSQL connection string with its password replaced by ``***`` (URL and
    ``key=value`` forms): for messages and ``check-config``."""
    return _KV_PASSWORD.sub(r"\1***", _URL_PASSWORD.sub(r"\1***@", dsn))


def _mask(value: Any, key: str = "") -> Any:
    if key == "dsn" and isinstance(value, str):
        return mask_dsn(value)
    if key in SECRET_KEYS and value:
        return dict.fromkeys(value, "***") if isinstance(value, dict) else "***"
    if isinstance(value, dict):
        return {k: _mask(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask(v) for v in value]
    return value
