"""Layering rules the code review asked for, checked on the source: SQL lives under
tracescorer/store/ only, and configuration does not import the pipeline stages."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "tracescorer"
_SQL = re.compile(
    r"\b(SELECT\s.+\sFROM|INSERT\s+(OR\s+\w+\s+)?INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|"
    r"CREATE\s+(TEMP\s+)?(TABLE|INDEX|VIEW)|ALTER\s+TABLE|DROP\s+TABLE)\b",
    re.S,
)


def _strings(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), str(path))
    return [(n.lineno, n.value) for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def test_no_sql_outside_the_store() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if PACKAGE / "store" in path.parents:
            continue
        for line, text in _strings(path):
            if _SQL.search(text):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {text[:80]!r}")
    assert not found, "SQL outside tracescorer/store/:\n" + "\n".join(found)


def test_the_check_itself_finds_sql() -> None:
    assert _SQL.search("SELECT id FROM scores WHERE x") and _SQL.search("INSERT OR REPLACE INTO t VALUES (1)")
    assert not _SQL.search("select a scorer from the list") and not _SQL.search("Delete the file")


# what the settings must not import: the pipeline stages, what wires them and the rows they hand each
# other (``records`` imports the settings). Every stage imports ``tracescorer.config``, so one such
# import is a cycle, and loads a stage into every command that reads the configuration.
_NOT_BELOW_CONFIG = (
    "tracescorer.receiver",
    "tracescorer.seglog",
    "tracescorer.feed",
    "tracescorer.assembly",
    "tracescorer.conventions",
    "tracescorer.sampling",
    "tracescorer.scoring",
    "tracescorer.scorers",
    "tracescorer.export",
    "tracescorer.monitors",
    "tracescorer.calibration",
    "tracescorer.store",
    "tracescorer.records",
    "tracescorer.report",
    "tracescorer.commands",
    "tracescorer.cli",
    "tracescorer.app",
)


def _imported(path: Path) -> set[str]:
    """Every module ``path`` imports, at any depth; ``from a import b`` counts as ``a`` and ``a.b``."""
    imported: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module)
            imported |= {f"{node.module}.{alias.name}" for alias in node.names}
    return imported


def _stage_imports(package: Path) -> list[str]:
    """``module.py: stage`` for each stage a module of ``package`` imports."""
    return [
        f"{path.name}: {stage}"
        for path in sorted(package.rglob("*.py"))
        for stage in _NOT_BELOW_CONFIG
        if any(module == stage or module.startswith(f"{stage}.") for module in _imported(path))
    ]


def test_config_imports_no_pipeline_stage() -> None:
    modules = sorted(p.name for p in (PACKAGE / "config").rglob("*.py"))
    assert {"__init__.py", "settings.py", "loading.py", "monitors.py"} <= set(modules), modules
    assert not _stage_imports(PACKAGE / "config")


def test_the_check_itself_finds_a_stage_import(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("from tracescorer.monitors.service import MonitorService\n")
    (tmp_path / "b.py").write_text("def f():\n    from tracescorer import store\n")
    (tmp_path / "c.py").write_text("from tracescorer.config.store import StoreSettings\nimport tracescorer.sizes\n")
    assert _stage_imports(tmp_path) == ["a.py: tracescorer.monitors", "b.py: tracescorer.store"]
