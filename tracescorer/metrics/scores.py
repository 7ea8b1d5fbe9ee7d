"""The families of score quality, fed by :mod:`tracescorer.monitors.score_metrics`: values,
results and judge spend of live scores, by scorer (and agent); and the time to score, observed by
the score writer (:mod:`tracescorer.runner.writer`) in the process that commits the rows."""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client import CollectorRegistry, Counter, Histogram

from tracescorer.metrics.families import Families

TIME_TO_SCORE_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 900, 1200, 1800, 3600)


class ScoreFamilies(Families):
    """Score quality: what the stored live scores say."""

    score_value: Histogram
    score_results: Counter
    score_judge_cost: Counter
    time_to_score: Histogram

    def _declare_scores(self, r: CollectorRegistry, score_buckets: Sequence[float]) -> None:
        # Score quality (tracescorer.monitors.score_metrics): live scores only, after commit;
        # `agent` is capped at score_metrics.max_agents names (then "_other").
        self.score_value = Histogram(
            "tracescorer_score_value",
            "Values of live ok scores, by scorer and agent",
            ["scorer", "agent"],
            buckets=tuple(score_buckets),
            registry=r,
        )
        # the one count of scores (live: backfills re-score history; tracescorer_scoring_decisions
        # counts them); tracescorer_score_judge_cost_usd the one count of judge spend
        self.score_results = Counter(
            "tracescorer_score_results",
            "Live scores stored, by scorer, agent, label (pass, fail, none) and status (ok, error, not_scorable)",
            ["scorer", "agent", "label", "status"],
            registry=r,
        )
        self.score_judge_cost = Counter(
            "tracescorer_score_judge_cost_usd",
            "Judge spend in USD by scorer (live and backfill)",
            ["scorer"],
            registry=r,
        )
        # a run is scored idle_s after its end at the earliest, a conversation conversation_idle_s
        # (15 min by default) after its last turn; a backlog or a restart's recovery adds to both
        self.time_to_score = Histogram(
            "tracescorer_time_to_score_seconds",
            "Seconds from a target's end (a run's end, a conversation's last turn) to its live score "
            "row stored, by scorer",
            ["scorer"],
            buckets=TIME_TO_SCORE_BUCKETS,
            registry=r,
        )
