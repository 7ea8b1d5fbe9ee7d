"""A clock the test moves (:class:`tracescorer.clock.Clock`): time passes only by :meth:`advance`."""

from __future__ import annotations


class ManualClock:
    """Starts at ``start`` (wall seconds; its monotonic reading starts at 1,000) and moves only when told."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self._offset = 0.0
        self._start = start

    def time(self) -> float:
        return self._start + self._offset

    def monotonic(self) -> float:
        return 1_000.0 + self._offset

    def advance(self, seconds: float) -> None:
        assert seconds >= 0, "a clock does not go back"
        self._offset += seconds
