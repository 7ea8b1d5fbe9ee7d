import os
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent

# tests/support is imported as a package by the contract and e2e tests, here and in the store
# processes the daemons under test start (tests/support/store_ops.py runs there)
sys.path.insert(0, str(TESTS))
# pytest-xdist workers export COLUMNS=80 LINES=24; the CLIs under test would take them for a
# terminal's size (their output here goes to a pipe: the tests expect the no-terminal width)
for _var in ("COLUMNS", "LINES"):
    os.environ.pop(_var, None)
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS), str(TESTS.parent), os.environ.get("PYTHONPATH")]))


import pytest  # noqa: E402

# the tiers (tests/unit, tests/contract, tests/e2e): markers by folder, the unit tier's guard, budgets
pytest_plugins = ["support.tiers"]


@pytest.fixture(scope="session")
def pg_server():
    """A real PostgreSQL server for the session (tests/support/postgres.py), started on first use."""
    from support.postgres import PostgresUnavailable, start_server

    try:
        server = start_server()
    except PostgresUnavailable as exc:
        if os.environ.get("CI"):
            pytest.fail(f"{exc} (make test installs it)")
        pytest.skip(str(exc))
    yield server
    server.stop()


@pytest.fixture
def pg_dsn(pg_server):
    """A new empty database on the session's server."""
    from support.postgres import create_database

    return create_database(pg_server)
