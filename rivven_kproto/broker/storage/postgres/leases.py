"""A broker's own session with the database and the advisory locks it holds there.

Like the data directory's lock, the session lasts the broker's life: it holds the node id's lock
(two brokers never share a node id, see node_ids), the coordinator lease (the controller) if no
other broker holds it, and the lock of each coordinator shard the broker serves. All end with the
process, so a dead broker is seen at once. A standby waits here for the lease. The session is
checked before commits and at each heartbeat: lost with a database restart, the locks are taken
again; a broker that finds the lease or one of its shards taken meanwhile must stop
(``CoordinationLost``). Every coordinator log write checks its shard's lock in its transaction.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import threading
import time

import psycopg

from ...cluster import ranked_for_shard
from ..errors import CoordinationLost, DatabaseInUse, StorageUnavailable
from .node_ids import lowest_free_node_id, try_node_lock
from .pool import CONNECT_TIMEOUT_S, PgPool, unavailable_on_error
from .registry import NODE_LOCK_CLASS, Registration
from .schema import migrate

log = logging.getLogger(__name__)

OWNER_LOCK_KEY = 0x6B70726F746F01  # the coordinator lease
OWNER_CHECK_S = 1.0
STANDBY_POLL_S = 0.25
HEARTBEAT_S = 1.0
LEASE_TAKEOVER_BEATS = 2  # heartbeats that find the coordinator lease (or a shard) unheld before taking it
SHARD_LOCK_CLASS = 0x6B73  # advisory lock (class, shard): held by the broker coordinating that shard


class PgLeases:
    def __init__(self, url: str, pool: PgPool, node_id: int, registration: Registration | None, *,
                 standby: bool = False, assign_node_id: bool = False) -> None:
        self.url = url
        self.pool = pool  # marked unavailable when the session cannot be taken again
        self.node_id = node_id
        self.registration = registration
        # No --node-id: the lowest id whose node lock is free, taken at the first join and kept
        # (a join again after the database restarted takes the same one back).
        self._assign_node_id = assign_node_id and not standby
        self.assigned_node_id: int | None = None
        self._owner_checked = time.monotonic()
        self.lock = threading.Lock()  # the session is checked from the flusher's and heartbeat's threads
        self.coordinating = False  # this broker holds the coordinator lease
        self.lost_coordination = False  # it held the lease and another broker took it meanwhile
        self.lease_unheld_beats = 0  # heartbeats in a row that found no broker holding the lease
        # Coordinator shards this broker's session holds the lock of, and per shard the heartbeats
        # in a row that found it unheld (a shard is taken only by its preferred live broker, at
        # its first heartbeat or after LEASE_TAKEOVER_BEATS: a database restart is no race).
        self.coordinator_shards = 1
        self.shards_held: set[int] = set()
        self._shard_unheld_beats: dict[int, int] = {}
        self.beats = 0
        self._owner = self._wait_for_ownership(url) if standby else self._join(url)

    def _wait_for_ownership(self, url: str) -> psycopg.Connection:
        """Standby: take the database once the broker serving it stops (its session, and with it
        the lock, ends when its process dies), or once the database is reachable. Meanwhile the
        standby is registered (and heartbeats) on a connection of its own."""
        waiting = False
        side: psycopg.Connection | None = None
        last_beat = 0.0
        leaving = threading.Event()

        def leave_at_exit() -> None:
            """A standby stopped while it waits (its thread is abandoned): remove its row."""
            leaving.set()
            if self.registration is not None:
                with contextlib.suppress(psycopg.Error), psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
                    self.registration.leave(conn)

        atexit.register(leave_at_exit)
        try:
            while True:
                try:
                    return self._take_ownership(url)
                except (DatabaseInUse, psycopg.OperationalError) as exc:
                    if not waiting:
                        log.info("standby: %s; taking over when that changes", exc)
                        waiting = True
                if self.registration is not None and time.monotonic() - last_beat >= HEARTBEAT_S and not leaving.is_set():
                    last_beat = time.monotonic()
                    try:
                        if side is None:
                            side = psycopg.connect(url, autocommit=True, connect_timeout=int(CONNECT_TIMEOUT_S))
                            migrate(side)
                            self.registration.register(side)
                        else:
                            self.registration.beat(side)
                    except psycopg.Error:
                        if side is not None:
                            side.close()
                        side = None
                time.sleep(STANDBY_POLL_S)
        finally:
            atexit.unregister(leave_at_exit)
            if side is not None:
                side.close()

    def _join(self, url: str, *, lease: bool = True) -> psycopg.Connection:
        """A session of this broker's own for its life (like the data directory's lock): it holds
        the node id's lock (two brokers never share a node id) and, with ``lease`` and if no other
        broker holds it, the coordinator lease. Both end with the process, so a dead broker is
        seen at once."""
        owner = psycopg.connect(url, autocommit=True, connect_timeout=int(CONNECT_TIMEOUT_S))
        try:
            if self._assign_node_id:
                self.node_id = self.assigned_node_id = lowest_free_node_id(owner)
                self._assign_node_id = False
                log.info("node id %d assigned from the database (the lowest that no serving broker holds)",
                         self.node_id)
            elif not try_node_lock(owner, self.node_id):
                raise DatabaseInUse(
                    f"another broker is serving this database as node {self.node_id} (brokers sharing a database need "
                    "distinct --node-id values; --standby waits to take over instead)")
            self.coordinating = lease and self._try_coordinator_lease(owner)
        except BaseException:
            owner.close()
            raise
        return owner

    def _take_ownership(self, url: str) -> psycopg.Connection:
        """Standby: this node's session with the coordinator lease, or DatabaseInUse."""
        owner = self._join(url)
        if not self.coordinating:
            owner.close()
            raise DatabaseInUse("another broker is serving this database (the coordinator lease is held)")
        return owner

    @staticmethod
    def _try_shard_lock(owner: psycopg.Connection, shard: int) -> bool:
        row = owner.execute("SELECT pg_try_advisory_lock(%s, %s)", (SHARD_LOCK_CLASS, shard)).fetchone()
        return bool(row is not None and row[0])

    @staticmethod
    def _try_coordinator_lease(owner: psycopg.Connection) -> bool:
        row = owner.execute("SELECT pg_try_advisory_lock(%s)", (OWNER_LOCK_KEY,)).fetchone()
        return bool(row is not None and row[0])

    def beat(self) -> None:
        """Heartbeat: check the session (taken again if lost) and take the coordinator lease if
        its holder has been gone for LEASE_TAKEOVER_BEATS heartbeats."""
        with self.lock:
            self.check_ownership(force=True)
            if (not self.coordinating and self.lease_unheld_beats >= LEASE_TAKEOVER_BEATS
                    and self._try_coordinator_lease(self._owner)):
                log.info("node %d took the coordinator lease", self.node_id)
                self.coordinating = True

    def release_shard(self, shard: int) -> None:
        """Worker thread: hand a coordinator shard over (its pending writes were committed)."""
        with self.lock:
            self.shards_held.discard(shard)
            self._shard_unheld_beats[shard] = 0
            try:
                self._owner.execute("SELECT pg_advisory_unlock(%s, %s)", (SHARD_LOCK_CLASS, shard))
            except psycopg.Error as exc:  # the session is gone, and the lock with it
                log.info("releasing coordinator shard %d: %s", shard, exc)
        log.info("node %d handed coordinator shard %d over", self.node_id, shard)

    def take_shards(self, live: list[int], owners: dict[int, int]) -> None:
        """Heartbeat: the shards held here count as owned here, then take the free shards this
        broker is preferred for (``owners`` is updated)."""
        with self.lock:
            for shard in self.shards_held:
                owners[shard] = self.node_id
            first = self.beats == 0
            for shard in range(self.coordinator_shards):
                if shard in owners:
                    self._shard_unheld_beats[shard] = 0
                    continue
                beats = self._shard_unheld_beats.get(shard, 0) + 1
                self._shard_unheld_beats[shard] = beats
                if ranked_for_shard(live, shard)[0] != self.node_id or not (first or beats > LEASE_TAKEOVER_BEATS):
                    continue
                if self._try_shard_lock(self._owner, shard):
                    self.shards_held.add(shard)
                    owners[shard] = self.node_id
                    log.info("node %d took coordinator shard %d", self.node_id, shard)
            self.beats += 1

    def shard_owners(self, conn: psycopg.Connection) -> dict[int, int]:
        """Who holds each coordinator shard's lock now: the node whose lock the same session holds."""
        rows = conn.execute(
            "SELECT s.objid::bigint, n.objid::bigint FROM pg_locks s JOIN pg_locks n ON n.pid = s.pid"
            " AND n.locktype = 'advisory' AND n.granted AND n.objsubid = 2 AND n.classid::bigint = %s"
            " AND n.database = s.database WHERE s.locktype = 'advisory' AND s.granted AND s.objsubid = 2"
            " AND s.classid::bigint = %s AND s.database = (SELECT oid FROM pg_database WHERE datname = current_database())",
            (NODE_LOCK_CLASS, SHARD_LOCK_CLASS)).fetchall()
        return {int(shard): int(node) for shard, node in rows if int(shard) < self.coordinator_shards}

    def check_ownership(self, *, force: bool = False) -> None:
        """Worker thread (under ``lock``), before a commit (at most every OWNER_CHECK_S) and each
        heartbeat: the locks live on their own session, lost with it when the database restarts;
        take them again. A broker that coordinated and finds the lease taken by another meanwhile
        must stop (its coordinators' state is no longer the truth): CoordinationLost."""
        if not force and time.monotonic() - self._owner_checked < OWNER_CHECK_S:
            return
        try:
            self._owner.execute("SELECT 1")
        except psycopg.Error:
            self._owner.close()
            was_coordinating = self.coordinating
            with unavailable_on_error(self.pool):
                # Only the broker that held the lease takes it again at once: after the database
                # restarted, the others wait for it (``heartbeat``) rather than race it.
                self._owner = self._join(self.url, lease=was_coordinating)
                # The shards it held too (nobody takes a free shard before LEASE_TAKEOVER_BEATS).
                lost = {shard for shard in self.shards_held if not self._try_shard_lock(self._owner, shard)}
            if lost:
                self.lost_coordination = True
                log.error("node %d lost coordinator shards %s to another broker", self.node_id, sorted(lost))
            log.info("PostgreSQL: ownership of the database taken again after a lost connection (node %d)", self.node_id)
            if was_coordinating and not self.coordinating:
                self.lost_coordination = True
        if self.lost_coordination:
            raise CoordinationLost(
                f"node {self.node_id} lost the coordinator lease or coordinator shards to another broker while the "
                "database was away; "
                "stopping (restart it to serve again)")
        self._owner_checked = time.monotonic()

    def check_shard_lease(self, conn: psycopg.Connection, shard: int) -> None:
        """In a commit's transaction: this broker's session holds the coordinator shard's lock now
        (the fencing of a coordinator log's writes: a broker that lost the shard changes nothing)."""
        holders = {pid for (pid,) in conn.execute(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 2"
            " AND classid::bigint = %s AND objid::bigint = %s", (SHARD_LOCK_CLASS, shard)).fetchall()}
        self.judge_shard(shard, holders)

    @property
    def owner_pid(self) -> int:
        """The backend of this broker's own session (the one holding its locks)."""
        return int(self._owner.info.backend_pid)

    def judge_shard(self, shard: int, holders: set[int]) -> None:
        """``check_shard_lease``'s verdict from the backends holding the shard's lock (a round reads
        them for all of its shards in one statement, ``RoundWrites``)."""
        if self._owner.info.backend_pid in holders:
            return
        if shard in self.shards_held and not holders:
            # Held here, yet nobody holds its lock: the session that held this broker's locks
            # ended (the database restarted or failed over, or the session was cut) and this commit
            # reached the server before the heartbeat noticed. Not a loss: the round is retried once
            # the session is back and its locks taken again (``check_ownership``, forced by the next
            # commit); a broker that took the shard meanwhile makes that a loss (CoordinationLost) there.
            self._owner_checked = float("-inf")
            raise StorageUnavailable(f"node {self.node_id}: the session holding coordinator shard {shard}'s lock "
                                     "is gone; the write waits until the lock is taken again")
        self.lost_coordination = True
        raise CoordinationLost(f"node {self.node_id} writes coordinator shard {shard} without holding its lock")

    def close(self) -> None:
        self._owner.close()
