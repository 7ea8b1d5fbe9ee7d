# venv: litellm
"""The scenario of ../py-litellm-otel-callback/client.py with an application span "support_agent"
around each turn (CAPTURE_LITELLM_APP_SPAN=1): LiteLLM writes its gen_ai.* attributes onto that
span (the turn's last call wins, earlier calls' keys stay) and each call is a raw_gen_ai_request
child span."""
import os
import runpy
from pathlib import Path

os.environ["CAPTURE_LITELLM_APP_SPAN"] = "1"
runpy.run_path(str(Path(__file__).resolve().parents[1] / "py-litellm-otel-callback" / "client.py"), run_name="__main__")
