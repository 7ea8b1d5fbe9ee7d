# venv: litellm
"""The scenario of ../py-litellm-otel-app-span/client.py with LiteLLM's semantic-convention mode
(OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental: no raw_gen_ai_request span; with the
app span active LiteLLM still writes onto it — the turn's last call's keys)."""
import os
import runpy
from pathlib import Path

os.environ["CAPTURE_LITELLM_APP_SPAN"] = "1"
os.environ["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_latest_experimental"
runpy.run_path(str(Path(__file__).resolve().parents[1] / "py-litellm-otel-callback" / "client.py"), run_name="__main__")
