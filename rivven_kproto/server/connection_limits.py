"""How many connections the broker holds: Kafka's max.connections and max.connections.per.ip.

Beyond ``max.connections`` the broker stops accepting (new clients wait in the listen backlog, as
Kafka's acceptor blocks) until a connection closes; beyond ``max.connections.per.ip`` a new
connection from that address is closed at once. Unset, the total is bounded by the process's
descriptor limit minus a reserve for segment files, indexes and flushes and minus the metrics
listener's own cap (``kproto.metrics.max.connections``), so that idle sockets can never starve the
log of descriptors.
"""

from __future__ import annotations

import errno
import logging
import resource
from collections import Counter

log = logging.getLogger(__name__)

# Descriptors kept for the log: a quarter of the limit, at least this many.
MIN_RESERVED_DESCRIPTORS = 64
# accept() errors that mean "out of a resource for now": wait and retry, never crash.
RESOURCE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
ACCEPT_RETRY_S = 0.1


def raise_descriptor_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard limit (harmless, and what brokers want); return it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError) as exc:
            log.info("could not raise the open-files limit from %d to %d: %s", soft, hard, exc)
    return soft if soft != resource.RLIM_INFINITY else 1 << 20


def default_max_connections(descriptor_limit: int, other_sockets: int = 0) -> int:
    """What the limit leaves for Kafka connections after the log's reserve and ``other_sockets``
    (the metrics listener's cap, when it is on)."""
    reserve = max(MIN_RESERVED_DESCRIPTORS, descriptor_limit // 4)
    return max(1, descriptor_limit - reserve - other_sockets)


class ConnectionLimits:
    """Counts open connections, in total and per client address (no I/O here)."""

    def __init__(self, max_connections: int, max_per_ip: int | None) -> None:
        self.max_connections = max_connections
        self.max_per_ip = max_per_ip
        self.total = 0
        self._per_ip: Counter[str] = Counter()

    @property
    def full(self) -> bool:
        return self.total >= self.max_connections

    def admit(self, ip: str) -> bool:
        """Count a new connection from ``ip``; False (not counted) when that address is at its limit."""
        if self.max_per_ip is not None and self._per_ip[ip] >= self.max_per_ip:
            return False
        self._per_ip[ip] += 1
        self.total += 1
        return True

    def release(self, ip: str) -> None:
        self.total -= 1
        self._per_ip[ip] -= 1
        if not self._per_ip[ip]:
            del self._per_ip[ip]
