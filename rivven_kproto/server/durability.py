"""When data reaches the disk: the only place that interprets the fsync policy.

``interval``: every ``flush_interval_ms`` fsync the partitions written since, and the transaction
and group coordinators' logs. ``always``: a produce with acks != 0, and any request that wrote a
coordinator log entry, is answered only after an fsync round that started after it (concurrent
requests share one round: group commit); a transaction's completion is logged only after its
markers are durable. ``never``: only per-topic ``flush.messages``/``flush.ms`` and shutdown.
Every policy acknowledges only data already written to the OS, so a broker crash loses nothing
acknowledged.

One task runs the rounds. A round captures, on the event loop, what must be synced (the broker's
unflushed partitions via ``Partition.begin_flush``, the coordinators' logs via
``DurableLog.begin_sync``: duplicated descriptors and checkpoints to write) and the queued blocking
file work (``Broker.work``: producer snapshots, retention's checkpoints and deletions, log
compaction snapshots); a worker thread then does all of it, and the loop applies the results. The
event loop never waits for the disk.
"""

from __future__ import annotations

import errno
import logging
import time
from collections.abc import Callable

import trio

from rivven_kproto.broker.broker import Broker
from rivven_kproto.broker.config import BrokerConfig
from rivven_kproto.broker.durable.flush import FlushItem
from rivven_kproto.broker.durable.log import DurableLog
from rivven_kproto.broker.durable.work import Job, run_all
from rivven_kproto.broker.log.partition import Partition
from rivven_kproto.broker.storage import Storage, StorageUnavailable
from rivven_kproto.broker.txn.effects import AwaitSync

from .context import RequestContext
from .log_limits import RateLimitedLog
from .metrics import BrokerMetrics

TICK_S = 0.1
# Out of descriptors (or memory for them): the flush is retried after this pause; nothing is acked meanwhile.
RETRY_AFTER_SHORTAGE_S = 0.1
# The database is unreachable: the round's writes are kept and committed again after this pause.
RETRY_AFTER_STORAGE_FAILURE_S = 0.5
SHORTAGE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM})
log = logging.getLogger(__name__)


def wall_clock_ms() -> int:
    """The broker's clock (epoch milliseconds): record timestamps, timeouts, the coordinators' time."""
    return int(time.time() * 1000)


def _sync_then_work(storage: Storage, pending: list[FlushItem], jobs: list[Job]) -> None:
    """Worker thread: make what the round captured durable (fsyncs, or one database commit),
    then run the queued file work in order."""
    storage.sync(pending)
    run_all(jobs)


