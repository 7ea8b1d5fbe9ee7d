"""Settings: ``config/tracescorer.yaml`` + ``${VAR:-default}`` expansion + ``TRACESCORER_*`` env.

One pydantic model validates everything at start; unknown keys and bad values fail with one
message naming the key. Environment overrides use ``TRACESCORER_<SECTION>__<KEY>`` (nested keys
joined by ``__``), e.g. ``TRACESCORER_STORE__PATH=/data/ts.duckdb``; variables whose first part is
not a section (``TRACESCORER_AUTH_TOKEN``, ``TRACESCORER_JUDGE_MODEL``) are only used for expansion.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from tracescorer.monitors.config import MonitorSettings, ScoreMetricsSettings, check_monitors
from tracescorer.scoring.filters import RunFilter

ENV_PREFIX = "TRACESCORER_"
SECRET_KEYS = frozenset({"auth_token", "api_key", "query_token", "headers", "slack"})
_EXPAND = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-(.*?))?\}")


class ConfigError(ValueError):
    """The configuration is invalid; the message names the offending key."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)


class ListenerSettings(_Section):
    host: str = "0.0.0.0"
    port: int = Field(4317, ge=0, le=65535)
    enabled: bool = True


class TLSSettings(_Section):
    cert_file: Path | None = None
    key_file: Path | None = None

    @model_validator(mode="after")
    def _both_or_neither(self) -> TLSSettings:
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("cert_file and key_file must be given together")
        for path in (self.cert_file, self.key_file):
            if path is not None and not path.is_file():
                raise ValueError(f"file not found: {path}")
        return self

    @property
    def enabled(self) -> bool:
        return self.cert_file is not None


class ReceiverSettings(_Section):
    grpc: ListenerSettings = ListenerSettings(port=4317)
    http: ListenerSettings = ListenerSettings(port=4318)
    max_message_bytes: int = Field(16 * 1024 * 1024, gt=0)
    auth_token: str = ""
    tls: TLSSettings = TLSSettings()
    max_queue_items: int = Field(50_000, gt=0, description="spans + log records waiting for commit")
    retry_after_s: int = Field(1, ge=0)
    request_timeout_s: float = Field(30.0, gt=0)


class StoreSettings(_Section):
    path: str = "tracescorer.duckdb"
    retention_days: float = Field(30, gt=0)
    retention_interval_s: float = Field(3600, gt=0)
    max_batch_items: int = Field(20_000, gt=0, description="rows per group commit")
    memory_limit: str = Field("1GB", pattern=r"^\d+(\.\d+)?\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)$")
    checkpoint_threshold: str = Field("64MB", pattern=r"^\d+(\.\d+)?\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)$")
    query_max_rows: int = Field(10_000, gt=0)
    query_timeout_s: float = Field(30.0, gt=0)


class AssemblySettings(_Section):
    idle_s: float = Field(5, gt=0)
    max_wait_s: float = Field(300, gt=0)
    conversation_idle_s: float = Field(900, gt=0)
    max_traces: int = Field(10_000, gt=0)
    max_spans: int = Field(200_000, gt=0)
    conversation_keys: list[str] = []


class JudgeSettings(_Section):
    model: str = ""
    api_base: str | None = None
    api_key: str | None = None
    max_concurrency: int = Field(16, gt=0)
    requests_per_minute: int = Field(600, gt=0)
    daily_budget_usd: float | None = Field(None, ge=0)
    timeout_s: float = Field(60, gt=0)


class ScoringSettings(_Section):
    max_queue: int = Field(1000, gt=0, description="targets waiting for a scorer; beyond: rate_limited")
    workers: int = Field(4, gt=0, description="concurrent code-scorer runs (judge runs: judge.max_concurrency)")
    recover_window_s: float = Field(3600, ge=0, description="at start, runs this recent without a decision are scored")
    shutdown_timeout_s: float = Field(30, ge=0)


class SamplingSettings(_Section):
    ratio: float = Field(1.0, ge=0, le=1)


