from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tracescorer.config import Settings
from tracescorer.lifecycle import Stages
from tracescorer.metrics import Metrics
from tracescorer.store.factory import Stores, build_stores


@pytest.fixture(params=["duckdb", "postgres"])
async def any_store(request: pytest.FixtureRequest, tmp_path: Any) -> AsyncIterator[Stores]:
    """The store parts of either mode, built and started as the daemon builds them (a span log in
    DuckDB, the results in the same file or in PostgreSQL): the same domain contract. A test
    module sets ``STORE`` (a dict) for more ``store:`` settings."""
    store: dict[str, object] = {"path": str(tmp_path / "a.duckdb"), **getattr(request.module, "STORE", {})}
    if request.param == "postgres":
        store |= {"backend": "postgres", "postgres": {"dsn": request.getfixturevalue("pg_dsn")}}
    stores = build_stores(Settings.model_validate({"store": store}), Metrics(), owner="test-owner", maintenance=False)
    stages = Stages(lambda: time.monotonic() + 30)
    for component in stores.components:
        await stages.enter(component)
    yield stores
    await stages.aclose()
