"""A provider batch of judge requests as the store keeps it (:mod:`tracescorer.runner.batches`)."""

from __future__ import annotations

from dataclasses import dataclass

#: ``intent``: recorded before the provider was asked (it may or may not hold the batch, found by
#: its metadata); ``submitted``: the provider holds it as ``provider_batch_id``; ``closed``: its
#: results were taken (or it was given up and its requests sent live).
BATCH_STATUSES = ("intent", "submitted", "closed")


@dataclass(frozen=True, kw_only=True, slots=True)
class JudgeBatchRecord:
    """One provider batch: ``id`` is ours (sent as the batch's metadata), ``request_keys`` the
    :func:`~tracescorer.scorers.reuse.request_key` of each request in it (its custom id), and
    ``created_at`` epoch seconds of the daemon's clock."""

    id: str
    model: str
    status: str
    request_keys: tuple[str, ...]
    created_at: float
    provider_batch_id: str | None = None
