"""``tracescorer report``: score history per scorer as one self-contained HTML page."""

from tracescorer.report.data import Report, ScorerReport, collect
from tracescorer.report.html import render

__all__ = ["Report", "ScorerReport", "collect", "render"]
