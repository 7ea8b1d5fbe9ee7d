"""The report's trend axis: its five time ticks read apart however close together the scores are
(scores within a second or two had them all read the same time)."""

from __future__ import annotations

import datetime as dt
import re

import pytest

from tracescorer.report.data import axis
from tracescorer.report.points import TrendPoint
from tracescorer.report.svg import trend_chart

FIRST = dt.datetime(2026, 12, 8, 0, 30, 10, 200_000, tzinfo=dt.UTC)


def _ticks(data_s: float) -> list[str]:
    last = FIRST + dt.timedelta(seconds=data_s)
    bucket, start, end = axis(FIRST, last, FIRST - dt.timedelta(days=7), last)
    points = [TrendPoint(at=at, n=1, mean=0.5, pass_rate=None, errors=0) for at in (FIRST, last)]
    svg = trend_chart(points, start=start, end=end, bucket_s=bucket, lo=0, hi=1, threshold=None, title="t")
    return re.findall(r'<text class="axis" x="[^"]+" y="286" text-anchor="\w+">([^<]+)</text>', svg)


@pytest.mark.parametrize("data_s", [0.0, 0.3, 1.0, 2.5, 50.0, 59.0, 400.0, 3000.0, 2 * 86400.0, 30 * 86400.0])
def test_the_five_time_ticks_read_apart(data_s: float) -> None:
    ticks = _ticks(data_s)
    assert len(ticks) == 5 and len(set(ticks)) == 5, ticks


def test_scores_within_a_second_get_whole_second_ticks() -> None:
    assert _ticks(0.3) == ["00:30:10", "00:30:11", "00:30:12", "00:30:13", "00:30:14"]
