# venv: strands
"""The scenario of ../py-strands-events-agent-as-tool/client.py with Strands' latest GenAI
conventions (OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental): messages as
gen_ai.input.messages / gen_ai.output.messages, agent-as-tool nested run."""
import os
import runpy
from pathlib import Path

os.environ["CAPTURE_STRANDS_LATEST"] = "1"
runpy.run_path(str(Path(__file__).resolve().parents[1] / "py-strands-events-agent-as-tool" / "client.py"),
               run_name="__main__")
