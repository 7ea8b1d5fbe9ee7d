"""``judge``, ``scoring`` (queue, workers, ``heal``) and the ``scorers:`` bindings (sampling,
filter, per-binding limits)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from tracescorer.config.base import Section
from tracescorer.filters import RunFilter


class BatchSettings(Section):
    """``judge.batch``: how judge requests of ``mode: batch`` are gathered into provider batches."""

    max_size: int = Field(1000, gt=0, le=50_000, description="judge requests per provider batch at most")
    collect_s: float = Field(
        60, ge=0, description="a batch is submitted this long after its first request came (or when full)"
    )
    poll_s: float = Field(30, gt=0, description="how often a submitted batch is asked for its results")
    max_wait_s: float = Field(
        3600,
        gt=0,
        description="a request whose batch has not answered this long after it was submitted is sent live"
        " (the batch is cancelled)",
    )
    max_pending: int = Field(
        2000, gt=0, description="judge runs waiting for batches at once (beside judge.max_concurrency)"
    )


class JudgeSettings(Section):
    model: str = ""
    api_base: str | None = None
    api_key: str | None = None
    max_concurrency: int = Field(16, gt=0)
    requests_per_minute: int = Field(600, gt=0)
    daily_budget_usd: float | None = Field(None, ge=0)
    timeout_s: float = Field(60, gt=0)
    retries: int = Field(
        2,
        ge=0,
        le=10,
        description="retries of a judge request the provider did not answer (timeouts, connection errors, "
        "408/409/429, 5xx; never 400/401/403/404), so a request makes at most retries + 1 attempts",
    )
    retry_initial_s: float = Field(
        1.0, gt=0, le=60, description="wait before the first retry, doubling per retry; a longer Retry-After wins"
    )
    fallbacks: list[str | dict[str, Any]] = Field(
        [],
        description="models asked in turn when a request failed for a transient reason once its retries were spent:"
        " a model string (same api_base/api_key) or {model:, api_base:, api_key:, ...}; scores name the model"
        " that answered",
    )
    mode: Literal["live", "batch"] = Field(
        "live",
        description="live: each judge request is sent at once; batch: gathered into provider batches (OpenAI"
        " Batch API), answered within judge.batch.max_wait_s at the batch price (a binding: mode:)",
    )
    batch: BatchSettings = Field(default_factory=BatchSettings)
    reuse_max_age_s: float = Field(
        86_400,
        ge=0,
        description="a judge verdict answers the same request (same scorer version, same text sent) for this long:"
        " no call, no cost, no rate or budget charge; 0 turns reuse off (a binding: reuse: false)",
    )


class HealSettings(Section):
    """``scoring.heal``: judge scores that failed for a transient error (connection refused,
    timeout, 429, 5xx) are re-scored automatically, with a doubling backoff, a bounded number of
    times and only while recent (:mod:`tracescorer.runner.heal`)."""

    enabled: bool = True
    max_attempts: int = Field(5, ge=0, description="automatic re-scores of one error score; 0 turns healing off")
    max_age_s: float = Field(86_400, gt=0, description="error scores first stored longer ago than this are left alone")
    initial_backoff_s: float = Field(30, gt=0, description="wait before the first re-score; doubles after each failure")
    max_backoff_s: float = Field(600, gt=0, description="cap of the doubling wait")
    check_s: float = Field(10, gt=0, description="how often the store is asked for error scores due a re-score")
    max_batch: int = Field(100, gt=0, description="error scores re-scored per check at most")


class ScoringSettings(Section):
    max_queue: int = Field(
        10_000,
        gt=0,
        description="targets waiting for a scorer: past half of it the segment log's feed waits; live runs"
        " already assembled still queue, backfills and recovery are rate_limited when full",
    )
    workers: int = Field(4, gt=0, description="concurrent code-scorer runs (judge runs: judge.max_concurrency)")
    recover_window_s: float = Field(3600, ge=0, description="at start, runs this recent without a decision are scored")
    shutdown_timeout_s: float = Field(30, ge=0)
    heal: HealSettings = Field(default_factory=HealSettings)


class SamplingSettings(Section):
    ratio: float = Field(1.0, ge=0, le=1)


class BindingLimits(Section):
    """``scorers[].limits``: caps of one binding beside the global ``judge:`` ones (a target over a
    cap gets a decision naming the cap: ``budget_exhausted`` or ``rate_limited``)."""

    daily_budget_usd: float | None = Field(
        None, ge=0, description="judge spend of this binding per UTC day; once reached its targets are refused"
    )
    requests_per_minute: int | None = Field(
        None,
        gt=0,
        description="judge requests of this binding per minute; a target that would exceed it is refused (not "
        "queued: a full bucket would hold the judge workers every binding shares)",
    )


class GateSettings(Section):
    """``scorers[].when``: the binding runs on a target only when another binding's score on the same
    target is below (or above) a value; otherwise its decision is ``gated``, saying why."""

    scorer: str = Field(description="the id of the binding whose score gates this one (same scope)")
    below: float | None = Field(None, description="run only when that score is below this value")
    above: float | None = Field(None, description="run only when that score is above this value")

    @model_validator(mode="after")
    def _one_bound(self) -> GateSettings:
        if (self.below is None) == (self.above is None):
            raise ValueError("exactly one of 'below' or 'above' is required")
        return self


class ScorerBinding(Section):
    id: str
    prebuilt: str | None = None
    python: str | None = None
    options: dict[str, Any] = {}
    scope: Literal["run", "conversation"] = "run"
    sampling: SamplingSettings = SamplingSettings()
    filter: RunFilter = RunFilter()
    threshold: float | None = None
    judge: dict[str, Any] = {}
    limits: BindingLimits = BindingLimits()
    #: reuse earlier verdicts of the same judge request (judge.reuse_max_age_s); false: always ask
    reuse: bool = True
    when: GateSettings | None = None
    #: live or batch (judge.mode when unset)
    mode: Literal["live", "batch"] | None = None
    enabled: bool = True

    @model_validator(mode="after")
    def _one_source(self) -> ScorerBinding:
        if (self.prebuilt is None) == (self.python is None):
            raise ValueError("exactly one of 'prebuilt' or 'python' is required")
        return self
