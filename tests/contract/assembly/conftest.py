from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from support.logged import Logged


@pytest.fixture
async def logged(tmp_path) -> AsyncIterator[Logged]:
    """A real segment log the test's assembly stages read back from."""
    async with Logged(tmp_path / "log") as it:
        yield it
