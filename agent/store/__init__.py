"""Where a search keeps its tree: every node written when proposed and again when evaluated,
so that a search resumes after `kill -9` with nothing evaluated lost. `open_store(url)`: a path
(SQLite in WAL mode, one file a search or a library shared by many) or a `postgresql://` URL
(the same schema, for a team)."""

from agent.store.base import SCHEMA_VERSION, Store, StoreError


def open_store(url: str) -> Store:
    """A store at `url`: `postgresql://...` (psycopg, imported only then), else a SQLite file."""
    if url.startswith(("postgresql://", "postgres://")):
        from agent.store.postgres import PostgresStore

        return PostgresStore(url)
    from agent.store.sqlite import SqliteStore

    return SqliteStore(url)


__all__ = ["SCHEMA_VERSION", "Store", "StoreError", "open_store"]
