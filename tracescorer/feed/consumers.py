"""The log's consumers: which feed took which traces up to where, across changes of the worker count.

Each feed is a consumer of the segment log with its own saved offset and the largest log offset of
the rows it stored (committed with them): ``""`` for the feed of a single worker (every trace;
``workers.count`` 0 or 1), ``"w<index>/<count>"`` for worker ``index`` of ``count``
(:mod:`tracescorer.feed.partition`). The feeds that write span rows (``store.spans``, a derived
copy) are a family of their own, named the same behind ``rows:``. When the worker count changes
between starts, a new consumer starts where the oldest consumer of its family was and takes an
item only when no earlier consumer of its family responsible for its trace stored it already
(:class:`Earlier`): an earlier consumer stored, in log order, every item of its share up to its
largest stored offset. Nothing is stored twice and nothing is skipped.
"""

from __future__ import annotations

from collections.abc import Mapping

from tracescorer.feed.partition import Partition, of
from tracescorer.feed.triage import Owns

ROWS = "rows:"  # the family of the feeds writing span rows


def name(partition: Partition | None, *, rows: bool = False) -> str:
    """The consumer name of a feed taking ``partition`` (None: every trace); ``rows``: of the
    feeds writing span rows."""
    share = "" if partition is None or partition.count == 1 else f"w{partition.index}/{partition.count}"
    return (ROWS if rows else "") + share


def parse(consumer: str) -> Partition | None:
    """The share of the traces a consumer took; None for a name this version does not know."""
    consumer = consumer.removeprefix(ROWS)
    if consumer == "":
        return Partition(0, 1)
    try:
        index, count = consumer[1:].split("/")
        return Partition(int(index), int(count)) if consumer[0] == "w" else None
    except ValueError:
        return None


class Earlier:
    """What the other consumers of the log stored (see the module docstring)."""

    def __init__(self, me: str, saved: Mapping[str, tuple[int, int | None]]) -> None:
        family = me.startswith(ROWS)
        saved = {c: v for c, v in saved.items() if c.startswith(ROWS) == family}
        self._stored: list[tuple[int, int, int]] = []  # (count, index, largest offset stored)
        for consumer, (_, through) in saved.items():
            share = parse(consumer)
            if consumer != me and share is not None and through is not None:
                self._stored.append((share.count, share.index, through))
        self.through = max((t for _, _, t in self._stored), default=-1)
        offsets = [offset for consumer, (offset, _) in saved.items() if consumer != me]
        #: where a consumer new to the log starts: the oldest place another one may not have passed
        self.start = min(offsets, default=0)

    def owner(self, partition: Partition | None, offset: int) -> Owns | None:
        """Which traces a feed taking ``partition`` takes from the record at ``offset``."""
        base = partition.owns if partition is not None and partition.count > 1 else None
        if offset > self.through:
            return base
        stored = [(count, index) for count, index, through in self._stored if through >= offset]
        if not stored:
            return base

        def owns(trace_id: bytes) -> bool:
            if base is not None and not base(trace_id):
                return False
            return not any(of(trace_id, count) == index for count, index in stored)

        return owns
