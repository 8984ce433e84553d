"""The SQLite store: one file, in WAL mode, so that readers (`kir search show`, a report) do
not block the search writing it and a write that returned is on disk when the process is
killed (synchronous=NORMAL: durable across a process's death, which is the case here; a power
loss may drop the last transactions)."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

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


class SqliteStore(Store):
    def __init__(self, path: str | Path) -> None:
        self.url = str(path)
        try:
            self.db = sqlite3.connect(self.url, timeout=30.0, isolation_level=None)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.execute("PRAGMA foreign_keys=ON")
            self._migrate()
        except sqlite3.DatabaseError as err:
            raise StoreError(f"{self.url}: not a KIR store ({err})") from None

    def _migrate(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")
        try:
            self.db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            row = self.db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            version = int(row[0]) if row else 0
            if version > SCHEMA_VERSION:
                raise StoreError(f"{self.url}: schema version {version} is newer than this KIR's ({SCHEMA_VERSION})")
            for steps in migrations("sqlite")[version:]:
                for sql in steps:
                    self.db.execute(sql)
            self.db.execute(
                "INSERT INTO meta (key, value) VALUES ('schema_version', ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (str(SCHEMA_VERSION),),
            )
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise

    def search(self, name: str, task: str, config: Mapping[str, Any]) -> int:
        # Made if missing, then read: two processes opening the same search get one row.
        self.db.execute(
            "INSERT INTO searches (name, task, config, created) VALUES (?, ?, ?, ?) ON CONFLICT (name) DO NOTHING",
            (name, task, json.dumps(dict(config), sort_keys=True), time.time()),
        )
        row = self.db.execute("SELECT id FROM searches WHERE name = ?", (name,)).fetchone()
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
        marks = ", ".join("?" for _ in NODE_COLUMNS)
        updates = ", ".join(f"{c} = excluded.{c}" for c in NODE_COLUMNS if c != "id")
        self.db.execute(
            f"INSERT INTO nodes (search, {cols}, written) VALUES (?, {marks}, ?) "
            f"ON CONFLICT (search, id) DO UPDATE SET {updates}, written = excluded.written",
            (search, *node_row(node), time.time()),
        )

    def nodes(self, search: int) -> list[Node]:
        cols = ", ".join(NODE_COLUMNS)
        rows = self.db.execute(f"SELECT {cols} FROM nodes WHERE search = ? ORDER BY id", (search,)).fetchall()
        return [row_node(r) for r in rows]

    def cached(self, key: str, context: Mapping[str, Any]) -> Record | None:
        row = self.db.execute(
            "SELECT record FROM evaluations WHERE key = ? AND context = ?", (key, context_key(context))
        ).fetchone()
        return None if row is None else Record.from_json(json.loads(row[0]))

    def remember(self, key: str, context: Mapping[str, Any], record: Record) -> None:
        self.db.execute(
            "INSERT INTO evaluations (key, context, record) VALUES (?, ?, ?) "
            "ON CONFLICT (key, context) DO UPDATE SET record = excluded.record",
            (key, context_key(context), json.dumps(record.to_json(), sort_keys=True)),
        )

    def close(self) -> None:
        self.db.close()
