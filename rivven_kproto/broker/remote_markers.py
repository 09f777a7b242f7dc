"""Transaction markers the coordinator needs on partitions that other brokers lead.

The coordinator writes a marker itself on the partitions its broker leads; for the others
``Broker.write_markers`` asks here, and the server sends the leader a WriteTxnMarkers request
(as Kafka's coordinator does) and reports the answer. The coordinator's usual retry (each of its
ticks, and at once when an answer arrives) then finds the marker written and completes the
transaction once every marker is.
"""

from __future__ import annotations

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
        self._in_flight.discard(marker)
        if written:
            self._done.add(marker)
