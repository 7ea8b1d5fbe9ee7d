"""Convention adapters: turn one trace's spans (+ GenAI log records) into agent runs.

The daemon calls :func:`extract_runs`; adapters plug in through :class:`ConventionAdapter`.
"""

from tracescorer.conventions.base import ConventionAdapter, TraceView, run_id_for
from tracescorer.conventions.registry import ADAPTERS, Extraction, extract_runs

__all__ = ["ADAPTERS", "ConventionAdapter", "Extraction", "TraceView", "extract_runs", "run_id_for"]
