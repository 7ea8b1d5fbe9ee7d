# venv: adk
"""The scenario of ../py-adk-legacy-agent-tool/client.py with ADK's default, semconv-aligned
telemetry schema (gen_ai.input.messages / gen_ai.output.messages on spans)."""
import os
import runpy
from pathlib import Path

os.environ["CAPTURE_ADK_SCHEMA"] = "2"
runpy.run_path(str(Path(__file__).resolve().parents[1] / "py-adk-legacy-agent-tool" / "client.py"),
               run_name="__main__")
