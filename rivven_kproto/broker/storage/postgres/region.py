"""A Fetch's batches on the PostgreSQL engine, located in the database and read as they are sent.

The native log answers a large Fetch with a file region the server sends from the segments a
chunk at a time; built in memory instead, an unread TLS response here held every byte it would
send (issue #37 item 7: four unread 16 MB fetches grew the broker by 215 MiB). A
:class:`PgRegion` is located on the fetch's worker thread (the batches' offsets and sizes, no
bytes), encoded as a hole of its size, then read from the database a chunk of whole batches at a
time, each chunk on a worker thread when the connection has taken the previous one.

Rows may go while a response is on its way (retention, DeleteRecords; the native log's
descriptors keep deleted segments readable, rows are not kept): a chunk whose rows are no
longer all there raises ``ExternalBytesGone``, and the server closes the connection (the client
fetches again and learns the new log start). So does a database failure mid-response.
"""

from __future__ import annotations

import uuid
from collections.abc import Generator

import psycopg

from rivven_kproto.broker.log.region import BatchRegion
from rivven_kproto.codec.splice import ExternalBytesGone

from ..errors import StorageError
from .queries import PgQueries


class PgRegion(BatchRegion):
    """Whole batches of one partition, as (base offset, next offset, size) located rows."""

    def __init__(self, queries: PgQueries, key: tuple[uuid.UUID, int], located: list[tuple[int, int, int]]) -> None:
        ends, total = [], 0
        for _, _, size in located:
            total += size
            ends.append(total)
        super().__init__(ends, [next_offset for _, next_offset, _ in located])
        self.queries = queries
        self.key = key
        self.bases = [base for base, _, _ in located]
        self.sizes = [size for _, _, size in located]

    def _keep(self, batches: int) -> None:
        del self.bases[batches:], self.sizes[batches:]

    def read(self) -> bytes:
        return b"".join(self.chunks(max(self.size, 1)))

    def chunks(self, size: int) -> Generator[bytes, None, None]:
        """Runs of whole batches of about ``size`` bytes (a larger batch alone), one query each."""
        first = 0
        while first < len(self.bases):
            last, held = first, self.sizes[first]
            while last + 1 < len(self.bases) and held + self.sizes[last + 1] <= size:
                last += 1
                held += self.sizes[last]
            yield self._read_run(first, last)
            first = last + 1

    def _read_run(self, first: int, last: int) -> bytes:
        try:
            rows = self.queries.read_rows(self.key, self.bases[first], self.bases[last])
        except (psycopg.Error, StorageError) as exc:  # (the pool reports most as StorageUnavailable)
            raise ExternalBytesGone(f"reading a fetch's batches failed: {exc}") from exc
        expected = list(zip(self.bases[first:last + 1], self.sizes[first:last + 1], strict=True))
        if [(base, len(data)) for base, data in rows] != expected:
            raise ExternalBytesGone(f"batches from offset {self.bases[first]} were deleted under a fetch")
        return b"".join(data for _, data in rows)

    def release(self) -> None:
        pass  # nothing is held: the rows are read when sent
