"""A code scorer whose analyze step returns an integer past 64 bits for runs that say HUGE: a step
result no store can hold."""

from __future__ import annotations

from typing import Any

from tracescorer import create_scorer


def _analyze(*, run: Any, results: Any) -> dict[str, int]:
    return {"tokens": 2**70 if "HUGE" in str(run.output) else 1}


scorer = (
    create_scorer(id="oversized", description="an analyze step with out-of-range integers")
    .analyze(_analyze)
    .generate_score(lambda *, run, results: 1.0)
)
