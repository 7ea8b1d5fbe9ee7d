# venv: mlflow
"""The scenario of ../py-mlflow-openai-agents-sdk/client.py without agents.trace() around the
turns (CAPTURE_MLFLOW_NO_TRACE=1): MLflow's AgentRunner.run span is each trace's root."""
import os
import runpy
from pathlib import Path

os.environ["CAPTURE_MLFLOW_NO_TRACE"] = "1"
runpy.run_path(str(Path(__file__).resolve().parents[1] / "py-mlflow-openai-agents-sdk" / "client.py"),
               run_name="__main__")
