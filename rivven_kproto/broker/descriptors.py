"""Open files as a budget: the log's share of descriptors, and partitions that must fit.

The native log keeps at most ``log_file_budget()`` segment files open however many partitions
there are (``log/descriptor_cache.py``): an eighth of the open-files limit, so that with the
duplicates a flush round takes of them the log stays within the quarter of the limit the server
keeps free of connections (``server/connection_limits.py``). An engine whose partitions do hold
descriptors each (``Storage.descriptors_per_partition`` > 0) has CreateTopics or
CreatePartitions asking for more than would fit refused (INVALID_PARTITIONS, naming what would
fit) instead of letting one request take every descriptor, while a reserve stays free for
connections, flushes and file jobs.
"""

from __future__ import annotations

import os
import resource

from rivven_kproto.codec.errors import Errors, KafkaError

MIN_RESERVE = 32  # descriptors always left free, at least
RESERVE_FRACTION = 10  # and at least a tenth of the limit
LOG_FILES_FRACTION = 8  # the native log's open segment files: an eighth of the limit
UNLIMITED_LOG_FILES = 1 << 16  # when the limit is infinite


def log_file_budget() -> int:
    """How many segment files the native log may keep open at once, by the soft limit now."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return UNLIMITED_LOG_FILES
    return max(1, soft // LOG_FILES_FRACTION)


def spare_descriptors() -> tuple[int, int] | None:
    """(descriptors free under the soft limit, that limit); None where they cannot be counted."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return None
    try:
        open_now = len(os.listdir("/proc/self/fd"))
    except OSError:
        return None
    return soft - open_now, soft


def check_room_for_partitions(count: int, per_partition: int) -> None:
    """Refuse ``count`` new partitions whose files would eat into the reserve."""
    if count <= 0 or per_partition <= 0:
        return
    spare = spare_descriptors()
    if spare is None:
        return
    free, limit = spare
    usable = free - max(MIN_RESERVE, limit // RESERVE_FRACTION)
    if count * per_partition > usable:
        raise KafkaError(
            Errors.INVALID_PARTITIONS,
            f"{count} new partitions need {count * per_partition} open files, but the broker can spare "
            f"{max(usable, 0)} under its open-files limit of {limit} (at most {max(usable, 0) // per_partition} more "
            "partitions now); raise the limit (ulimit -n) or ask for fewer partitions.",
        )
