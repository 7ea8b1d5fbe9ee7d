"""Agreement figures as text (``tracescorer agreement``) and as plain data (``--format json``)."""

from __future__ import annotations

from typing import Any

from tracescorer.calibration.agreement import ALL_VERSIONS, Agreement
from tracescorer.calibration.stats import Interval


def _num(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _ci(interval: Interval | None) -> str:
    return "" if interval is None else f" [{interval.low:.3f}, {interval.high:.3f}]"


def _interval(interval: Interval | None) -> dict[str, float] | None:
    return None if interval is None else {"low": interval.low, "high": interval.high, "confidence": interval.confidence}


def to_json(a: Agreement) -> dict[str, Any]:
    """Every figure of one agreement row as JSON-ready data."""
    suggested = a.suggested
    return {
        "judge": a.judge,
        "reference": a.reference,
        "version": a.version,
        "pairs": a.pairs,
        "labelled": a.labelled,
        "accuracy": a.accuracy,
        "accuracy_ci": _interval(a.accuracy_ci),
        "kappa": a.kappa,
        "kappa_ci": _interval(a.kappa_ci),
        "confusion": {ref: dict(row) for ref, row in a.confusion.items()},
        "precision_fail": a.precision_fail,
        "precision_fail_ci": _interval(a.precision_fail_ci),
        "recall_fail": a.recall_fail,
        "recall_fail_ci": _interval(a.recall_fail_ci),
        "numeric": a.numeric,
        "mae": a.mae,
        "mae_ci": _interval(a.mae_ci),
        "spearman": a.spearman,
        "spearman_ci": _interval(a.spearman_ci),
        "threshold": a.threshold,
        "suggested_threshold": None
        if suggested is None
        else {
            "value": suggested.value,
            "kappa": suggested.kappa,
            "accuracy": suggested.accuracy,
            "ci": _interval(suggested.interval),
        },
    }


def _confusion(a: Agreement) -> list[str]:
    cats = list(a.categories)
    width = max([6, *(len(c) for c in cats)]) + 2
    lines = ["  confusion (rows: reference, columns: judge)", " " * (width + 2) + "".join(c.rjust(width) for c in cats)]
    for ref in cats:
        row = a.confusion.get(ref, {})
        lines.append("  " + ref.rjust(width) + "".join(str(row.get(c, 0)).rjust(width) for c in cats))
    return lines


def to_text(a: Agreement) -> str:
    """One agreement row for a terminal."""
    version = "all versions" if a.version == ALL_VERSIONS else f"version {a.version}"
    lines = [f"{a.judge}  {version}  vs {a.reference}: {a.pairs} target(s) with both"]
    if not a.pairs:
        lines.append("  nothing to compare: no target has a verdict from both")
    if a.labelled:
        lines.append(
            f"  labels ({a.labelled}): accuracy {_num(a.accuracy)}{_ci(a.accuracy_ci)}  "
            f"kappa {_num(a.kappa)}{_ci(a.kappa_ci)}"
        )
        if a.precision_fail is not None or a.recall_fail is not None:
            lines.append(
                f"  fail: precision {_num(a.precision_fail)}{_ci(a.precision_fail_ci)}  "
                f"recall {_num(a.recall_fail)}{_ci(a.recall_fail_ci)}"
            )
        lines += _confusion(a)
    if a.numeric:
        lines.append(
            f"  numbers ({a.numeric}): MAE {_num(a.mae)}{_ci(a.mae_ci)}  Spearman {_num(a.spearman)}{_ci(a.spearman_ci)}"
        )
    if a.suggested is not None:
        now = "none" if a.threshold is None else f"{a.threshold:g}"
        s = a.suggested
        lines.append(
            f"  threshold: now {now}, suggested {s.value:g}{_ci(s.interval)} "
            f"(kappa {_num(s.kappa)}, accuracy {_num(s.accuracy)} at it)"
        )
    return "\n".join(lines)
