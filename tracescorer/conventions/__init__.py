"""Convention adapters: turn one trace's spans (+ GenAI log records) into agent runs.

The daemon calls :func:`extract_runs`. Each convention module exports one
:class:`Convention` record; :data:`CONVENTIONS` lists them and :func:`names` gives the
convention labels runs carry.
"""

from tracescorer.conventions.base import Convention, TraceFacts, TraceView, run_id_for
from tracescorer.conventions.registry import CONVENTIONS, Extraction, extract_runs, names

__all__ = ["CONVENTIONS", "Convention", "Extraction", "TraceFacts", "TraceView", "extract_runs", "names", "run_id_for"]
