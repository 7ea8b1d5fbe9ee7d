"""Which worker process a trace belongs to: a share of the trace ids, decided on their bytes.

With ``workers.count`` worker processes each tails the whole segment log and takes only the items
of its own traces (:class:`Partition`), so every item of a trace — its spans, its log records,
other tools' evaluations of it — is decoded, assembled and scored by one worker. Trace ids are
random (W3C), so their last four bytes spread traces evenly; an item without a trace id goes to
the first worker. A conversation's turns come in different traces, so they land on different
workers; each conversation has one owner among them too (:meth:`Partition.owns_conversation`),
which tracks when it goes idle and scores it.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Partition:
    """Worker ``index`` of ``count``."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if not 0 <= self.index < self.count:
            raise ValueError(f"partition {self.index} of {self.count}")

    def owns(self, trace_id: bytes) -> bool:
        """Whether the trace with this (raw, 16-byte) id is this worker's."""
        return of(trace_id, self.count) == self.index

    def owns_hex(self, trace_id: str) -> bool:
        """:meth:`owns` for a trace id in hex, as stored."""
        return of(bytes.fromhex(trace_id) if trace_id else b"", self.count) == self.index

    def owns_conversation(self, conversation_id: str) -> bool:
        """Whether this worker owns the conversation (its idleness, its scoring)."""
        return conversation_owner(conversation_id, self.count) == self.index


def of(trace_id: bytes, count: int) -> int:
    """The partition of ``trace_id`` among ``count``."""
    return int.from_bytes(trace_id[-4:], "big") % count if trace_id else 0


def conversation_owner(conversation_id: str, count: int) -> int:
    """The worker among ``count`` that owns a conversation (a stable hash of its id)."""
    return zlib.crc32(conversation_id.encode()) % count
