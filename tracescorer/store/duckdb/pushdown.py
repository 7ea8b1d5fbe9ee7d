"""Which rows of each table a query box query reads: the filters pushed down to the store process.

A query runs in a query process (:mod:`tracescorer.store.duckdb.queryproc`) that reads each table
from the store process as a stream of Arrow batches; without a filter a query for one trace would
stream the whole span log. :func:`pushdowns` takes the query's syntax tree (DuckDB's
``json_serialize_sql``) and, per table, the conjuncts of a WHERE clause that the store can apply
before sending the rows: a conjunct of the SELECT whose FROM holds the table directly (through
inner and cross joins only), whose columns all belong to that table, made only of column
references, constants, parameters, comparisons, AND/OR/NOT, IS [NOT] NULL, IN lists, BETWEEN and
LIKE/ILIKE against a constant. A table referenced several times gets the OR of its references'
filters, and none as soon as one reference has none (or sits where this module does not look:
an outer join, a sample, a subquery's FROM is looked at on its own).

The filter only narrows what is sent: the query process runs the whole statement on what it gets,
every condition again. So a filter here must keep every row the query could need, which the rules
above ensure, and must be cheap and bounded to evaluate in the store process, which the short
list of expression kinds ensures (no function but LIKE, no subquery, no cast of a column).
:func:`scan_sql` checks the same rules again on the store's side before rendering the scan.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Tree = dict[str, Any]

_COMPARISONS = frozenset(
    {
        "COMPARE_EQUAL",
        "COMPARE_NOTEQUAL",
        "COMPARE_LESSTHAN",
        "COMPARE_GREATERTHAN",
        "COMPARE_LESSTHANOREQUALTO",
        "COMPARE_GREATERTHANOREQUALTO",
        "COMPARE_DISTINCT_FROM",
        "COMPARE_NOT_DISTINCT_FROM",
    }
)
_OPERATORS = frozenset({"OPERATOR_IS_NULL", "OPERATOR_IS_NOT_NULL", "COMPARE_IN", "COMPARE_NOT_IN", "OPERATOR_NOT"})
_LIKE = frozenset({"~~", "!~~", "~~*", "!~~*"})
_JOINS = frozenset({"REGULAR", "CROSS"})
_QUERY_NODES = frozenset({"SELECT_NODE", "SET_OPERATION_NODE", "RECURSIVE_CTE_NODE", "CTE_NODE"})


@dataclass(frozen=True, slots=True)
class Pushdown:
    """The rows of one table a query needs: ``where`` (a syntax tree whose columns are bare names
    of the table and whose parameters are numbered 1..len(params)), None for every row."""

    where: Tree | None = None
    params: tuple[Any, ...] = ()


EVERY_ROW = Pushdown()


def _constant_like(e: Any) -> bool:
    if not isinstance(e, dict):
        return False
    if e.get("class") in ("CONSTANT", "PARAMETER"):
        return True
    return e.get("class") == "CAST" and e.get("child", {}).get("class") in ("CONSTANT", "PARAMETER")


def safe(e: Any) -> bool:
    """Whether expression ``e`` is made only of the kinds a pushed filter may hold (module docstring)."""
    if not isinstance(e, dict):
        return False
    cls, kind = e.get("class"), e.get("type")
    if cls == "COLUMN_REF":
        names = e.get("column_names")
        return isinstance(names, list) and 1 <= len(names) <= 2 and all(isinstance(n, str) for n in names)
    if _constant_like(e):
        return True
    if cls == "COMPARISON":
        return kind in _COMPARISONS and safe(e.get("left")) and safe(e.get("right"))
    if cls == "CONJUNCTION":
        children = e.get("children") or []
        return kind in ("CONJUNCTION_AND", "CONJUNCTION_OR") and bool(children) and all(safe(c) for c in children)
    if cls == "OPERATOR":
        children = e.get("children") or []
        if kind in ("COMPARE_IN", "COMPARE_NOT_IN"):
            return len(children) >= 2 and safe(children[0]) and all(_constant_like(c) for c in children[1:])
        return kind in _OPERATORS and bool(children) and all(safe(c) for c in children)
    if cls == "BETWEEN":
        return safe(e.get("input")) and _constant_like(e.get("lower")) and _constant_like(e.get("upper"))
    if cls == "FUNCTION" and e.get("function_name") in _LIKE and e.get("is_operator"):
        args = [
            a.get("expression") if isinstance(a, dict) and "expression" in a else a for a in e.get("arguments") or []
        ]
        plain = not e.get("filter") and not e.get("distinct") and not (e.get("order_bys") or {}).get("orders")
        return plain and len(args) == 2 and safe(args[0]) and _constant_like(args[1])
    return False


def _nodes(e: Any) -> Iterator[Tree]:
    if isinstance(e, dict):
        yield e
        for v in e.values():
            yield from _nodes(v)
    elif isinstance(e, list):
        for v in e:
            yield from _nodes(v)


def _conjuncts(where: Any) -> list[Tree]:
    if isinstance(where, dict) and where.get("class") == "CONJUNCTION" and where.get("type") == "CONJUNCTION_AND":
        return [c for child in where.get("children") or [] for c in _conjuncts(child)]
    return [where] if isinstance(where, dict) else []


@dataclass(slots=True)
class _Ref:
    table: str
    name: str  # the alias, or the table's name
    conjuncts: list[Tree] | None  # None: not looked at (every row)


def _is_table(value: Tree, ctes: frozenset[str], columns: Mapping[str, frozenset[str]]) -> bool:
    name = str(value.get("table_name", "")).lower()
    plain = not value.get("schema_name") and not value.get("catalog_name")
    return plain and name in columns and name not in ctes


def _direct(ref: Any, ctes: frozenset[str], columns: Mapping[str, frozenset[str]], out: list[Tree]) -> None:
    """The base tables of a FROM reached through inner and cross joins, without a sample or a time-travel clause."""
    if not isinstance(ref, dict):
        return
    if ref.get("type") == "JOIN":
        if ref.get("join_type") == "INNER" and ref.get("ref_type") in _JOINS:
            _direct(ref.get("left"), ctes, columns, out)
            _direct(ref.get("right"), ctes, columns, out)
    elif ref.get("type") == "BASE_TABLE" and not ref.get("sample") and not ref.get("at_clause"):
        out.extend([ref] if _is_table(ref, ctes, columns) else [])


def _owner(conjunct: Tree, refs: list[_Ref], columns: Mapping[str, frozenset[str]]) -> _Ref | None:
    """The one reference whose table every column of ``conjunct`` belongs to (None if none or several)."""
    if not safe(conjunct):
        return None
    owners: set[int] = set()
    for node in _nodes(conjunct):
        if node.get("class") != "COLUMN_REF":
            continue
        names = [n.lower() for n in node["column_names"]]
        if len(names) == 2:
            found = [i for i, r in enumerate(refs) if r.name == names[0] and names[1] in columns[r.table]]
        else:
            found = [i for i, r in enumerate(refs) if names[0] in columns[r.table]]
        if len(found) != 1:
            return None
        owners.add(found[0])
    return refs[owners.pop()] if len(owners) == 1 else None


def _walk(value: Any, ctes: frozenset[str], columns: Mapping[str, frozenset[str]], refs: dict[int, _Ref]) -> None:
    if isinstance(value, list):
        for item in value:
            _walk(item, ctes, columns, refs)
        return
    if not isinstance(value, dict):
        return
    kind = value.get("type")
    if "class" not in value and kind in _QUERY_NODES:
        entries = (value.get("cte_map") or {}).get("map") or []
        ctes = ctes | {str(e["key"]).lower() for e in entries if isinstance(e, dict) and isinstance(e.get("key"), str)}
        if kind == "SELECT_NODE":
            found: list[Tree] = []
            _direct(value.get("from_table"), ctes, columns, found)
            direct = [
                _Ref(str(r["table_name"]).lower(), str(r.get("alias") or r["table_name"]).lower(), []) for r in found
            ]
            for conjunct in _conjuncts(value.get("where_clause")):
                owner = _owner(conjunct, direct, columns)
                if owner is not None and owner.conjuncts is not None:
                    owner.conjuncts.append(conjunct)
            for ref, parsed in zip(direct, found, strict=True):
                refs[id(parsed)] = ref
    elif "class" not in value and kind == "BASE_TABLE" and id(value) not in refs and _is_table(value, ctes, columns):
        refs[id(value)] = _Ref(str(value["table_name"]).lower(), "", None)  # somewhere not looked at
    for child in value.values():
        _walk(child, ctes, columns, refs)


def _bare(e: Any, params: Sequence[Any], numbers: dict[str, int], values: list[Any]) -> Any:
    """A copy of ``e`` with column references unqualified and parameters renumbered from 1."""
    if isinstance(e, list):
        return [_bare(v, params, numbers, values) for v in e]
    if not isinstance(e, dict):
        return e
    if e.get("class") == "COLUMN_REF":
        return {**e, "column_names": [e["column_names"][-1]]}
    if e.get("class") == "PARAMETER":
        identifier = str(e.get("identifier", ""))
        if not identifier.isdigit() or not 1 <= int(identifier) <= len(params):
            raise ValueError(f"parameter {identifier!r} has no value")
        if identifier not in numbers:
            values.append(params[int(identifier) - 1])
            numbers[identifier] = len(values)
        return {**e, "identifier": str(numbers[identifier])}
    return {k: _bare(v, params, numbers, values) for k, v in e.items()}


def _either(filters: list[Tree]) -> Tree:
    if len(filters) == 1:
        return filters[0]
    return {"class": "CONJUNCTION", "type": "CONJUNCTION_OR", "alias": "", "children": filters}


def _all(conjuncts: list[Tree]) -> Tree:
    if len(conjuncts) == 1:
        return conjuncts[0]
    return {"class": "CONJUNCTION", "type": "CONJUNCTION_AND", "alias": "", "children": conjuncts}


def pushdowns(tree: Tree, columns: Mapping[str, frozenset[str]], params: Sequence[Any] = ()) -> dict[str, Pushdown]:
    """Per table of ``columns`` (lower-case names -> lower-case column names) the statement in
    ``tree`` reads, the rows it needs (see the module docstring); a table it does not read is absent."""
    refs: dict[int, _Ref] = {}
    _walk(tree.get("statements"), frozenset(), columns, refs)
    by_table: dict[str, list[_Ref]] = {}
    for ref in refs.values():
        by_table.setdefault(ref.table, []).append(ref)
    out: dict[str, Pushdown] = {}
    for table, table_refs in by_table.items():
        if any(not r.conjuncts for r in table_refs):
            out[table] = EVERY_ROW
            continue
        numbers: dict[str, int] = {}
        values: list[Any] = []
        try:
            where = _either([_all(_bare(copy.deepcopy(r.conjuncts), params, numbers, values)) for r in table_refs])
        except ValueError:
            out[table] = EVERY_ROW
            continue
        out[table] = Pushdown(where=where, params=tuple(values))
    return out


def scan_sql(con: Any, table: str, table_columns: Sequence[str], columns: Sequence[str], where: Tree | None) -> str:
    """The store's side: the statement that streams ``columns`` of ``table`` with the pushed filter
    ``where`` (checked again here: its kinds, and that every column is one of ``table_columns``);
    raises ValueError for a request outside those rules."""
    from tracescorer.store.duckdb.layout import quote

    known = {c.lower(): c for c in table_columns}
    if not columns or any(c.lower() not in known for c in columns):
        raise ValueError(f"columns {list(columns)} are not all columns of {table}")
    select = ", ".join(quote(known[c.lower()]) for c in columns)
    source = quote(table)
    if where is not None:
        if not safe(where):
            raise ValueError("the filter holds an expression a scan does not evaluate")
        for node in _nodes(where):
            if node.get("class") == "COLUMN_REF" and (
                len(node["column_names"]) != 1 or node["column_names"][0].lower() not in known
            ):
                raise ValueError(f"the filter names {node['column_names']}, not a column of {table}")
        rows = con.execute("SELECT json_serialize_sql(?)", [f"SELECT * FROM {source} WHERE NULL"]).fetchall()
        template: Tree = json.loads(rows[0][0])
        template["statements"][0]["node"]["where_clause"] = where
        rendered = con.execute("SELECT json_deserialize_sql(?)", [json.dumps(template)]).fetchall()
        source = f"({rendered[0][0]}) AS ts_scan"
    return f"SELECT {select} FROM {source}"