class Durability:
    def __init__(self, broker: Broker, config: BrokerConfig, metrics: BrokerMetrics | None = None) -> None:
        self.metrics = metrics
        self.broker = broker
        self.config = config
        # A database engine acknowledges only what it committed, whatever the fsync policy says.
        self.sync_on_ack = config.fsync == "always" or broker.storage.acknowledge_after_commit
        self.sync_coordinators = config.fsync != "never" or broker.storage.acknowledge_after_commit
        broker.work.inline = False  # from now on this flusher runs the broker's file work
        self.attach_coordinators()
        self.after_commit: Callable[[], None] | None = None  # called after a round that made records durable
        self._due: set[Partition] = set()  # reached flush.messages
        self._kick = trio.Event()
        self._started = 0
        self._completed = 0
        self._completed_event = trio.Event()
        self._warnings = RateLimitedLog(log)

    def attach_coordinators(self) -> None:
        """The transaction coordinator completes only after its markers are durable (at start,
        and again when this broker takes over coordinating a cluster)."""
        for txn in self.broker.txn_coordinators():
            if self.sync_on_ack:
                txn.runtime.on(AwaitSync, txn.hold_until_synced)
            if self.metrics is not None:
                txn.completion_observer = self.metrics.observe_transaction

    async def after_request(self, ctx: RequestContext, coordinator_writes_before: int, critical_before: int = 0) -> None:
        """Note the logs a request wrote; return once what must be durable before the answer is:
        metadata it changed (critical file work), or records written while such a change is
        still pending (always); under ``always`` also its records (acks != 0) and coordinator
        log entries."""
        for partition in ctx.touched:
            self.broker.unflushed.add(partition)
            flush_messages = partition.config.flush_messages
            if flush_messages is not None and partition.unflushed_messages >= flush_messages:
                self._due.add(partition)
                self._kick.set()
        work = self.broker.work
        metadata = work.critical_submitted != critical_before or bool(ctx.touched and work.critical_pending)
        policy = self.sync_on_ack and (
            bool(ctx.sync_before_answer and ctx.touched) or self.broker.coordinator_writes != coordinator_writes_before
        )
        if metadata or policy:
            await self.sync()

    async def sync(self) -> None:
        """Wait for an fsync round that starts after this call (group commit)."""
        target = self._started + 1
        self._kick.set()
        while self._completed < target:
            await self._completed_event.wait()

    def _capture(self, now: int, only_due: bool) -> tuple[list[tuple[Partition, FlushItem]],
                                                         list[tuple[DurableLog, FlushItem]]]:
        partitions: list[tuple[Partition, FlushItem]] = []
        logs: list[tuple[DurableLog, FlushItem]] = []
        try:
            for partition in list(self.broker.unflushed):
                flush_ms = partition.config.flush_ms
                due = partition in self._due or (flush_ms is not None and now - partition.last_flush_ms >= flush_ms)
                if only_due and not due:
                    continue
                if not partition.closed:
                    partitions.append((partition, partition.begin_flush()))
                self.broker.unflushed.discard(partition)
                self._due.discard(partition)
            if self.sync_coordinators:
                shares = self.broker.leader_shares.logs() if self.broker.leader_shares is not None else []
                for durable_log in [each for shard in self.broker.shards.values() for each in shard.logs()] + shares:
                    captured = durable_log.begin_sync() if durable_log is not None else None
                    if durable_log is not None and captured is not None:
                        logs.append((durable_log, captured))
        except OSError:
            for partition, flush in partitions:  # give the descriptors back; flush them next time
                flush.release()
                partition.finish_flush(flush, now)
                self.broker.unflushed.add(partition)
            for durable_log, flush in logs:
                durable_log.abandon_sync(flush)
            raise
        return partitions, logs

    async def _round(self, only_due: bool) -> None:
        now = wall_clock_ms()
        partitions, logs = self._capture(now, only_due)
        jobs = self.broker.work.take()
        critical = self.broker.work.critical_submitted
        completing = [(shard, shard.txn.take_awaiting()) for shard in self.broker.shards.values()]
        if not partitions and not logs and not jobs and not any(txns for _, txns in completing):
            return
        started = time.perf_counter()
        pending = [flush for _, flush in partitions] + [flush for _, flush in logs]
        try:
            await trio.to_thread.run_sync(_sync_then_work, self.broker.storage, pending, jobs)
            if self.metrics is not None:
                self.metrics.fsync_seconds.observe(time.perf_counter() - started)
                self.metrics.fsync_partitions.inc(len(partitions))
                for durable_log, _ in logs:
                    self.metrics.fsync_coordinator_logs.labels(durable_log.name).inc()
                for flush in pending:
                    if flush.synced:
                        self.metrics.log_fsync_seconds.labels(flush.kind).observe(flush.seconds)
                self.metrics.file_jobs.inc(len(jobs))
        except StorageUnavailable:
            # Nothing of this round is durable: keep all of it for the next round.
            for durable_log, flush in logs:
                if not flush.synced:
                    durable_log.abandon_sync(flush)
            self.broker.work.requeue([job for job in jobs])
            raise
        finally:
            for partition, flush in partitions:
                if not partition.closed:
                    partition.finish_flush(flush, now)
                    if not flush.synced:
                        self.broker.unflushed.add(partition)
        self.broker.work.critical_done = critical
        if partitions and self.after_commit is not None:
            self.after_commit()
        # Markers refused with a log another broker claimed (appended before or during this round).
        lost = frozenset((partition.name, producer_id) for partition, flush in partitions
                         if flush.fenced for producer_id in partition.lost_markers)
        for shard, txns in completing:
            if self.broker.shards.get(shard.index) is shard:  # not handed over meanwhile
                shard.txn.complete_synced(txns, now, lost)

    async def run(self) -> None:
        """The flusher task: group commits on demand, the interval policy and per-topic flush."""
        interval = self.config.flush_interval_ms / 1000 if self.config.fsync == "interval" else TICK_S
        while True:
            with trio.move_on_after(interval):
                await self._kick.wait()
            self._kick = trio.Event()
            self._started += 1
            try:
                await self._round(only_due=self.config.fsync == "never" and not self.sync_on_ack)
            except StorageUnavailable as exc:
                self._warnings.warning(
                    "storage", "storage unavailable: %s; retrying (nothing is acknowledged meanwhile)", exc)
                self._kick.set()
                await trio.sleep(RETRY_AFTER_STORAGE_FAILURE_S)
                continue
            except OSError as exc:
                if exc.errno not in SHORTAGE_ERRNOS:
                    raise
                self._warnings.warning(
                    "flush", "flush postponed: %s; retrying (acks waiting for an fsync wait too)", exc.strerror
                )
                self._kick.set()
                await trio.sleep(RETRY_AFTER_SHORTAGE_S)
                continue
            self._completed = self._started
            event, self._completed_event = self._completed_event, trio.Event()
            event.set()
