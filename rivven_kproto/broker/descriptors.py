"""Open files as a budget: a topic's partitions are created only if their files fit.

Each partition of the native log keeps its active segment's files open, so CreateTopics or
CreatePartitions asking for thousands of partitions could take every descriptor the process has,
after which no client can connect and no file can be opened: one request would disable the broker.
Instead such a request is refused (INVALID_PARTITIONS, naming what would fit) while a reserve
stays free for connections, flushes and file jobs.
"""

from __future__ import annotations

import os
import resource

from rivven_kproto.codec.errors import Errors, KafkaError

MIN_RESERVE = 32  # descriptors always left free, at least
RESERVE_FRACTION = 10  # and at least a tenth of the limit


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
