"""Human labels and other tools' evaluations, each row declared once (the tables derive from these).

A :class:`LabelRecord` is one person's verdict on one target (a run or a conversation) for one
scorer: ``pass``/``fail``, a number, or a free label, with who, when, a note and where it came
from. Its id is derived from target, scorer and author, so a newer label from the same person
replaces the older one (an older one never replaces a newer one).

An :class:`EvaluationRecord` is a ``gen_ai.evaluation.result`` event another tool sent over OTLP
(a log record with that event name, or a span event), kept with the ids it names: the evaluated
span's trace and span id, and ``gen_ai.conversation.id``. Which run it is about is decided when it
is read (the run may be assembled after the evaluation arrived): the run whose agent span is the
evaluated span, else the trace's outermost run.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from tracescorer.records.scores import JSON

PASS, FAIL = "pass", "fail"
#: ``LabelRecord.source`` of labels stored with ``tracescorer label``, the ops API, an import
CLI_SOURCE, API_SOURCE, IMPORT_SOURCE = "cli", "api", "import"


def _sql(kind: str) -> dict[str, str]:
    return {"sql": kind}


def label_id(target_type: str, target_id: str, scorer_id: str, author: str) -> str:
    """One id per (target, scorer, person): the same person labelling again replaces the label."""
    text = "\x1f".join(("label", target_type, target_id, scorer_id, author))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


@dataclass(frozen=True, slots=True, kw_only=True)
class LabelRecord:
    """One row of ``labels`` (``created_at``/``updated_at`` are set by the store).

    ``label`` holds ``pass``/``fail`` or a free label, ``score`` a number: a label has one of the
    two. ``labelled_at`` is when the person gave it (epoch seconds).
    """

    id: str
    target_type: str  # run | conversation
    target_id: str  # run id or conversation id
    scorer_id: str
    author: str
    label: str | None
    score: float | None
    note: str | None
    source: str  # cli | api | import (and the file name)
    labelled_at: float = field(metadata=_sql("TIMESTAMPTZ"))
    trace_id: str | None = None  # the run's trace, when the target is a run
    conversation_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class EvaluationRecord:
    """One row of ``evaluations``: an external ``gen_ai.evaluation.result`` (``received_at`` is set
    by the store). The id is derived from the emitter, the evaluation name and the evaluated ids:
    an evaluation sent again replaces the earlier one."""

    id: str
    name: str  # gen_ai.evaluation.name
    source: str  # the emitter's service.name ("" when it has none)
    kind: str  # log_record | span_event
    target_type: str  # run | conversation
    trace_id: str | None
    span_id: str | None
    conversation_id: str | None
    response_id: str | None  # gen_ai.response.id: the evaluated completion, when the span is not known
    score: float | None
    label: str | None
    explanation: str | None
    error_type: str | None
    evaluator_version: str | None  # tracescorer.evaluator.version or gen_ai.evaluation.evaluator.version, if sent
    evaluated_at: float | None = field(default=None, metadata=_sql("TIMESTAMPTZ"))  # the event's time (epoch s)
    attributes: dict[str, Any] | None = field(default=None, metadata=JSON)  # every attribute, as sent


def evaluation_id(source: str, name: str, trace_id: str | None, span_id: str | None, other: str | None) -> str:
    """Stable id of an external evaluation (``other``: the conversation or response id it names)."""
    text = "\x1f".join(("evaluation", source, name, trace_id or "", span_id or "", other or ""))
    return hashlib.sha256(text.encode()).hexdigest()[:32]
