"""The families of scoring: decisions, queues, conversations and their claims, abandoned targets,
the healer, and the judge's calls, latency, tokens and reused verdicts."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from tracescorer.metrics.families import Families


class JudgeCallSeen(Protocol):
    """What the judge metrics read of a judge call (:class:`tracescorer.scorers.types.JudgeCall`)."""

    @property
    def model(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def duration_ms(self) -> float: ...
    @property
    def input_tokens(self) -> int | None: ...
    @property
    def output_tokens(self) -> int | None: ...
    @property
    def cached_tokens(self) -> int | None: ...
    @property
    def cache_write_tokens(self) -> int | None: ...
    @property
    def reused_from(self) -> str | None: ...


class ScoringFamilies(Families):
    """Scoring's and the judge's metrics."""

    score_rows_refused: Counter
    decisions: Counter
    scoring_queue: Gauge
    conversations_tracked: Gauge
    conversation_claims: Counter
    scoring_abandoned: Counter
    judge_heal: Counter
    judge_calls: Counter
    judge_seconds: Histogram
    judge_tokens: Counter
    judge_reused: Counter

    def _declare_scoring(self, r: CollectorRegistry) -> None:
        self.score_rows_refused = Counter(
            "tracescorer_scoring_rows_refused",
            "Score rows the store refused as data, stored as error rows instead (error_type StoreRefused)",
            registry=r,
        )
        self.decisions = Counter(
            "tracescorer_scoring_decisions",
            "Scoring decisions by scorer and kind (scored, sampled_out, filtered_out, not_scorable, "
            "rate_limited, budget_exhausted, failed, gated)",
            ["scorer", "decision"],
            registry=r,
        )
        self.scoring_queue = Gauge(
            "tracescorer_scoring_queue_depth", "Targets waiting for a scorer", ["pool"], registry=r
        )
        self.conversations_tracked = Gauge(
            "tracescorer_scoring_conversations_tracked", "Conversations waiting to go idle", registry=r
        )
        self.conversation_claims = Counter(
            "tracescorer_conversation_claims",
            "postgres mode: conversation claims by outcome (claimed, takeover = taken from an expired lease, "
            "finished, released = not scored (shutdown), lost = another daemon took it over meanwhile)",
            ["outcome"],
            registry=r,
        )
        self.scoring_abandoned = Counter(
            "tracescorer_scoring_abandoned",
            "Targets whose scoring was cancelled at shutdown (scored again after the next start)",
            ["pool"],
            registry=r,
        )
        self.judge_heal = Counter(
            "tracescorer_judge_heal",
            "Automatic re-scores of transient judge errors (scoring.heal): retried, healed (now ok or "
            "not_scorable), gave_up (the last allowed attempt failed too)",
            ["result"],
            registry=r,
        )
        self.judge_calls = Counter(
            "tracescorer_judge_calls", "Judge calls by model and status", ["model", "status"], registry=r
        )
        self.judge_seconds = Histogram(
            "tracescorer_judge_call_seconds",
            "Judge call latency (including retries)",
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
            registry=r,
        )
        self.judge_tokens = Counter(
            "tracescorer_judge_tokens",
            "Judge tokens by direction (cached_input and cache_write: parts of the input, by the provider's prompt cache)",
            ["direction"],
            registry=r,
        )
        self.judge_reused = Counter(
            "tracescorer_judge_reused",
            "Judge requests answered by an earlier verdict of the same request and scorer version (no call, no cost;"
            " judge.reuse_max_age_s), by model",
            ["model"],
            registry=r,
        )

    def observe_judge_calls(self, calls: Iterable[JudgeCallSeen]) -> None:
        """Count a scorer run's judge calls, their latency and tokens; the reused ones apart."""
        for call in calls:
            if call.reused_from is not None:
                self.judge_reused.labels(call.model).inc()
                continue
            self.judge_calls.labels(call.model, call.status).inc()
            self.judge_seconds.observe(call.duration_ms / 1000)
            if call.input_tokens:
                self.judge_tokens.labels("input").inc(call.input_tokens)
            if call.output_tokens:
                self.judge_tokens.labels("output").inc(call.output_tokens)
            if call.cached_tokens:  # of the input, read from the provider's prompt cache
                self.judge_tokens.labels("cached_input").inc(call.cached_tokens)
            if call.cache_write_tokens:
                self.judge_tokens.labels("cache_write").inc(call.cache_write_tokens)
