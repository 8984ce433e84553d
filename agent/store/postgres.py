"""The PostgreSQL store, for a team sharing one store: the schema of base.py, written through
psycopg 3. Every statement commits on its own (autocommit), so a write that returned is the
server's when the process is killed; the migrations run in one transaction under an advisory
lock, so that processes opening a new store at once do not race to create it. A schema other
than `public` is chosen in the URL (`?options=-csearch_path%3Dteam`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from agent.store.base import StoreError
from agent.store.sql import SqlStore

# pg_advisory_xact_lock's key for the migrations (a lock is per database): "KIRstore" in ASCII.
MIGRATION_LOCK = 0x4B4952_73746F7265


def redacted(url: str) -> str:
    """`url` without its password, for messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))


class PostgresStore(SqlStore):
    dialect = "postgres"
    mark = "%s"

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

    @contextmanager
    def _migrating(self) -> Iterator[None]:
        with self.db.transaction():
            self.db.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            yield
