"""The server's clock-driven duties: retention, transaction timeouts and marker retries, group
timers, and the event-loop lag probe. Each runs as a task of :meth:`Server.background`; a duty
that runs out of descriptors or memory logs it (rate-limited) and tries again next time."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

import trio

from .connection_limits import RESOURCE_ERRNOS
from .durability import wall_clock_ms
from .log_limits import RateLimitedLog
from .share_timers import share_members_here, tick_share_groups

if TYPE_CHECKING:
    from .app import Server
    from .metrics import BrokerMetrics

GROUP_TIMER_MAX_WAIT_S = 1.0  # the group loop looks again at least this often (shards loaded meanwhile)
GROUP_TIMER_RETRY_S = 0.002  # and at most this often
LAG_TICK_S = 0.1
SHARE_TICK_S = 0.1  # while share groups here have members: acquisition locks and sessions expire on it


@contextlib.contextmanager
def surviving_shortage(warnings: RateLimitedLog, duty: str) -> Iterator[None]:
    """A background duty out of descriptors or memory logs (rate-limited) and retries next tick."""
    try:
        yield
    except OSError as exc:
        if exc.errno not in RESOURCE_ERRNOS:
            raise
        warnings.warning(duty, "%s postponed: %s", duty, exc.strerror)


async def retention_loop(server: Server) -> None:
    while True:
        await trio.sleep(server.config.retention_check_interval_ms / 1000)
        now = wall_clock_ms()
        with surviving_shortage(server.warnings, "retention"):
            server.broker.apply_retention(now)
            server.broker.expire_producers(now)


async def transaction_loop(server: Server) -> None:
    """Transaction timeouts and marker retries are the coordinator's clock-driven duties."""
    while True:
        await trio.sleep(server.config.transaction_check_interval_ms / 1000)
        changed = False
        for txn in server.broker.txn_coordinators():
            counters = txn.counters
            before = (counters.committed, counters.aborted)
            with surviving_shortage(server.warnings, "transactions"):
                txn.tick(wall_clock_ms())
            changed = changed or (counters.committed, counters.aborted) != before
        if changed:
            server.notify_append()  # markers moved last stable offsets: wake read_committed fetches


async def group_loop(server: Server) -> None:
    """Session, join and sync timeouts and offset expiry are the group coordinator's clock:
    a timer per deadline (Kafka's timing wheel), not a periodic tick. The loop fires what is
    due, then sleeps until the earliest deadline, or until a group request may have armed an
    earlier one (``Server.group_timers_moved``), and at most GROUP_TIMER_MAX_WAIT_S. Share groups
    (KIP-932) are ticked here too, every SHARE_TICK_S while one has members."""
    while True:
        server._group_timers_moved = trio.Event()
        for groups in server.broker.group_coordinators():
            with surviving_shortage(server.warnings, "groups"):
                groups.tick(wall_clock_ms())
        server.wake_unserved_groups()
        if tick_share_groups(server.broker, wall_clock_ms()):
            server.notify_append()  # records released by an expired lock or member: wake share fetches
        deadlines = [groups.next_deadline() for groups in server.broker.group_coordinators()]
        wait_s = SHARE_TICK_S if share_members_here(server.broker) else GROUP_TIMER_MAX_WAIT_S
        if deadlines:
            # Still due right after the tick: fell due meanwhile, or could not fire (a log
            # write failed): looked at again shortly, never in a busy loop.
            wait_s = min(wait_s, max(GROUP_TIMER_RETRY_S, (min(deadlines) - wall_clock_ms()) / 1000))
        with trio.move_on_after(wait_s):
            await server._group_timers_moved.wait()


async def loop_lag(metrics: BrokerMetrics) -> None:
    """How late a 100 ms tick wakes: any blocking call on the loop shows here."""
    while True:
        before = trio.current_time()
        await trio.sleep(LAG_TICK_S)
        metrics.event_loop_lag.observe(max(0.0, trio.current_time() - before - LAG_TICK_S))
