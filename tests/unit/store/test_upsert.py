"""Bulk upserts on a real DuckDB file: replacement keeps ``created_at`` to the microsecond, the
last row of a key wins, long batches are looked up in parts, and the lookup goes through the
key's index rather than reading the whole table (which made writes slower as tables grew)."""

from __future__ import annotations

import hashlib
import time

import duckdb
import pytest

from tracescorer.store.duckdb.upsert import column, key_in, upsert

COLUMNS = ["id", "value"]


@pytest.fixture
def con(tmp_path):
    c = duckdb.connect(str(tmp_path / "u.duckdb"))
    c.execute("CREATE TABLE t (id VARCHAR PRIMARY KEY, value BIGINT, created_at TIMESTAMPTZ, updated_at TIMESTAMPTZ)")
    yield c
    c.close()


def _upsert(con, rows):
    con.execute("BEGIN")
    n = upsert(
        con, "t", COLUMNS, "id", rows, stamps={"created_at": "now()", "updated_at": "now()"}, keep=("created_at",)
    )
    con.execute("COMMIT")
    return n


def test_replacing_keeps_created_at_and_takes_the_new_values(con):
    assert _upsert(con, [(f"k{i}", i) for i in range(4500)]) == 4500  # more than one IN list of keys
    before = dict(con.execute("SELECT id, created_at FROM t").fetchall())
    time.sleep(0.01)
    # every old key again (in parts of the lookup), a new one, and one key twice: the last wins
    rows = [(f"k{i}", i * 10) for i in range(4500)] + [("new", 1), ("k7", 777)]
    assert _upsert(con, rows) == 4501
    after = {r[0]: r[1:] for r in con.execute("SELECT id, value, created_at, updated_at FROM t").fetchall()}
    assert len(after) == 4501
    assert after["k7"][0] == 777 and after["k4499"][0] == 44990 and after["new"][0] == 1
    assert all(after[k][1] == created for k, created in before.items())  # exactly, microseconds too
    assert all(after[k][2] > created for k, created in before.items())
    assert after["new"][1] > max(before.values())


def test_without_keep_rows_are_replaced_by_key(con):
    con.execute("BEGIN")
    upsert(con, "t", COLUMNS, "id", [("a", 1), ("b", 2)], stamps={"updated_at": "now()"})
    upsert(con, "t", COLUMNS, "id", [("a", 3)], stamps={"updated_at": "now()"})
    con.execute("COMMIT")
    assert con.execute("SELECT id, value FROM t ORDER BY id").fetchall() == [("a", 3), ("b", 2)]


def test_existing_keys_are_found_through_the_index(con):
    con.execute("INSERT INTO t SELECT md5(i::VARCHAR), i, now(), now() FROM range(50000) r(i)")
    con.execute("CHECKPOINT")
    keys = [hashlib.md5(str(i).encode()).hexdigest() for i in range(0, 20000, 20)] + [f"x{i}" for i in range(1000)]
    # the plan is settled at execution: EXPLAIN ANALYZE shows the scan that ran
    plan = "\n".join(
        str(r[1])
        for r in con.execute(f"EXPLAIN ANALYZE SELECT id FROM t WHERE {key_in('id', len(keys))}", keys).fetchall()
    )
    assert "Index Scan" in plan and "Sequential Scan" not in plan, plan
    assert len(con.execute(f"SELECT id FROM t WHERE {key_in('id', len(keys))}", keys).fetchall()) == 1000


def test_rows_said_to_be_new_are_inserted_without_looking_their_key_up(con):
    _upsert(con, [("old", 1)])
    con.execute("BEGIN")
    # "new" is not stored: inserted; "old" is believed new but stored: nothing looked it up, nothing
    # replaced it, so the insert meets the primary key (the store's writer then retries without hints)
    with pytest.raises(duckdb.ConstraintException):
        upsert(
            con,
            "t",
            COLUMNS,
            "id",
            [("new", 2), ("old", 3)],
            stamps={"created_at": "now()", "updated_at": "now()"},
            keep=("created_at",),
            new=[True, True],
        )
    con.execute("ROLLBACK")
    con.execute("BEGIN")
    assert (
        upsert(
            con,
            "t",
            COLUMNS,
            "id",
            [("new", 2), ("old", 3)],
            stamps={"created_at": "now()", "updated_at": "now()"},
            keep=("created_at",),
            new=[True, False],
        )
        == 2
    )
    con.execute("COMMIT")
    assert sorted(con.execute("SELECT id, value FROM t").fetchall()) == [("new", 2), ("old", 3)]


def test_batch_columns_are_typed_from_their_values_and_nothing_is_truncated(con):
    con.execute("CREATE TABLE v (id VARCHAR PRIMARY KEY, x DOUBLE, ok BOOLEAN, note VARCHAR, raw BLOB, n BIGINT)")
    rows = [
        ("a", 1, True, None, b"\x00\x01", None),
        ("b", 0.5, False, "two", None, 2**40),
        ("c", None, None, None, None, 3),
    ]
    con.execute("BEGIN")
    assert upsert(con, "v", ["id", "x", "ok", "note", "raw", "n"], "id", rows) == 3
    con.execute("COMMIT")
    # an int first and a float after: typing the column int64 from the first value would store 0
    assert con.execute("SELECT * FROM v ORDER BY id").fetchall() == [
        ("a", 1.0, True, None, b"\x00\x01", None),
        ("b", 0.5, False, "two", None, 2**40),
        ("c", None, None, None, None, 3),
    ]


