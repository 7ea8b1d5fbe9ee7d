"""One read-only statement (:class:`Query`) and the pieces the read commands' SQL is built from:
clauses joined by AND with their parameters, time parameters, placeholders, shell-style patterns,
the time a score's target happened. Used by :mod:`tracescorer.store.queries`,
:mod:`tracescorer.store.report_queries` and :mod:`tracescorer.store.label_queries`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Query:
    """One read-only statement and its ``?`` parameters (JSON scalars); ``limit``: the rows the
    store's own reads return at most (a statement given one ends with its ORDER BY: the reads
    append ``LIMIT``, and say ``truncated`` when more rows matched; None: every row)."""

    sql: str
    params: tuple[Any, ...] = ()
    limit: int | None = None


#: A time parameter: times travel as ISO 8601 text, cast in SQL, so a query crosses the daemon's
#: JSON query endpoint unchanged.
TIME = "CAST(? AS TIMESTAMPTZ)"

#: When what a score is about happened: the run's end, a conversation's last turn (rows written
#: before the column existed: when the score was written). The report's history is keyed on it,
#: so re-scoring a target (a backfill) leaves its place in time unchanged.
SCORED_AT = "coalesce(target_ended_at, updated_at)"


class Where:
    """Clauses joined by AND, with their parameters in order."""

    def __init__(self, *clauses: str) -> None:
        self.clauses = list(clauses)
        self.params: list[Any] = []

    def add(self, clause: str, *params: Any) -> None:
        self.clauses.append(clause)
        self.params += params

    def sql(self) -> str:
        return f" WHERE {' AND '.join(self.clauses)}" if self.clauses else ""


def placeholders(n: int) -> str:
    """``n`` comma-separated ``?``."""
    return ", ".join(["?"] * n)


def glob_clause(column: str, pattern: str) -> tuple[str, str]:
    """``column`` matching a shell-style pattern (``*`` any text, ``?`` one character), or equal
    to it when it has neither: the clause and its parameter."""
    if "*" not in pattern and "?" not in pattern:
        return f"{column} = ?", pattern
    escaped = pattern.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"{column} LIKE ? ESCAPE '\\'", escaped.replace("*", "%").replace("?", "_")


def about_clause(kind: str, target_id: str, *, type_column: str, conversation_column: str) -> tuple[str, list[str]]:
    """Rows (scores, or evaluations in their shape) about a stored id: a trace's or run's own rows
    and those of its conversations; a conversation's and its runs'; one row by ``id``.
    ``type_column`` says whether a row is about a conversation, ``conversation_column`` which
    conversation a row belongs to. The clause and its parameters."""
    if kind in ("trace", "run"):
        key = f"{kind}_id"
        target_id = target_id.lower()
        in_conversations = f"({type_column} = 'conversation' AND conversation_id IN (SELECT conversation_id FROM runs WHERE {key} = ?))"
        return f"(({type_column} <> 'conversation' AND {key} = ?) OR {in_conversations})", [target_id, target_id]
    if kind == "conversation":
        return f"{conversation_column} = ?", [target_id]
    if kind == "score":
        return "id = ?", [target_id]
    raise ValueError(f"no rows are about a {kind!r}")
