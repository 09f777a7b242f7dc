"""What a storage engine reports when it cannot serve: one family of errors for every engine.

Apart from ``storage/__init__`` so that the engines (``postgres/``) import it without importing
the module that opens them.
"""

from __future__ import annotations

from typing import Any

from ..durable.work import RetryRound


class StorageError(RuntimeError):
    """The storage engine cannot be used (start-up reports it in one line)."""


class StorageUnavailable(StorageError, RetryRound):
    """The store cannot be reached now (a database restart or failover): the flusher retries the
    round; a request that reads the store gets KAFKA_STORAGE_ERROR (retriable), as an I/O error."""

    transient = True  # False: waiting will not help (a wrong password, no such database)


class StorageConflict(StorageError):
    """A partition's end moved in the store under this broker: another writer claimed it."""

    item: Any = None  # the round's item (a partition's commit) that found it


class DatabaseInUse(StorageError):
    """Another broker holds this database (or this node id of it)."""


class CoordinationLost(StorageError):
    """This broker held the coordinator lease, lost it and another broker took it: it must stop."""
