"""Whether this broker may still answer for the partitions it leads and the shards it holds.

On a shared store a broker's claims last only while its heartbeat is fresh: the other brokers
count it dead after the store's session timeout without one, and take its partitions (and the
shards of a broker whose database session ended). A broker that was paused (SIGSTOP, a long GC,
a stalled VM) or cut off from the database cannot tell from its memory whether that happened, so
it answers for nothing (NOT_LEADER_OR_FOLLOWER, NOT_COORDINATOR) from the moment its last
confirmed heartbeat is older than ``bound_s`` until a new heartbeat confirmed the cluster view and
the follow step let go of what others hold now. A heartbeat confirms the time it *started*: one
that began before a pause and ended after it says nothing about the time in between.

The check is one clock reading per request (``refresh``); the per-partition checks read the
``valid`` flag it leaves. A broker alone (no session timeout) is never suspended.
"""

from __future__ import annotations

import time
from collections.abc import Callable

CLOCK_MARGIN_S = 1.0  # clock-rate differences between this host and the database, scheduling delays


def safe_bound(session_timeout_s: float, heartbeat_interval_s: float, margin_s: float = CLOCK_MARGIN_S) -> float:
    """How long after a heartbeat started this broker's claims certainly still hold.

    The database stamps the heartbeat after it started here, and the other brokers count this one
    dead only once that stamp is ``session_timeout_s`` old, so nothing is taken before the start
    plus the session timeout. Less one heartbeat interval: a request admitted just before the
    bound still reads and answers (on worker threads, too) while the clock runs on. Less a margin
    for clocks that run at slightly different rates and for the time between the clock reading
    and the check. Never below one interval: a healthy broker is not suspended between beats."""
    return max(session_timeout_s - heartbeat_interval_s - margin_s, heartbeat_interval_s)


class ClaimsLease:
    """The time of the last confirmed heartbeat, and whether the claims are valid now."""

    def __init__(self, session_timeout_s: float | None, heartbeat_interval_s: float | None,
                 clock: Callable[[], float] = time.monotonic, confirmed_at: float | None = None) -> None:
        self.clock = clock
        # None: a broker alone (nobody can take its partitions): always valid.
        self.bound_s = (safe_bound(session_timeout_s, heartbeat_interval_s)
                        if session_timeout_s is not None and heartbeat_interval_s is not None else None)
        self.confirmed_at = clock() if confirmed_at is None else confirmed_at
        self.valid = True
        # After a lapse, the claims are checked in the store at every heartbeat for this long: a
        # broker that read its view while this one was counted dead may claim a partition late
        # (its follow step runs after its heartbeat), after the first check.
        self.recheck_s = session_timeout_s or 0.0
        self._recheck_until = float("-inf")

    @classmethod
    def alone(cls) -> ClaimsLease:
        return cls(None, None)

    def refresh(self) -> bool:
        """Once per request: are the claims valid now? (Left in ``valid`` for the per-partition checks.)"""
        if self.bound_s is not None:
            self.valid = self.clock() - self.confirmed_at < self.bound_s
        return self.valid

    def lapsed(self) -> bool:
        """Has the bound passed since the last confirmation (the claims may have been taken since)?"""
        return self.bound_s is not None and self.clock() - self.confirmed_at >= self.bound_s

    def must_check(self) -> bool:
        """At a heartbeat: check the claims in the store before confirming? Yes after a lapse, and
        at every heartbeat for ``recheck_s`` after one."""
        if self.bound_s is None:
            return False
        now = self.clock()
        if now - self.confirmed_at >= self.bound_s:
            self._recheck_until = now + self.recheck_s
            return True
        return now < self._recheck_until

    def confirm(self, started_at: float) -> None:
        """A heartbeat that started at ``started_at`` (this clock) confirmed the view and was followed."""
        self.confirmed_at = max(self.confirmed_at, started_at)
