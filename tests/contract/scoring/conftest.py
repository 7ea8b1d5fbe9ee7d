"""Fixtures for the scoring tests: one fake OpenAI server per session, reset per test."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:  # make `tests.fakes` importable however pytest is started
    sys.path.insert(0, str(ROOT))

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from tests.fakes import FakeOpenAI  # noqa: E402


@pytest.fixture(scope="session")
def _fake_server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def fake(_fake_server: FakeOpenAI) -> Iterator[FakeOpenAI]:
    """The fake OpenAI server, with no rules and no recorded requests."""
    _fake_server.reset()
    yield _fake_server
    _fake_server.reset()


@pytest.fixture
def judge_opts(fake: FakeOpenAI) -> dict[str, Any]:
    """Judge keyword options pointing at the fake server."""
    return {"api_base": fake.base_url, "api_key": "sk-test", "timeout": 10}
