"""The families of score quality, fed by :mod:`tracescorer.monitors.score_metrics`: values,
results and judge spend of live scores, by scorer (and agent)."""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client import CollectorRegistry, Counter, Histogram

from tracescorer.metrics.families import Families


class ScoreFamilies(Families):
    """Score quality: what the stored live scores say."""

    score_value: Histogram
    score_results: Counter
    score_judge_cost: Counter

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
