"""The PostgreSQL store, for a team sharing one store: the schema of base.py, written through
psycopg 3. Every statement commits on its own (autocommit), so a write that returned is the
server's when the process is killed; the migrations run in one transaction under an advisory
lock, so that processes opening a new store at once do not race to create it. A schema other
than `public` is chosen in the URL (`?options=-csearch_path%3Dteam`)."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from agent.pipeline import Record
from agent.search.tree import Node
from agent.store.base import (
    NODE_COLUMNS,
    SCHEMA_VERSION,
    Store,
    StoreError,
    context_key,
    migrations,
    node_row,
    row_node,
)

# pg_advisory_xact_lock's key for the migrations (a lock is per database): "KIRstore" in ASCII.
MIGRATION_LOCK = 0x4B4952_73746F7265


def redacted(url: str) -> str:
    """`url` without its password, for messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))


class PostgresStore(Store):
    def __init__(self, url: str) -> None:
        self.url = redacted(url)
        try:
            import psycopg
        except ImportError:
            raise StoreError(f"{self.url}: a PostgreSQL store needs psycopg (pip install 'psycopg[binary]')") from None
        # libpq waits for an unanswering host without end unless told; the URL may say otherwise.
        timeout: dict[str, Any] = {} if "connect_timeout=" in url else {"connect_timeout": 10}
        try:
            self.db = psycopg.connect(url, autocommit=True, **timeout)
        except psycopg.Error as err:
            raise StoreError(f"{self.url}: cannot connect to PostgreSQL ({str(err).strip()})") from None
        try:
            self._migrate()
        except psycopg.Error as err:
            self.db.close()
            raise StoreError(
                f"{self.url}: not a KIR store, or not one this role may write ({str(err).strip()})"
            ) from None
        except BaseException:
            self.db.close()
            raise

    def _migrate(self) -> None:
        with self.db.transaction():
            self.db.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            self.db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            row = self.db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            version = int(row[0]) if row else 0
            if version > SCHEMA_VERSION:
                raise StoreError(f"{self.url}: schema version {version} is newer than this KIR's ({SCHEMA_VERSION})")
            for steps in migrations("postgres")[version:]:
                for sql in steps:
                    self.db.execute(sql)
            self.db.execute(
                "INSERT INTO meta (key, value) VALUES ('schema_version', %s) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (str(SCHEMA_VERSION),),
            )

    def search(self, name: str, task: str, config: Mapping[str, Any]) -> int:
        # Made if missing, then read: two team members opening the same search get one row.
        self.db.execute(
            "INSERT INTO searches (name, task, config, created) VALUES (%s, %s, %s, %s) ON CONFLICT (name) DO NOTHING",
            (name, task, json.dumps(dict(config), sort_keys=True), time.time()),
        )
        row = self.db.execute("SELECT id FROM searches WHERE name = %s", (name,)).fetchone()
        assert row is not None
        return int(row[0])

    def searches(self) -> list[dict[str, Any]]:
        rows = self.db.execute(
            "SELECT s.id, s.name, s.task, s.config, s.created, COUNT(n.id) FROM searches s "
            "LEFT JOIN nodes n ON n.search = s.id GROUP BY s.id ORDER BY s.id"
        ).fetchall()
        return [
            {"id": r[0], "name": r[1], "task": r[2], "config": json.loads(r[3]), "created": r[4], "nodes": r[5]}
            for r in rows
        ]

    def put(self, search: int, node: Node) -> None:
        cols = ", ".join(NODE_COLUMNS)
        marks = ", ".join("%s" for _ in NODE_COLUMNS)
        updates = ", ".join(f"{c} = excluded.{c}" for c in NODE_COLUMNS if c != "id")
        self.db.execute(
            f"INSERT INTO nodes (search, {cols}, written) VALUES (%s, {marks}, %s) "
            f"ON CONFLICT (search, id) DO UPDATE SET {updates}, written = excluded.written",
            (search, *node_row(node), time.time()),
        )

    def nodes(self, search: int) -> list[Node]:
        cols = ", ".join(NODE_COLUMNS)
        rows = self.db.execute(f"SELECT {cols} FROM nodes WHERE search = %s ORDER BY id", (search,)).fetchall()
        return [row_node(r) for r in rows]

    def cached(self, key: str, context: Mapping[str, Any]) -> Record | None:
        row = self.db.execute(
            "SELECT record FROM evaluations WHERE key = %s AND context = %s", (key, context_key(context))
        ).fetchone()
        return None if row is None else Record.from_json(json.loads(row[0]))

    def remember(self, key: str, context: Mapping[str, Any], record: Record) -> None:
        self.db.execute(
            "INSERT INTO evaluations (key, context, record) VALUES (%s, %s, %s) "
            "ON CONFLICT (key, context) DO UPDATE SET record = excluded.record",
            (key, context_key(context), json.dumps(record.to_json(), sort_keys=True)),
        )

    def close(self) -> None:
        self.db.close()
