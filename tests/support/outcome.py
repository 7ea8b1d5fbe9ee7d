"""A code scorer whose score the test chooses: the number after ``score=`` in the run's answer
(``"score=0.25"``), 0 when there is none. Tests drive monitors with a series of these through the
real daemon (OTel SDK exporter -> daemon -> this scorer -> monitors -> webhook)."""

from __future__ import annotations

import re
from typing import Any

from tracescorer import create_scorer

_SCORE = re.compile(r"score=(-?\d+(?:\.\d+)?)")


def _score(*, run: Any, results: Any) -> float:
    found = _SCORE.search(" ".join(m.content or "" for m in run.output))
    return float(found.group(1)) if found else 0.0


scorer = create_scorer(id="outcome", description="the score the run's answer names").generate_score(_score)
