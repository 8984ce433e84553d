"""The SQLite store: one file, in WAL mode, so that readers (`kir search show`, a report) do
not block the search writing it and a write that returned is on disk when the process is
killed (synchronous=NORMAL: durable across a process's death, which is the case here; a power
loss may drop the last transactions)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from agent.store.base import StoreError
from agent.store.sql import SqlStore


class SqliteStore(SqlStore):
    dialect = "sqlite"
    mark = "?"

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

    @contextmanager
    def _migrating(self) -> Iterator[None]:
        self.db.execute("BEGIN IMMEDIATE")  # the write lock now: another process waits
        try:
            yield
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")
