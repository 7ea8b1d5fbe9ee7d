# venv: mlflow
"""The scenario of ../py-mlflow-openai-agent/client.py with MLFLOW_ENABLE_OTEL_GENAI_SEMCONV=true
(MLflow translates its spans to GenAI semantic-convention attributes before export), OTLP/gRPC."""
import os
import runpy
from pathlib import Path

os.environ["CAPTURE_MLFLOW_SEMCONV"] = "1"
runpy.run_path(str(Path(__file__).resolve().parents[1] / "py-mlflow-openai-agent" / "client.py"), run_name="__main__")
