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
    "tracescorer.runner",
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


# --- the import graph ------------------------------------------------------------------------------
# Floors from the bottom: a module imports only from its own unit (top-level module or folder) or from
# units on lower floors. Every unit of the package is on exactly one floor (a new one must be placed).
FLOORS: tuple[frozenset[str], ...] = tuple(
    frozenset(floor.split())
    for floor in (
        "text sizes aio httpretry lifecycle logs output control model demo_judge ipc runtime slotted clock",
        "conventions scorers tracescorer prebuilt",  # pure run reading; the scorer library (public API)
        "filters sampling metrics",
        "config",
        "records",  # rows the stages hand each other through the store
        "store",
        "seglog receiver",
        "feed assembly runner export monitors calibration",  # the pipeline's stages and calibration
        "report http_server api commands",  # read side and the ops API
        "demo app daemon workers",  # composition roots (daemon/: the app's own parts; workers/: its worker processes)
        "cli __main__",
    )
)
# What modules outside the store may import from it: pipeline stages the contract only; the read side
# also the read commands' SQL; composition roots also the factory that builds the parts.
STORE_API = frozenset({"tracescorer.store.api"})
STORE_READ = STORE_API | {"tracescorer.store.queries", "tracescorer.store.label_queries"}
STORE_IMPORTS = {
    "report": STORE_READ,
    "calibration": STORE_READ,
    "commands": STORE_READ | {"tracescorer.store.factory"},
    "api": STORE_READ,
    "demo": STORE_READ,
    "app": STORE_API | {"tracescorer.store.factory"},
    "workers": STORE_API | {"tracescorer.store.factory"},
    "cli": STORE_READ | {"tracescorer.store.factory"},
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph() -> dict[str, set[str]]:
    """Module → the package's modules it imports (anywhere in it, TYPE_CHECKING blocks included)."""
    paths = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        targets: set[str] = set()
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    targets.add(full if full in paths else base)
            elif isinstance(node, ast.Import):
                targets |= {alias.name for alias in node.names}
        graph[name] = {t for t in targets if t in paths and t != name}
    return graph


def _unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_cycles() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles_between_modules() -> None:
    assert _cycles(_import_graph()) == []


def test_no_import_cycles_between_folders() -> None:
    units: dict[str, set[str]] = {}
    for module, targets in _import_graph().items():
        units.setdefault(_unit(module), set()).update(_unit(t) for t in targets if _unit(t) != _unit(module))
    assert _cycles(units) == []


def test_every_unit_is_on_a_floor_once() -> None:
    placed = [unit for floor in FLOORS for unit in floor]
    assert len(placed) == len(set(placed)), "a unit on two floors"
    units = {_unit(m) for m in _import_graph()}
    assert sorted(units - set(placed)) == [], "place new modules/folders on a floor in FLOORS"
    assert sorted(set(placed) - units) == [], "FLOORS names a unit that is gone"


def test_no_import_runs_back_up_the_floors() -> None:
    floor_of = {unit: level for level, floor in enumerate(FLOORS) for unit in floor}
    upward = sorted(
        f"{module} -> {target}"
        for module, targets in _import_graph().items()
        for target in targets
        if _unit(target) != _unit(module) and floor_of.get(_unit(target), 0) > floor_of.get(_unit(module), 0)
    )
    assert upward == []


def test_only_the_store_api_outside_the_store() -> None:
    wrong = sorted(
        f"{module} -> {target}"
        for module, targets in _import_graph().items()
        if _unit(module) != "store"
        for target in targets
        if _unit(target) == "store"
        and target != "tracescorer.store"
        and target not in STORE_IMPORTS.get(_unit(module), STORE_API)
    )
    assert wrong == []


def test_modules_are_short() -> None:
    long = sorted(
        f"{path.relative_to(PACKAGE.parent)}: {n} lines"
        for path in PACKAGE.rglob("*.py")
        if (n := len(path.read_text().splitlines())) > 400
    )
    assert long == []
