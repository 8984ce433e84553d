"""The statements of a store, one text for SQLite and PostgreSQL: the schema (base.py's
migrations in the engine's dialect), the nodes written and read, the searches, the evaluations.
An engine's store gives its connection (DB-API: `execute(sql, params)` returning a cursor),
its placeholder, and the transaction the migrations run in."""

from __future__ import annotations

import json
import time
from abc import abstractmethod
from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Any, ClassVar

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


class SqlStore(Store):
    dialect: ClassVar[str]  # the schema's dialect (base.DIALECTS)
    mark: ClassVar[str]  # the engine's placeholder: the statements below are written with "?"
    db: Any

    @abstractmethod
    def _migrating(self) -> AbstractContextManager[None]:
        """The transaction the migrations run in, alone (no other process migrating at once)."""

    def _run(self, sql: str, params: tuple[Any, ...] = ()) -> Any:
        return self.db.execute(sql if self.mark == "?" else sql.replace("?", self.mark), params)

    def _migrate(self) -> None:
        with self._migrating():
            self._run("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            row = self._run("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            version = int(row[0]) if row else 0
            if version > SCHEMA_VERSION:
                raise StoreError(f"{self.url}: schema version {version} is newer than this KIR's ({SCHEMA_VERSION})")
            for steps in migrations(self.dialect)[version:]:
                for sql in steps:
                    self._run(sql)
            self._run(
                "INSERT INTO meta (key, value) VALUES ('schema_version', ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (str(SCHEMA_VERSION),),
            )

    def search(self, name: str, task: str, config: Mapping[str, Any]) -> int:
        # Made if missing, then read: two processes opening the same search get one row.
        self._run(
            "INSERT INTO searches (name, task, config, created) VALUES (?, ?, ?, ?) ON CONFLICT (name) DO NOTHING",
            (name, task, json.dumps(dict(config), sort_keys=True), time.time()),
        )
        row = self._run("SELECT id FROM searches WHERE name = ?", (name,)).fetchone()
        return int(row[0])

    def searches(self) -> list[dict[str, Any]]:
        rows = self._run(
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
        self._run(
            f"INSERT INTO nodes (search, {cols}, written) VALUES (?, {marks}, ?) "
            f"ON CONFLICT (search, id) DO UPDATE SET {updates}, written = excluded.written",
            (search, *node_row(node), time.time()),
        )

    def drop(self, search: int, ids: list[int]) -> None:
        for i in ids:
            self._run("DELETE FROM nodes WHERE search = ? AND id = ?", (search, i))

    def nodes(self, search: int) -> list[Node]:
        cols = ", ".join(NODE_COLUMNS)
        rows = self._run(f"SELECT {cols} FROM nodes WHERE search = ? ORDER BY id", (search,)).fetchall()
        return [row_node(r) for r in rows]

    def cached(self, key: str, context: Mapping[str, Any]) -> Record | None:
        row = self._run(
            "SELECT record FROM evaluations WHERE key = ? AND context = ?", (key, context_key(context))
        ).fetchone()
        return None if row is None else Record.from_json(json.loads(row[0]))

    def remember(self, key: str, context: Mapping[str, Any], record: Record) -> None:
        self._run(
            "INSERT INTO evaluations (key, context, record) VALUES (?, ?, ?) "
            "ON CONFLICT (key, context) DO UPDATE SET record = excluded.record",
            (key, context_key(context), json.dumps(record.to_json(), sort_keys=True)),
        )

    _EXCHANGE = ("model", "request", "reply", "error", "input_tokens", "output_tokens", "cost")

    def exchange(self, search: int, key: str) -> dict[str, Any] | None:
        row = self._run(
            f"SELECT {', '.join(self._EXCHANGE)} FROM exchanges WHERE search = ? AND key = ?", (search, key)
        ).fetchone()
        return None if row is None else {**dict(zip(self._EXCHANGE, row, strict=True)), "key": key}

    def record_exchange(self, search: int, key: str, exchange: Mapping[str, Any]) -> None:
        values = tuple(exchange.get(c) for c in self._EXCHANGE)
        self._run(
            f"INSERT INTO exchanges (search, key, {', '.join(self._EXCHANGE)}, written) "
            f"VALUES (?, ?, {', '.join('?' for _ in self._EXCHANGE)}, ?) ON CONFLICT (search, key) DO NOTHING",
            (search, key, *values, time.time()),
        )

    def exchanges(self, search: int) -> list[dict[str, Any]]:
        rows = self._run(
            f"SELECT key, {', '.join(self._EXCHANGE)} FROM exchanges WHERE search = ? ORDER BY written, key", (search,)
        ).fetchall()
        return [dict(zip(("key", *self._EXCHANGE), r, strict=True)) for r in rows]

    def close(self) -> None:
        self.db.close()
