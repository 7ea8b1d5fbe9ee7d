"""Settings: ``config/tracescorer.yaml`` + ``${VAR:-default}`` expansion + ``TRACESCORER_*`` env.

One pydantic model validates everything at start; unknown keys and bad values fail with one
message naming the key (and the key meant, for a misspelt one). Environment overrides use
``TRACESCORER_<SECTION>__<KEY>`` (nested keys joined by ``__``), e.g.
``TRACESCORER_STORE__PATH=/data/ts.duckdb``; variables whose first part is not a section
(``TRACESCORER_AUTH_TOKEN``, ``TRACESCORER_JUDGE_MODEL``) are only used for expansion
(:mod:`tracescorer.config.envexpand`).

The modules: ``loading`` (file, expansion, overrides), ``settings`` (the ``Settings`` model, its
masked view), one module per group of sections (``receiver``, ``store``, ``spans``, ``scoring``,
``export``, ``monitors``, ``daemon``), ``base`` (the sections' base), ``errors`` (``ConfigError``
and its messages), ``envexpand``. They import no pipeline stage, so every stage can import them.
"""

from tracescorer.config.daemon import LogLevel, LogSettings, ReportSettings, ShutdownSettings
from tracescorer.config.errors import ConfigError
from tracescorer.config.export import (
    ExportSettings,
    MlflowSinkSettings,
    OtlpSinkSettings,
    PhoenixSinkSettings,
    SinkEntry,
)
from tracescorer.config.loading import ENV_PREFIX, load_settings
from tracescorer.config.monitors import MonitorSettings, NotifySettings, ScoreMetricsSettings
from tracescorer.config.receiver import (
    ApiSettings,
    GrpcListenerSettings,
    HttpListenerSettings,
    ListenerSettings,
    MetricsSettings,
    ReceiverSettings,
    TLSSettings,
)
from tracescorer.config.scoring import (
    BindingLimits,
    HealSettings,
    JudgeSettings,
    SamplingSettings,
    ScorerBinding,
    ScoringSettings,
)
from tracescorer.config.settings import SECRET_KEYS, Settings, mask_dsn
from tracescorer.config.spans import AssemblySettings, SegmentLogSettings, TriageSettings, WorkersSettings
from tracescorer.config.store import MIN_MEMORY_BYTES, PostgresSettings, StoreSettings, check_store_path

__all__ = [
    "ENV_PREFIX",
    "MIN_MEMORY_BYTES",
    "SECRET_KEYS",
    "ApiSettings",
    "AssemblySettings",
    "BindingLimits",
    "ConfigError",
    "ExportSettings",
    "GrpcListenerSettings",
    "HealSettings",
    "HttpListenerSettings",
    "JudgeSettings",
    "ListenerSettings",
    "LogLevel",
    "LogSettings",
    "MetricsSettings",
    "MlflowSinkSettings",
    "MonitorSettings",
    "NotifySettings",
    "OtlpSinkSettings",
    "PhoenixSinkSettings",
    "PostgresSettings",
    "ReceiverSettings",
    "ReportSettings",
    "SamplingSettings",
    "ScoreMetricsSettings",
    "ScorerBinding",
    "ScoringSettings",
    "SegmentLogSettings",
    "Settings",
    "ShutdownSettings",
    "SinkEntry",
    "StoreSettings",
    "TLSSettings",
    "TriageSettings",
    "WorkersSettings",
    "check_store_path",
    "load_settings",
    "mask_dsn",
]
