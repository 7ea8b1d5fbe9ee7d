"""``tracescorer replay --header KEY=VALUE`` (repeatable) sends the headers with every request."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes.otlp_capture import OtlpCapture

REPO = Path(__file__).resolve().parents[2]
CAPTURE = REPO / "tests" / "data" / "captures" / "py-openai-v2-latest-span-tools"


@pytest.fixture
def capture() -> Iterator[OtlpCapture]:
    with OtlpCapture() as server:
        yield server


def replay(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tracescorer", "replay", *args], capture_output=True, text=True, timeout=60, cwd=REPO
    )


@pytest.mark.parametrize("transport", ["http", "grpc"])
def test_replay_sends_the_given_headers(transport: str, capture: OtlpCapture) -> None:
    endpoint = capture.http_base_url if transport == "http" else f"grpc://{capture.grpc_target}"
    files = sorted((CAPTURE / "requests").glob("*.pb"))
    assert files
    done = replay(
        *map(str, files),
        "--endpoint",
        endpoint,
        "--header",
        "x-mlflow-experiment-id=1",
        "--header",
        "X-Tenant = acme=prod",
        "--token",
        "tok",
    )
    assert done.returncode == 0, done.stderr
    exports = capture.wait_for_exports(len(files))
    assert len(exports) == len(files) and {e.transport for e in exports} == {transport}
    for export in exports:
        assert export.headers["x-mlflow-experiment-id"] == "1"
        assert export.headers["x-tenant"] == "acme=prod"
        assert export.headers["authorization"] == "Bearer tok"


def test_replay_refuses_a_header_without_a_value(capture: OtlpCapture) -> None:
    done = replay(str(CAPTURE), "--endpoint", capture.http_base_url, "--header", "x-mlflow-experiment-id")
    assert done.returncode == 2
    assert "'x-mlflow-experiment-id': expected KEY=VALUE" in done.stderr
    assert capture.exports == []
