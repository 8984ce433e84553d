"""The stores, SQLite and PostgreSQL, held to the same tests: nodes written when proposed and
again when evaluated, read back equal; a write seen by another connection as soon as it
returned; the schema version and a store newer than this KIR; the evaluations shared by every
search of a store; stores opened at once. SQLite alone: WAL mode, a file that is not a store.

The PostgreSQL variant runs against the server of KIR_TEST_POSTGRES (a URL; `.ci/run` starts a
throwaway one), each test in a schema of its own, made and dropped, so that tests run in
parallel; without the variable or the server, it skips and says why."""

from __future__ import annotations

import os
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import pytest

from agent.pipeline import Record
from agent.search.tree import EVALUATED, PROPOSED, Move, Node
from agent.store import SCHEMA_VERSION, StoreError, open_store


def rec(key: str) -> Record:
    return Record(
        candidate=key, file="<t>", stage="run", ok=True, until="run", verdict={"ok": True, "metrics": {"cycles": 7}}
    )


@dataclass(frozen=True)
class Engine:
    """A store's URL, the error its engine raises for a broken constraint, and `sql(text)`: a
    statement run on a connection of its own and committed, its rows returned."""

    name: str
    url: str
    integrity_error: type[Exception]
    sql: Callable[[str], list[tuple[Any, ...]]]


def with_schema(url: str, schema: str) -> str:
    """`url` with `schema` first on the search path (libpq's `options`; the server's URL gives none)."""
    return f"{url}{'&' if '?' in url else '?'}options={quote(f'-csearch_path={schema}')}"


@pytest.fixture(scope="session")
def postgres_server() -> str:
    """KIR_TEST_POSTGRES, once it is known to answer; else the tests that need it skip."""
    url = os.environ.get("KIR_TEST_POSTGRES")
    if not url:
        pytest.skip("KIR_TEST_POSTGRES is unset: no PostgreSQL server to test against (.ci/run starts one)")
    psycopg = pytest.importorskip("psycopg", reason="psycopg is not installed (pip install -e '.[test]')")
    try:
        psycopg.connect(url, connect_timeout=5).close()
    except psycopg.Error as err:
        pytest.skip(f"KIR_TEST_POSTGRES does not answer: {str(err).strip()}")
    return url


def sqlite_engine(tmp_path) -> Engine:
    path = tmp_path / "s.sqlite"

    def sql(text: str) -> list[tuple[Any, ...]]:
        con = sqlite3.connect(path)
        try:
            with con:
                return con.execute(text).fetchall()
        finally:
            con.close()

    return Engine("sqlite", str(path), sqlite3.IntegrityError, sql)


@pytest.fixture(params=["sqlite", "postgres"])
def engine(request, tmp_path) -> Iterator[Engine]:
    if request.param == "sqlite":
        yield sqlite_engine(tmp_path)
        return
    import psycopg

    server = request.getfixturevalue("postgres_server")
    schema = f"kir_test_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f"CREATE SCHEMA {schema}")
        try:
            url = with_schema(server, schema)

            def sql(text: str) -> list[tuple[Any, ...]]:
                with psycopg.connect(url, autocommit=True) as con:
                    cur = con.execute(text)
                    return cur.fetchall() if cur.description else []

            yield Engine("postgres", url, psycopg.IntegrityError, sql)
        finally:
            admin.execute(f"DROP SCHEMA {schema} CASCADE")


def test_put_twice_and_read_back(engine):
    with open_store(engine.url) as store:
        sid = store.search("one", "softmax", {"strategy": "beam"})
        assert store.search("one", "softmax", {}) == sid  # opened again, not made twice
        n = Node(
            0, None, "k0", "kernel text", Move("tactic", "retile", (("param", "BM"), ("value", 64))), (("BM", 32),)
        )
        store.put(sid, n)
        assert store.nodes(sid)[0].status == PROPOSED
        store.put(sid, n.evaluated(rec("k0")))
    with open_store(engine.url) as store:
        (back,) = store.nodes(sid)
        assert back.status == EVALUATED and back == n.evaluated(rec("k0"))
        assert back.score == 7
        (listed,) = store.searches()
        assert listed["name"] == "one" and listed["config"] == {"strategy": "beam"} and listed["nodes"] == 1


def test_a_write_is_seen_by_another_connection_when_it_returns(engine):
    # What a killed search keeps: each write committed by itself, not at close.
    with open_store(engine.url) as writer, open_store(engine.url) as reader:
        sid = writer.search("one", "t", {})
        writer.put(sid, Node(0, None, "k", "a", Move("seed", "seed")))
        writer.remember("k", {"task": "t"}, rec("k"))
        assert [n.key for n in reader.nodes(sid)] == ["k"]
        assert reader.cached("k", {"task": "t"}) == rec("k")
        assert engine.sql("SELECT COUNT(*) FROM nodes") == [(1,)]


