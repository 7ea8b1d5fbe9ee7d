# venv: langgraph
"""The scenario of ../py-langgraph-openinference-react/client.py traced by Traceloop's
opentelemetry-instrumentation-langchain (no traceloop-sdk) instead of OpenInference."""
import os
import runpy
from pathlib import Path

os.environ["CAPTURE_LANGGRAPH_TRACELOOP"] = "1"
os.environ.setdefault("TRACELOOP_TRACE_CONTENT", "true")
runpy.run_path(str(Path(__file__).resolve().parents[1] / "py-langgraph-openinference-react" / "client.py"),
               run_name="__main__")
