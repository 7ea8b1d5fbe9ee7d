"""The CLI's start-up stays light: ``tracescorer --help`` loads click and the command modules, not
pydantic, DuckDB, the scorer library or the monitors' HTTP client (each import would be paid by
every command, ~0.3 s of CPU when they crept back in)."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = (
    "pydantic",
    "duckdb",
    "aiohttp",
    "litellm",
    "prometheus_client",
    "tracescorer.config",
    "tracescorer.scorers",
    "tracescorer.monitors.service",
)


def _loaded(code: str) -> list[str]:
    probe = f"import sys, json\n{code}\nprint(json.dumps(sorted(m for m in {list(HEAVY)!r} if m in sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    return list(json.loads(out.stdout.strip().splitlines()[-1]))


def test_help_loads_none_of_the_heavy_modules():
    assert _loaded("from tracescorer.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass") == []
    assert (
        _loaded(
            "from tracescorer.cli import main\ntry:\n    main(['monitors', '--help'])\nexcept SystemExit:\n    pass"
        )
        == []
    )


def test_the_settings_do_not_load_the_monitor_service_or_the_scorer_library():
    loaded = _loaded("import tracescorer.config")
    assert "tracescorer.monitors.service" not in loaded and "aiohttp" not in loaded
    assert "tracescorer.scorers" not in loaded


def test_the_public_api_still_imports_from_the_package():
    import tracescorer
    from tracescorer import create_scorer, run_evals
    from tracescorer.scorers import create_scorer as direct

    assert create_scorer is direct and callable(run_evals)
    assert all(hasattr(tracescorer, name) for name in tracescorer.__all__)


def test_format_names_are_the_output_formats():
    from tracescorer.commands.common import FORMAT_NAMES
    from tracescorer.output import FORMATS

    assert sorted(FORMATS) == FORMAT_NAMES
