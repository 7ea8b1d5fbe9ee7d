"""Score metrics on ``/metrics``: told about committed score rows, keeps the label sets bounded.

- ``tracescorer_score_value`` (histogram) and ``tracescorer_score_results_total`` count live
  scores only: backfill re-scores history, and counting it now would read as a change in
  current quality. Its rows are in the ``scores`` table like any other.
- ``tracescorer_score_judge_cost_usd_total`` counts every score's judge spend (backfill costs
  money too).
- ``agent`` is the agent name for the first ``max_agents`` names seen (``_unnamed`` when a run
  has none); scores of any later agent are counted as ``_other``, so a stream of generated
  agent names cannot grow the series without bound. Scorer ids come from the configuration.
"""

from __future__ import annotations

from collections.abc import Sequence

from tracescorer.metrics import Metrics
from tracescorer.records.scores import ScoreRecord

OTHER_AGENT = "_other"
UNNAMED_AGENT = "_unnamed"


class ScoreMetrics:
    """A ScoreListener that updates the score metrics (on the event loop; never raises)."""

    def __init__(self, metrics: Metrics, *, max_agents: int) -> None:
        self._metrics = metrics
        self._max_agents = max_agents
        self._agents: set[str] = set()

    def agent_label(self, name: str | None) -> str:
        """``name`` while fewer than ``max_agents`` names were seen (or it is one of them)."""
        agent = name or UNNAMED_AGENT
        if agent in self._agents:
            return agent
        if len(self._agents) < self._max_agents:
            self._agents.add(agent)
            return agent
        return OTHER_AGENT

    def on_scores(self, scores: Sequence[ScoreRecord]) -> None:
        m = self._metrics
        for record in scores:
            if record.judge_cost_usd:
                m.score_judge_cost.labels(record.scorer_id).inc(record.judge_cost_usd)
            if record.source != "live":
                continue
            agent = self.agent_label(record.entity_id)
            m.child(m.score_results, record.scorer_id, agent, record.label or "none", record.status).inc()
            if record.status == "ok" and record.score is not None:
                m.child(m.score_value, record.scorer_id, agent).observe(record.score)
