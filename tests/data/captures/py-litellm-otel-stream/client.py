# venv: litellm
"""The scenario of ../py-litellm-otel-callback/client.py (no application span) with every call
streamed (CAPTURE_LITELLM_STREAM=1: stream=True, chunks put together with stream_chunk_builder)."""
import os
import runpy
from pathlib import Path

os.environ["CAPTURE_LITELLM_STREAM"] = "1"
runpy.run_path(str(Path(__file__).resolve().parents[1] / "py-litellm-otel-callback" / "client.py"), run_name="__main__")