@pytest.mark.parametrize(
    "values, kind",
    [
        (["a", None], "string"),
        ([None, 2, 3], "int64"),
        ([1, 0.5], "double"),
        ([0.5, 1], "double"),
        ([True, None], "bool"),
        ([b"x"], "binary"),
        ([None, None], "null"),
    ],
)
def test_column_types(values, kind):
    array = column(values)
    assert str(array.type) == kind and array.to_pylist() == values


def test_a_column_of_values_arrow_cannot_hold_fails_as_arrow_inference_does():
    import pyarrow as pa

    for values in (["a", 1], [True, 1]):
        with pytest.raises((pa.ArrowException, TypeError)):
            column(values)
    with pytest.raises(OverflowError):
        column([2**70])


def test_json_columns_go_in_as_given_without_a_cast_and_read_back_as_json(con):
    con.execute("CREATE TABLE j (id VARCHAR PRIMARY KEY, doc JSON, note VARCHAR)")
    docs = ['{"a":1.0,"b":[1e-05,"\\u00e9"]}', '[{"role":"user","content":"hi"}]', None]
    rows = [(f"k{i}", doc, "x") for i, doc in enumerate(docs)]
    con.execute("BEGIN")
    assert upsert(con, "j", ["id", "doc", "note"], "id", rows, json={"doc"}) == 3
    con.execute("COMMIT")
    stored = con.execute("SELECT id, doc, typeof(doc), doc->>'$.a' FROM j ORDER BY id").fetchall()
    assert [r[1] for r in stored] == docs  # the text exactly, as a VARCHAR insert stores it
    assert {r[2] for r in stored} == {"JSON"} and stored[0][3] == "1.0"
    # the same rows through the VARCHAR -> JSON cast store the same text
    con.execute("CREATE TABLE k AS SELECT * FROM j WHERE false")
    con.execute("BEGIN")
    upsert(con, "k", ["id", "doc", "note"], "id", rows)
    con.execute("COMMIT")
    assert (
        con.execute("SELECT * FROM k ORDER BY id").fetchall() == con.execute("SELECT * FROM j ORDER BY id").fetchall()
    )


def test_json_columns_without_arrows_json_type_are_cast_as_before(con, monkeypatch):
    import pyarrow as pa

    monkeypatch.delattr(pa, "json_")  # pyarrow before 19
    con.execute("CREATE TABLE j (id VARCHAR PRIMARY KEY, doc JSON)")
    con.execute("BEGIN")
    upsert(con, "j", ["id", "doc"], "id", [("a", '{"x":[1,2.5]}'), ("b", None)], json={"doc"})
    con.execute("COMMIT")
    assert con.execute("SELECT id, doc, typeof(doc) FROM j ORDER BY id").fetchall() == [
        ("a", '{"x":[1,2.5]}', "JSON"),
        ("b", None, "JSON"),
    ]


class _Explaining:
    """A connection that keeps the plan of each query it runs that reads rows back (SELECT)."""

    def __init__(self, con) -> None:
        self._con = con
        self.plans: list[str] = []

    def execute(self, sql, params=None):
        if sql.startswith(("SELECT", "WITH")):  # the plan is settled at execution: EXPLAIN ANALYZE shows it
            self.plans.append(
                "\n".join(str(r[1]) for r in self._con.execute(f"EXPLAIN ANALYZE {sql}", params).fetchall())
            )
        return self._con.execute(sql, params) if params is not None else self._con.execute(sql)

    def __getattr__(self, name):
        return getattr(self._con, name)


def test_rows_stored_as_they_are_already_are_left_with_their_stamps_and_said(con):
    con.execute("INSERT INTO t SELECT md5(i::VARCHAR), i, now(), now() FROM range(50000) r(i)")
    _upsert(con, [("a", 1), ("b", 2), ("c", None)])
    con.execute("CHECKPOINT")
    before = {r[0]: r[1:] for r in con.execute("SELECT id, value, created_at, updated_at FROM t").fetchall()}
    time.sleep(0.01)  # a replacement's updated_at is later than the stored one's
    explaining, same = _Explaining(con), {"x"}
    con.execute("BEGIN")
    rows = [("a", 1), ("b", 20), ("c", None), ("new", 4), ("a", 1)]
    n = upsert(
        explaining,
        "t",
        COLUMNS,
        "id",
        rows,
        stamps={"created_at": "now()", "updated_at": "now()"},
        keep=("created_at",),
        same=same,
    )
    con.execute("COMMIT")
    assert n == 2 and same == {"x", "a", "c"}  # b replaced, new inserted; a and c (NULL as NULL) left
    after = {r[0]: r[1:] for r in con.execute("SELECT id, value, created_at, updated_at FROM t").fetchall()}
    assert after["a"] == before["a"] and after["c"] == before["c"]
    assert after["b"][:2] == (20, before["b"][1]) and after["b"][2] > before["b"][2]
    assert after["new"][0] == 4
    # the stored rows were read (once) through the key's index, not by a scan of the table
    [plan] = explaining.plans
    assert "Index Scan" in plan and "Sequential Scan" not in plan, plan
