"""Transaction markers the coordinator needs on partitions that other brokers lead.

The coordinator writes a marker itself on the partitions its broker leads; for the others
``MarkerWriter.write`` asks here, and the server sends the leader a WriteTxnMarkers request
(as Kafka's coordinator does) and reports the answer. The coordinator's usual retry (each of its
ticks, and at once when an answer arrives) then finds the marker written and completes the
transaction once every marker is.

A marker is keyed by what the request carries (producer, epoch, outcome, partition), so the
consecutive transactions of a V1 producer (one epoch) share keys, and a group shard's marker
(epoch 0) is the same for all of them: an acknowledgement must be taken by the transaction that
asked for it. When a transaction coordinator's shard leaves this broker, ``forget`` drops what its
producers asked for, including acknowledgements not taken yet and answers still to come: should
the shard come back, a later transaction of theirs asks (and its marker is sent) again.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass


@dataclass(frozen=True)
class RemoteMarker:
    producer_id: int
    producer_epoch: int
    commit: bool
    topic: str
    partition: int


class RemoteMarkers:
    def __init__(self) -> None:
        self._wanted: dict[RemoteMarker, None] = {}  # insertion-ordered set
        self._in_flight: set[RemoteMarker] = set()
        self._done: set[RemoteMarker] = set()

    def written(self, marker: RemoteMarker) -> bool:
        """True once (the leader acknowledged it); otherwise the marker is asked for."""
        if marker in self._done:
            self._done.discard(marker)
            return True
        if marker not in self._in_flight:
            self._wanted[marker] = None
        return False

    @property
    def pending(self) -> bool:
        return bool(self._wanted)

    def take(self) -> list[RemoteMarker]:
        """The markers to send now (each is in flight until ``finish``)."""
        taken = list(self._wanted)
        self._wanted.clear()
        self._in_flight.update(taken)
        return taken

    def finish(self, marker: RemoteMarker, written: bool) -> None:
        if marker not in self._in_flight:
            return  # forgotten meanwhile: nobody here waits for it
        self._in_flight.discard(marker)
        if written:
            self._done.add(marker)

    def forget(self, producer_ids: Collection[int]) -> None:
        """The markers of these producers: wanted, in flight (their answers are ignored) or
        acknowledged, as their transactions' coordinator shard leaves this broker."""
        if not producer_ids:
            return
        for marker in [m for m in self._wanted if m.producer_id in producer_ids]:
            del self._wanted[marker]
        self._in_flight = {m for m in self._in_flight if m.producer_id not in producer_ids}
        self._done = {m for m in self._done if m.producer_id not in producer_ids}
