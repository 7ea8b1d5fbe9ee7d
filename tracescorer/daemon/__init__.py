"""The daemon's own parts beside the pipeline stages, which :mod:`tracescorer.app` wires.

``readiness`` (what ``/readyz``, ``tracescorer_ready`` and the gRPC health check say, and the
receivers' feed backlog check), ``listeners`` (the OTLP receivers and the ops API listener, built
from the settings), ``serve_info`` (what the state file says about this daemon), ``signals`` (the
signals that stop ``serve``), ``announce`` (the lines logged once the daemon serves).
"""
