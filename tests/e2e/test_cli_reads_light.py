"""The read commands through a running daemon stay light: they load the settings and talk to the
daemon, never DuckDB, the store's engine, prometheus_client or the report's page (each was paid by
every read: ``query`` took 0.46 s of CPU beyond a bare Python start, now about 0.22 s)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from support.daemon import REPO, DaemonProcess, config_dict

HEAVY = (
    "duckdb",
    "tracescorer.store.factory",
    "tracescorer.store.duckdb",
    "prometheus_client",
    "tracescorer.report.html",
)


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("light")
    d = DaemonProcess(tmp, config_dict(tmp)).start()
    yield d
    assert d.stop() == 0


def _loaded(daemon: DaemonProcess, *args: str) -> list[str]:
    """The heavy modules ``tracescorer ARGS --config ...`` loaded (it must succeed)."""
    probe = (
        "import json, sys\nfrom tracescorer.cli import main\n"
        f"try:\n    main({[*args, '--config', str(daemon.config_path)]!r})\nexcept SystemExit as exc:\n"
        "    assert not exc.code, exc.code\n"
        f"print(json.dumps(sorted(m for m in {list(HEAVY)!r} if m in sys.modules)), file=sys.stderr)"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert out.returncode == 0, out.stderr
    return list(json.loads(out.stderr.strip().splitlines()[-1]))


@pytest.mark.parametrize(
    "args", [("query", "SELECT count(*) AS n FROM scores"), ("runs",), ("scores",)], ids=lambda a: a[0]
)
def test_a_read_through_the_daemon_loads_no_store_engine(daemon: DaemonProcess, args: tuple[str, ...]) -> None:
    assert _loaded(daemon, *args) == []
