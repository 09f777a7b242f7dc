"""Idle connections to the other brokers of the cluster, kept for the next request to the same peer.

A connection carries one request at a time: a connection's requests are answered in order, so a
forwarded Fetch's long-poll on it would hold up a marker write behind it. A request takes an idle
connection (or opens one) and gives it back once answered; the pool keeps at most
:data:`MAX_IDLE_PER_PEER` per peer and closes the rest. A connection whose request failed or was
cancelled is closed, never given back, and one whose SASL session is about to end is not reused
(the peer would close it). Only idle connections live here, read by no task: the pool owns no
background work, and :meth:`PeerPool.aclose` (at the broker's stop) closes them.
"""

from __future__ import annotations

import trio

from rivven_kproto.net.connection import BrokerConnection

MAX_IDLE_PER_PEER = 2
SESSION_MARGIN_S = 5.0  # an idle connection whose SASL session ends sooner is not reused
PeerKey = tuple[int, str, int]  # node id, host, port of its inter-broker listener


class PeerPool:
    """Idle connections by peer; a peer seen at a new address has its old ones closed."""

    def __init__(self) -> None:
        self._idle: dict[int, tuple[PeerKey, list[BrokerConnection]]] = {}
        self._closed = False

    @staticmethod
    def _session_ending(connection: BrokerConnection) -> bool:
        """The peer would close the connection at its next request: its SASL session ends
        (``connections.max.reauth.ms``) and we do not re-authenticate."""
        ends = connection.session_ends
        return ends is not None and ends - trio.current_time() < SESSION_MARGIN_S

    async def take(self, key: PeerKey) -> BrokerConnection | None:
        """The most recently used idle connection to this peer, if any (it is the caller's now);
        those it passes over (broken, or their session ending) are closed."""
        entry = self._idle.get(key[0])
        chosen, closing = None, []
        while entry is not None and entry[0] == key and entry[1] and chosen is None:
            connection = entry[1].pop()
            if connection.usable and not self._session_ending(connection):
                chosen = connection
            else:
                closing.append(connection)
        for stale in closing:
            await stale.aclose()
        return chosen

    async def give(self, key: PeerKey, connection: BrokerConnection) -> None:
        """Keep an answered connection for the next request to ``key`` (or close it: the pool is
        full or closed, or the connection is broken). The pool changes before the first await."""
        closing: list[BrokerConnection] = []
        if self._closed or not connection.usable:
            closing.append(connection)
        else:
            entry = self._idle.get(key[0])
            if entry is not None and entry[0] != key:  # the peer moved (restarted elsewhere)
                closing.extend(entry[1])
                entry = None
            if entry is None:
                entry = self._idle[key[0]] = (key, [])
            if len(entry[1]) >= MAX_IDLE_PER_PEER:
                closing.append(connection)
            else:
                entry[1].append(connection)
        for stale in closing:
            await stale.aclose()

    async def aclose(self) -> None:
        """Close every idle connection; connections given back later are closed too."""
        self._closed = True
        entries, self._idle = list(self._idle.values()), {}
        closing: list[BrokerConnection] = []
        for _, connections in entries:
            closing.extend(connections)
        for connection in closing:
            await connection.aclose()
