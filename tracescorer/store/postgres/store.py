"""The PostgreSQL result store: runs, conversations, scores, decisions, deliveries, budget, monitors.

:class:`PostgresResultStore` is an async psycopg 3 connection pool (:class:`~.pool.Pool`) with one
part per consumer protocol of :mod:`tracescorer.store.api`, each part beside the SQL it runs:
:class:`~.results.ResultsPart` (runs, scores, decisions, spend, retention), :class:`~.verdicts.VerdictsPart`
(judge verdicts kept for reuse), :class:`~.judge_batches.JudgeBatchesPart` (provider batches of judge requests),
:class:`~.deliveries.DeliveriesPart`, :class:`~.monitors.MonitorsPart`, :class:`~.labels.LabelsPart`
(human labels, other tools' evaluations),
:class:`~.claims.CoordinationPart` (the coordination of several daemons: conversation claims, the
shared judge token bucket), :class:`~.query.QueryPart` (users' SQL) and :class:`~.reads.ReadsPart`
(the product's own reads). Every method runs one transaction on a
pooled connection: nothing blocks the event loop. A transaction that hits a serialization failure,
a deadlock or a dropped connection is retried a few times before the error becomes a
:class:`~tracescorer.store.api.StoreError`.
"""

from __future__ import annotations

from tracescorer.store.postgres.claims import CoordinationPart
from tracescorer.store.postgres.deliveries import DeliveriesPart
from tracescorer.store.postgres.judge_batches import JudgeBatchesPart
from tracescorer.store.postgres.labels import LabelsPart
from tracescorer.store.postgres.monitors import MonitorsPart
from tracescorer.store.postgres.pool import Pool
from tracescorer.store.postgres.query import QueryPart
from tracescorer.store.postgres.reads import ReadsPart
from tracescorer.store.postgres.results import ResultsPart
from tracescorer.store.postgres.verdicts import VerdictsPart


class PostgresResultStore(
    ResultsPart,
    VerdictsPart,
    JudgeBatchesPart,
    DeliveriesPart,
    MonitorsPart,
    LabelsPart,
    CoordinationPart,
    QueryPart,
    ReadsPart,
    Pool,
):
    """Results in PostgreSQL (see the module docstring)."""
