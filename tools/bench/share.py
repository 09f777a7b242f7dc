"""The share-group workloads (issue #39): share consumers against a classic group on one topic.

``consume-group`` reads a topic with a classic consumer group (``CONSUMERS`` members, subscribe,
an asynchronous offset commit after every batch); ``share-consume`` reads the same topic with as
many ``ShareConsumer`` s of one share group in explicit acknowledgement mode (every record
accepted; acknowledgements ride on the next ShareFetch). Both count distinct records, so a
redelivery is not counted twice, and time from the first record to the last one received, so the
joining (a rebalance for the group, a heartbeat for the share group) is not what is compared.
The share group starts at offset 0 through AlterShareGroupOffsets (an unknown group id becomes an
empty share group with those start offsets), whatever the broker's share.auto.offset.reset.
Every loop is bounded by a record count and a deadline.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import trio
from confluent_kafka import AcknowledgeType, Consumer, KafkaException, ShareConsumer

from rivven_kproto.client import KafkaClient
from rivven_kproto.client.share_groups import alter_share_offsets

from .workloads import DEADLINE_S, Figures

CONSUMERS = 4
POLL_S = 0.5


class _Tally:
    """Distinct records seen by all consumers, and when the first and the last arrived."""

    def __init__(self, wanted: int) -> None:
        self.wanted = wanted
        self.seen: set[tuple[int, int]] = set()
        self.started = time.perf_counter()  # before any consumer exists
        self.first = self.last = 0.0
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.errors: list[BaseException] = []

    def add(self, keys: list[tuple[int, int]]) -> None:
        now = time.perf_counter()
        with self.lock:
            if not self.seen and keys:
                self.first = now
            before = len(self.seen)
            self.seen.update(keys)
            if len(self.seen) > before:
                self.last = now
            if len(self.seen) >= self.wanted:
                self.done.set()


def _run_members(count: int, member: Callable[[int, _Tally], None]) -> _Tally:
    tally = _Tally(count)

    def guarded(index: int) -> None:
        try:
            member(index, tally)
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            tally.errors.append(exc)
            tally.done.set()

    threads = [threading.Thread(target=guarded, args=(i,), daemon=True) for i in range(CONSUMERS)]
    for thread in threads:
        thread.start()
    finished = tally.done.wait(DEADLINE_S)
    tally.done.set()  # stops the members still polling
    for thread in threads:
        thread.join(60)
    if tally.errors:
        raise tally.errors[0]
    if not finished:
        raise TimeoutError(f"read {len(tally.seen)} of {count} records before the deadline")
    return tally


def _figures(tally: _Tally, size: int, kind: str) -> Figures:
    got = len(tally.seen)
    from_start = tally.last - tally.started
    return Figures(got, max(tally.last - tally.first, 1e-9), got * size,
                   extra={"consumed": got, "consumers": CONSUMERS, "kind": kind, "seconds_with_join": round(from_start, 3),
                          "msgs_per_s_with_join": round(got / from_start) if from_start > 0 else 0})


def consume_group(bootstrap: str, topic: str, count: int, size: int = 100) -> Figures:
    """``CONSUMERS`` members of a fresh classic group read ``count`` records of ``topic``."""
    group = f"bench-classic-{uuid.uuid4().hex[:8]}"

    def member(index: int, tally: _Tally) -> None:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                             "enable.auto.commit": False, "enable.partition.eof": False})
        try:
            consumer.subscribe([topic])
            while not tally.done.is_set():
                batch = consumer.consume(10_000, POLL_S)
                for message in batch:
                    if message.error() is not None:
                        raise KafkaException(message.error())
                if batch:
                    tally.add([(m.partition() or 0, m.offset() or 0) for m in batch])
                    consumer.commit(asynchronous=True)
        finally:
            consumer.close()

    return _figures(_run_members(count, member), size, "classic")


def _start_at_zero(bootstrap: str, group: str, topic: str, partitions: int) -> None:
    async def alter() -> None:
        async with KafkaClient(bootstrap, timeout=30) as client:
            await alter_share_offsets(client, group, {(topic, p): 0 for p in range(partitions)})

    trio.run(alter)


def share_consume(bootstrap: str, topic: str, count: int, partitions: int, size: int = 100) -> Figures:
    """``CONSUMERS`` share consumers of a fresh share group, explicit acknowledgement, accept
    every record of ``topic`` until ``count`` distinct records were read."""
    group = f"bench-share-{uuid.uuid4().hex[:8]}"
    _start_at_zero(bootstrap, group, topic, partitions)
    redelivered = [0] * CONSUMERS

    def member(index: int, tally: _Tally) -> None:
        share = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                               "share.acknowledgement.mode": "explicit"})
        try:
            share.subscribe([topic])
            while not tally.done.is_set():
                batch = share.poll(POLL_S)
                keys: list[tuple[int, int]] = []
                for message in batch:
                    if message.error() is not None:
                        raise KafkaException(message.error())
                    share.acknowledge(message, AcknowledgeType.ACCEPT)
                    keys.append((message.partition() or 0, message.offset() or 0))
                    redelivered[index] += (message.delivery_count() or 1) > 1
                tally.add(keys)
            share.commit_sync()  # the last poll's acknowledgements (close() does not send them)
        finally:
            share.close()

    figures = _figures(_run_members(count, member), size, "share")
    figures.extra["redelivered"] = sum(redelivered)
    return figures


def per_record(results: dict[str, dict[str, Any]]) -> None:
    """Broker CPU microseconds per record, added to the figures of each share-bench workload."""
    for name in ("consume-group", "share-consume"):
        figures = results.get(name)
        if figures and figures.get("messages"):
            figures["broker_cpu_us_per_record"] = round(figures["broker_cpu_s"] * 1e6 / figures["messages"], 2)