class ScorerBinding(_Section):
    id: str
    prebuilt: str | None = None
    python: str | None = None
    options: dict[str, Any] = {}
    scope: Literal["run", "conversation"] = "run"
    sampling: SamplingSettings = SamplingSettings()
    filter: RunFilter = RunFilter()
    threshold: float | None = None
    judge: dict[str, Any] = {}
    enabled: bool = True

    @model_validator(mode="after")
    def _one_source(self) -> ScorerBinding:
        if (self.prebuilt is None) == (self.python is None):
            raise ValueError("exactly one of 'prebuilt' or 'python' is required")
        return self


class ExportSettings(_Section):
    enabled: bool = False
    endpoint: str | None = None
    protocol: Literal["grpc", "http/protobuf"] | None = None
    headers: dict[str, str] = {}
    timeout_s: float = Field(10, gt=0)
    batch_size: int = Field(256, gt=0, description="most evaluation spans per export request")
    interval_s: float = Field(2.0, gt=0, description="export scores written since the last export this often")
    retry_initial_s: float = Field(1.0, gt=0, description="first wait after a failed export; doubles per failure")
    retry_max_s: float = Field(60.0, gt=0, description="longest wait between retries of a failing export")


class Settings(_Section):
    """The whole daemon configuration (see config/tracescorer.yaml for every key)."""

    receiver: ReceiverSettings = ReceiverSettings()
    store: StoreSettings = StoreSettings()
    assembly: AssemblySettings = AssemblySettings()
    judge: JudgeSettings = JudgeSettings()
    scoring: ScoringSettings = ScoringSettings()
    scorers: list[ScorerBinding] = []
    export: ExportSettings = ExportSettings()
    score_metrics: ScoreMetricsSettings = ScoreMetricsSettings()
    monitors: list[MonitorSettings] = []
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"

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

    def masked(self) -> dict[str, Any]:
        """The effective configuration as plain data, secrets replaced by ``***``."""
        masked: dict[str, Any] = _mask(self.model_dump(mode="json"))
        return masked


def _mask(value: Any, key: str = "") -> Any:
    if key in SECRET_KEYS and value:
        return {k: "***" for k in value} if isinstance(value, dict) else "***"
    if isinstance(value, dict):
        return {k: _mask(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask(v) for v in value]
    return value


def expand(value: Any, env: Mapping[str, str]) -> Any:
    """Replace ``${VAR}`` / ``${VAR:-default}`` in every string of a parsed YAML tree."""
    if isinstance(value, str):
        return _EXPAND.sub(lambda m: env.get(m.group(1)) or (m.group(2) or ""), value)
    if isinstance(value, dict):
        return {k: expand(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [expand(v, env) for v in value]
    return value


def _apply_env(data: dict[str, Any], env: Mapping[str, str]) -> None:
    sections = set(Settings.model_fields)
    for name, raw in sorted(env.items()):
        if not name.startswith(ENV_PREFIX):
            continue
        path = name[len(ENV_PREFIX) :].lower().split("__")
        if path[0] not in sections or (len(path) == 1 and path[0] != "log_level"):
            continue  # an expansion variable such as TRACESCORER_AUTH_TOKEN, not an override
        node = data
        for part in path[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = {}
                node[part] = child
            node = child
        parsed = yaml.safe_load(raw) if raw.strip() else ""
        # keep secrets and free text verbatim; YAML-typed only for numbers, booleans, lists
        node[path[-1]] = parsed if isinstance(parsed, (int, float, bool, list, dict)) else raw


def _format_error(exc: ValidationError) -> str:
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "(root)"
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
        lines.append(f"{loc}: {msg}")
    return "invalid configuration: " + "; ".join(lines)


def load_settings(path: str | Path | None = None, env: Mapping[str, str] | None = None) -> Settings:
    """Load and validate settings from ``path`` (optional) and the environment."""
    env = os.environ if env is None else env
    data: Any = {}
    if path is not None:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
        try:
            data = yaml.safe_load(text) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"config file {path} is not valid YAML: {exc}") from None
        if not isinstance(data, dict):
            raise ConfigError(f"config file {path}: the top level must be a mapping")
    data = expand(data, env)
    _apply_env(data, env)
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_format_error(exc)) from None
