"""What a PostgreSQL partition log and coordinator log use of their engine (``PostgresStorage``).

A protocol, so that partition.py and coordinator_log.py depend on the engine's parts (pool,
queries, leases, a round's commit) and not on store.py, which opens them: the package's imports
point one way (checked by an import-linter contract in setup.cfg).
"""

from __future__ import annotations

from typing import Protocol

from .commit import PgCommit
from .leases import PgLeases
from .pool import PgPool
from .queries import PgQueries


class PgEngine(Protocol):
    pool: PgPool
    queries: PgQueries
    leases: PgLeases  # the session whose shard locks fence coordinator log writes

    def commit(self, items: list[PgCommit]) -> None:
        """Worker thread: one database transaction for these logs' writes."""
        ...