def test_a_key_is_one_node_per_search(engine):
    with open_store(engine.url) as store:
        sid = store.search("one", "t", {})
        store.put(sid, Node(0, None, "k", "a", Move("seed", "seed")))
        with pytest.raises(engine.integrity_error):
            store.put(sid, Node(1, 0, "k", "a", Move("t", "x")))
        other = store.search("two", "t", {})
        assert other != sid
        store.put(other, Node(0, None, "k", "a", Move("seed", "seed")))  # another search may
        assert [s["nodes"] for s in store.searches()] == [1, 1]


def test_dropped_nodes_leave_the_search_and_their_evaluations_stay(engine):
    with open_store(engine.url) as store:
        sid = store.search("one", "t", {})
        for i, key in enumerate("abc"):
            store.put(sid, Node(i, None if i == 0 else 0, key, key, Move("t", key)).evaluated(rec(key)))
            store.remember(key, {"task": "t"}, rec(key))
        store.drop(sid, [1, 2])
        assert [n.key for n in store.nodes(sid)] == ["a"]
        assert store.cached("b", {"task": "t"}) == rec("b")
        store.put(sid, Node(1, 0, "c", "c", Move("t", "c")))  # the key free again, under another id
        assert [(n.id, n.key) for n in store.nodes(sid)] == [(0, "a"), (1, "c")]


def test_evaluations_are_shared_by_context(engine):
    with open_store(engine.url) as store:
        ctx = {"task": "softmax", "backend": "mtia-sim", "preset": "test"}
        store.remember("k", ctx, rec("k"))
        assert store.cached("k", ctx) == rec("k")
        assert store.cached("k", {**ctx, "preset": "bench"}) is None


def test_schema_version_and_newer_store(engine):
    open_store(engine.url).close()
    assert engine.sql("SELECT value FROM meta WHERE key = 'schema_version'") == [(str(SCHEMA_VERSION),)]
    open_store(engine.url).close()  # opened again: nothing to migrate
    engine.sql(f"UPDATE meta SET value = '{SCHEMA_VERSION + 1}' WHERE key = 'schema_version'")
    with pytest.raises(StoreError, match="newer"):
        open_store(engine.url)


def test_stores_opened_at_once_make_one_schema(engine):
    def open_and_search(i: int) -> int:
        with open_store(engine.url) as store:
            return store.search("shared", "t", {"opener": i})

    with ThreadPoolExecutor(4) as pool:
        ids = list(pool.map(open_and_search, range(4)))
    assert len(set(ids)) == 1
    assert engine.sql("SELECT value FROM meta WHERE key = 'schema_version'") == [(str(SCHEMA_VERSION),)]


def test_sqlite_store_is_in_wal_mode(tmp_path):
    db = tmp_path / "s.sqlite"
    open_store(str(db)).close()
    assert sqlite3.connect(db).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_not_a_store(tmp_path):
    bad = tmp_path / "x.sqlite"
    bad.write_bytes(b"this is not a database, but it is long enough to look like a file header" * 20)
    with pytest.raises(StoreError, match="not a KIR store"):
        open_store(str(bad))


def test_postgres_server_that_does_not_answer():
    pytest.importorskip("psycopg", reason="psycopg is not installed (pip install -e '.[test]')")
    # Port 1 on the loopback: refused at once. The password is not repeated in the message.
    with pytest.raises(
        StoreError, match=r"kir:\*\*\*@127\.0\.0\.1:1/none\?connect_timeout=3: cannot connect to PostgreSQL"
    ) as err:
        open_store("postgresql://kir:secret@127.0.0.1:1/none?connect_timeout=3")
    assert "secret" not in str(err.value)


def test_llm_exchanges_are_kept_per_search_and_written_once(engine):
    with open_store(engine.url) as store:
        a, b = store.search("a", "t", {}), store.search("b", "t", {})
        ex = {"model": "m", "request": '{"turns": []}', "reply": "```kir\nkernel k\n```", "error": None,
              "input_tokens": 10, "output_tokens": 5, "cost": 0.25}  # fmt: skip
        store.record_exchange(a, "k1", ex)
        store.record_exchange(a, "k1", {**ex, "reply": "another"})  # written once: the first reply stays
        store.record_exchange(
            a, "k2", {**ex, "reply": None, "error": "gone", "input_tokens": 0, "output_tokens": 0, "cost": 0.0}
        )
        assert store.exchange(a, "k1")["reply"] == ex["reply"] and store.exchange(b, "k1") is None
        assert [e["key"] for e in store.exchanges(a)] == ["k1", "k2"] and store.exchanges(b) == []
        assert store.exchanges(a)[1]["error"] == "gone"
    with open_store(engine.url) as store:  # reopened: still there
        assert store.exchange(a, "k1")["cost"] == 0.25
