"""Where a search keeps its tree: every node written when proposed and again when evaluated,
so that a search resumes after `kill -9` with nothing evaluated lost. `open_store(url)`: a path
(SQLite in WAL mode, one file a search or a library shared by many) or a `postgresql://` URL
(the same schema, for a team)."""

from agent.store.base import SCHEMA_VERSION, Store, StoreError, open_store

__all__ = ["SCHEMA_VERSION", "Store", "StoreError", "open_store"]
