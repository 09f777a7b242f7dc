"""Protocol enumerations every layer speaks: one definition for broker, clients and the Spark source."""

from __future__ import annotations

import enum


class IsolationLevel(enum.IntEnum):
    """Fetch and ListOffsets ``isolation_level``."""

    READ_UNCOMMITTED = 0
    READ_COMMITTED = 1


class OffsetSpec(enum.IntEnum):
    """ListOffsets' special timestamps (Kafka's ListOffsetsRequest constants)."""

    LATEST = -1
    EARLIEST = -2
    MAX_TIMESTAMP = -3


READ_UNCOMMITTED = IsolationLevel.READ_UNCOMMITTED
READ_COMMITTED = IsolationLevel.READ_COMMITTED
LATEST = OffsetSpec.LATEST
EARLIEST = OffsetSpec.EARLIEST
MAX_TIMESTAMP = OffsetSpec.MAX_TIMESTAMP
