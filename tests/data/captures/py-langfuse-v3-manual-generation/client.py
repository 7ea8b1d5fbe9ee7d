# venv: langfuse3
"""The scenario of ../py-langfuse-v5-observe-agent/client.py with the Langfuse v3 SDK: the model
call is an @observe(as_type="generation") function around the plain OpenAI client (its input
the decorated call's {"args", "kwargs"}, its output the returned ChatCompletionMessage), and the
session set with update_current_trace inside the agent (CAPTURE_LANGFUSE_MANUAL=1)."""
import os
import runpy
from pathlib import Path

os.environ["CAPTURE_LANGFUSE_MANUAL"] = "1"
runpy.run_path(str(Path(__file__).resolve().parents[1] / "py-langfuse-v5-observe-agent" / "client.py"),
               run_name="__main__")
