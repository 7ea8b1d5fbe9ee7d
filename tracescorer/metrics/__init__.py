"""Prometheus self-metrics, on a registry owned by the app (no global state).

Besides the ``tracescorer_*`` metrics: the daemon process's ``process_*`` (CPU, resident memory,
open files, start time; the store process is not included) and ``tracescorer_build_info``. No
``*_created`` series: each counter would expose a second, constant series beside it.

``registry`` holds :class:`Metrics` (the registry, ``/metrics`` exposition); the families are
declared in one module per stage that owns them: ``ingest`` (receivers, segment log, feed,
triage), ``store``, ``assembly``, ``scoring`` (and the judge), ``export``, ``scores`` (score
quality), ``calibration``, ``monitors``, ``config`` (reloads); ``families`` is their shared base. ``merge`` makes one
exposition of several processes: a worker's :meth:`Metrics.snapshot` is absorbed by the main
process's :class:`Metrics`, whose ``/metrics`` sums them (see :mod:`tracescorer.metrics.merge`).
"""

from prometheus_client.exposition import CONTENT_TYPE_LATEST

from tracescorer.metrics.merge import Snapshot
from tracescorer.metrics.registry import DEFAULT_SCORE_BUCKETS, Metrics

__all__ = ["CONTENT_TYPE_LATEST", "DEFAULT_SCORE_BUCKETS", "Metrics", "Snapshot"]
