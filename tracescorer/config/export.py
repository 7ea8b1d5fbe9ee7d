"""``export``: the sinks scores are delivered to (OTLP, Phoenix, MLflow), batching and retries."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from tracescorer.config.base import Section


class OtlpSinkSettings(Section):
    """``export.sinks[].otlp`` / ``.otlp_logs``: unset values come from ``OTEL_EXPORTER_OTLP_*``."""

    name: str | None = Field(None, min_length=1, description="stable id (default: the kind, otlp#2 when repeated)")
    endpoint: str | None = None
    protocol: Literal["grpc", "http/protobuf"] | None = None
    headers: dict[str, str] = {}
    timeout_s: float | None = Field(None, gt=0)
    compression: Literal["gzip", "none"] | None = None
    log_records: bool = Field(
        False,
        description="otlp sinks: also send each score as a gen_ai.evaluation.result log record (the evaluated "
        "span's trace and span id) to the same endpoint, the form the GenAI conventions now prefer",
    )
    span_events: bool = Field(
        True, description="otlp sinks: the gen_ai.evaluation.result span event on each evaluation span"
    )


class PhoenixSinkSettings(Section):
    """``export.sinks[].phoenix``: Arize Phoenix span / session annotations."""

    name: str | None = Field(None, min_length=1)
    endpoint: str = Field(min_length=1, description="Phoenix base URL, e.g. http://phoenix:6006")
    api_key: str = ""
    headers: dict[str, str] = {}
    timeout_s: float | None = Field(None, gt=0)


class MlflowSinkSettings(Section):
    """``export.sinks[].mlflow``: MLflow 3 trace assessments (feedback)."""

    name: str | None = Field(None, min_length=1)
    tracking_uri: str = Field(min_length=1, description="MLflow tracking server URL, e.g. http://mlflow:5000")
    experiment_id: str | None = None
    token: str = ""
    headers: dict[str, str] = {}
    timeout_s: float | None = Field(None, gt=0)


class SinkEntry(Section):
    """One item of ``export.sinks``: a mapping with exactly one key, the sink kind."""

    otlp: OtlpSinkSettings | None = None
    otlp_logs: OtlpSinkSettings | None = None
    phoenix: PhoenixSinkSettings | None = None
    mlflow: MlflowSinkSettings | None = None

    @model_validator(mode="before")
    @classmethod
    def _null_means_defaults(cls, data: Any) -> Any:
        # `- otlp:` (no settings) means an otlp sink configured from the environment
        if isinstance(data, dict) and len(data) == 1:
            ((kind, value),) = data.items()
            if value is None and kind in ("otlp", "otlp_logs"):
                return {kind: {}}
        return data

    @model_validator(mode="after")
    def _exactly_one(self) -> SinkEntry:
        if len(self.kinds()) != 1:
            raise ValueError("each sink is a mapping with exactly one of: otlp, otlp_logs, phoenix, mlflow")
        if self.otlp_logs is not None and (self.otlp_logs.log_records or not self.otlp_logs.span_events):
            raise ValueError(
                "log_records and span_events are otlp sink keys (an otlp_logs sink sends log records only)"
            )
        return self

    def kinds(self) -> list[str]:
        return [k for k in ("otlp", "otlp_logs", "phoenix", "mlflow") if getattr(self, k) is not None]

    @property
    def kind(self) -> str:
        return self.kinds()[0]

    @property
    def settings(self) -> OtlpSinkSettings | PhoenixSinkSettings | MlflowSinkSettings:
        value = getattr(self, self.kind)
        assert value is not None
        return value  # type: ignore[no-any-return]


class ExportSettings(Section):
    enabled: bool = False
    sinks: list[SinkEntry] = []
    # without `sinks`: one otlp sink with these (the form before sinks existed)
    endpoint: str | None = None
    protocol: Literal["grpc", "http/protobuf"] | None = None
    headers: dict[str, str] = {}
    timeout_s: float = Field(10, gt=0)
    batch_size: int = Field(256, gt=0, description="most scores per export request")
    interval_s: float = Field(2.0, gt=0, description="export scores written since the last export this often")
    retry_initial_s: float = Field(1.0, gt=0, description="first wait after a failed export; doubles per failure")
    retry_max_s: float = Field(60.0, gt=0, description="longest wait between retries of a failing export")
    max_rejected_attempts: int = Field(
        5,
        gt=0,
        description="a score a backend rejects (4xx other than 408/425/429) is marked failed after this many tries",
    )

    @model_validator(mode="after")
    def _one_form(self) -> ExportSettings:
        if self.sinks and (self.endpoint is not None or self.protocol is not None or self.headers):
            raise ValueError(
                "export.endpoint/protocol/headers configure the single otlp sink used without "
                "export.sinks; with sinks, set them on the sink: sinks: [{otlp: {endpoint: ...}}]"
            )
        return self
