"""When data reaches the disk: the broker-wide fsync policy and per-topic flush settings.

``interval``: fsync dirty logs and the transaction coordinator's log every
``flush_interval_ms`` (the group coordinator flushes its own on the same interval). ``always``: a
produce with acks != 0 is answered only after an fsync that started after its append; concurrent
producers share one (group commit). ``never``: only per-topic ``flush.messages``/``flush.ms`` and shutdown flush.
Every policy acknowledges only data already written to the OS, so a broker crash loses nothing
acknowledged. The fsyncs themselves run on a worker thread (``PartitionLog.begin_flush`` hands
over duplicated descriptors, see ``broker/log/flush.py``), so the event loop keeps serving
requests, and appending to the logs, while the disk catches up.
"""

from __future__ import annotations

import errno
import logging
import os
import time

import trio

from rivven_kproto.broker.broker import Broker
from rivven_kproto.broker.config import BrokerConfig
from rivven_kproto.broker.log.flush import PendingFlush, sync_all
from rivven_kproto.broker.log.partition_log import PartitionLog

from .context import RequestContext
from .log_limits import RateLimitedLog
from .metrics import BrokerMetrics

TICK_S = 0.1
# Out of descriptors (or memory for them): the flush is retried after this pause; nothing is acked meanwhile.
RETRY_AFTER_SHORTAGE_S = 0.1
SHORTAGE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM})
log = logging.getLogger(__name__)


def _sync(pending: list[PendingFlush], wal_descriptor: int | None) -> None:
    """Worker thread: the partitions' prepared flushes and the transaction log's descriptor."""
    try:
        sync_all(pending)
        if wal_descriptor is not None:
            os.fsync(wal_descriptor)
    finally:
        if wal_descriptor is not None:
            os.close(wal_descriptor)


class Durability:
    def __init__(self, broker: Broker, config: BrokerConfig, metrics: BrokerMetrics | None = None) -> None:
        self.metrics = metrics
        self.broker = broker
        self.config = config
        self._dirty: set[PartitionLog] = set()
        self._kick = trio.Event()
        self._started = 0
        self._completed = 0
        self._completed_event = trio.Event()
        self._warnings = RateLimitedLog(log)

    async def after_produce(self, ctx: RequestContext, acks: int) -> None:
        now = ctx.now_ms
        for log in ctx.touched:
            self._dirty.add(log)
            flush_messages = log.config.flush_messages
            if flush_messages is not None and log.unflushed_messages >= flush_messages:
                log.flush(now)
        if self.config.fsync == "always" and acks != 0:
            await self._sync()

    async def _sync(self) -> None:
        """Wait for an fsync that starts after this call (group commit)."""
        target = self._started + 1
        self._kick.set()
        while self._completed < target:
            await self._completed_event.wait()

    async def _flush(self, only_due: bool) -> None:
        now = int(time.time() * 1000)
        pending: list[tuple[PartitionLog, PendingFlush]] = []
        try:
            for partition in list(self._dirty):
                flush_ms = partition.config.flush_ms
                if only_due and (flush_ms is None or now - partition.last_flush_ms < flush_ms):
                    continue
                if not partition.closed:
                    pending.append((partition, partition.begin_flush()))
                self._dirty.discard(partition)
            wal = self.broker.txn.wal.sync_descriptor() if self.config.fsync == "interval" else None
        except OSError:
            for partition, flush in pending:  # give the descriptors back; flush them next time
                flush.release()
                partition.finish_flush(flush, now)
                self._dirty.add(partition)
            raise
        if not pending and wal is None:
            return
        started = time.perf_counter()
        try:
            await trio.to_thread.run_sync(_sync, [flush for _, flush in pending], wal)
            if self.metrics is not None:
                self.metrics.fsync_seconds.observe(time.perf_counter() - started)
                self.metrics.fsync_partitions.inc(len(pending))
        finally:
            for partition, flush in pending:
                if not partition.closed:
                    partition.finish_flush(flush, now)

    async def run(self) -> None:
        """The flusher task: group commits on demand, the interval policy and per-topic flush.ms."""
        interval = self.config.flush_interval_ms / 1000 if self.config.fsync == "interval" else TICK_S
        while True:
            with trio.move_on_after(interval):
                await self._kick.wait()
            self._kick = trio.Event()
            self._started += 1
            try:
                await self._flush(only_due=self.config.fsync == "never")
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
