"""The report's data points, shared by the data it collects and the charts that draw it."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class TrendPoint:
    at: dt.datetime  # start of the bucket
    n: int
    mean: float | None
    pass_rate: float | None
    errors: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Bin:
    lo: float
    hi: float
    n: int
