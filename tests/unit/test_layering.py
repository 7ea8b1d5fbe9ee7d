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


def test_config_imports_no_pipeline_stage() -> None:
    tree = ast.parse((PACKAGE / "config.py").read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    stages = (
        "tracescorer.scoring",
        "tracescorer.assembly",
        "tracescorer.receiver",
        "tracescorer.store",
        "tracescorer.export",
        "tracescorer.app",
    )
    assert not [m for m in imported if m.startswith(stages)]
