"""The server's part in a cluster of brokers sharing one store: heartbeats, leadership, markers.

Every heartbeat (once a second, on a worker thread) refreshes this broker's registration and
reads the live brokers, the coordinator lease's holder, the topic catalog and the digests of the
ACLs, SCRAM credentials and dynamic broker configs (re-read when the controller changed them: a
revoked ACL or a deleted user stops working on every broker within a heartbeat); the broker then
lets go of partitions another broker leads now and opens (off the loop) those it leads and has not
opened. The broker that takes the coordinator lease is the controller. Group and transactional
ids are coordinated by shards (``broker/coordinator_shards``): the heartbeat takes the free shards
this broker is preferred for, and the broker loads them; a shard another live broker is preferred
for now is handed over (no longer served, its last log entries committed, its lock released). The
coordinators' markers on partitions led elsewhere, and on group shards held elsewhere, go to their
leaders (holders) as WriteTxnMarkers. A heartbeat followed in full confirms this broker's claims
from the time it started (broker/claims.py); after they lapsed (a pause, the database away), the
follow step first lets go of the partitions another broker claimed meanwhile. A broker alone (the
native log) runs only the heartbeat, which does nothing.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable

import trio

from rivven_kproto.broker import follow
from rivven_kproto.broker.broker import Broker
from rivven_kproto.broker.cluster import Node, catalog_digest
from rivven_kproto.broker.coordinator_shards import GROUP_SHARD_TOPIC
from rivven_kproto.broker.markers.remote import RemoteMarker
from rivven_kproto.broker.markers.writer import COORDINATOR_EPOCH
from rivven_kproto.broker.membership import Pulse
from rivven_kproto.broker.storage import CoordinationLost, StorageError
from rivven_kproto.codec.connection import ProtocolError, RequestEvent
from rivven_kproto.codec.messages.envelope import EnvelopeResponse

from .durability import Durability, wall_clock_ms
from .forwarding import ENVELOPE_VERSION, unwrap_response, wrap
from .log_limits import RateLimitedLog
from .peers import call, send_markers

log = logging.getLogger(__name__)

MARKER_POLL_S = 0.005  # how soon markers the coordinator asked for are sent
CATALOG_POLL_S = 0.05
CATALOG_WAIT_S = 10.0  # a topic change is answered once every live broker applied it, or after this
MARKER_RETRY_S = 0.2  # after a leader could not be reached


# Coordinator requests (group and transactional ids) are answered by the handlers: NOT_COORDINATOR
# for a key whose shard this broker does not hold, as Kafka's brokers answer (OffsetFetch v0-1,
# without an error field, declares ``Coordinator(key)``: see server/routes.py). ListGroups and
# ListTransactions are answered by every broker for the shards it coordinates, as Kafka's brokers
# do. Requests that change the topic catalog, configs, ACLs or credentials are the controller's to
# answer: their handlers declare ``ROUTE = CONTROLLER``.


class ClusterFollower:
    def __init__(self, broker: Broker, durability: Durability, advertised: tuple[str, int],
                 notify_append: Callable[[], None], warnings: RateLimitedLog,
                 notify_view: Callable[[], None] = lambda: None) -> None:
        self.broker = broker
        self.durability = durability
        self.advertised = advertised
        self.peer_endpoint: tuple[str, int] | None = None  # the inter-broker listener's address, registered
        self.notify_append = notify_append
        self.notify_view = notify_view  # after each heartbeat: held FindCoordinator lookups look again
        self.warnings = warnings
        self.acknowledged: str | None = None  # the digest of the catalog this broker last said it applied
        self._members: tuple[int, ...] = tuple(node.node_id for node in broker.cluster.nodes)

    async def heartbeat_loop(self, interval_s: float) -> None:
        """Each heartbeat followed in full confirms this broker's claims from the time it
        started (see broker/claims.py): a round trip a pause fell into proves nothing about it."""
        host, port = self.advertised
        claims = self.broker.claims
        while True:
            started = claims.clock()
            try:
                pulse = await trio.to_thread.run_sync(self.broker.membership.heartbeat, host, port, self.peer_endpoint)
            except CoordinationLost:
                raise
            except StorageError as exc:
                self.warnings.warning("heartbeat", "heartbeat failed: %s", exc)
            else:
                if pulse is not None and await self._follow_or_warn(pulse):
                    claims.confirm(started)
                self.notify_view()
            await trio.sleep(interval_s)

    async def _follow_or_warn(self, pulse: Pulse) -> bool:
        """A database error while following a pulse (opening partitions, acknowledging the
        catalog) is retried at the next heartbeat: it must not stop the broker. True: the pulse's
        view was adopted (what others lead now let go of), which is what confirms the claims."""
        adopted = False
        try:
            adopted = await self._adopt(pulse)
            if adopted:
                await self._follow_shards()
                await self._acknowledge_catalog()
        except CoordinationLost:
            raise
        except StorageError as exc:
            self.warnings.warning("follow", "following the cluster failed: %s (retried at the next heartbeat)", exc)
        return adopted

    async def _adopt(self, pulse: Pulse) -> bool:
        """Adopt the pulse's view; False when it was not (the live brokers changed: the next one)."""
        broker = self.broker
        # Fetched past their end: another broker may have claimed them before this one saw the
        # view that moves them (see handlers/fetch.py); their claims are checked in the store.
        checked = follow.take_doubted(broker)
        if broker.claims.must_check():
            # This broker's heartbeat was stale for a while (the beat just made ends that): other
            # brokers may have taken its partitions meanwhile (and for a while after: see
            # ClaimsLease.recheck_s). Those are let go of below (and read again from the store if
            # this broker leads them still); its shards' locks were checked by the heartbeat (lost
            # ones stop the broker).
            checked = broker.led_logs()
        if checked:
            follow.fence(broker, await trio.to_thread.run_sync(broker.membership.claims_lost, checked))
        # The documents the controller changed, read before adopting the pulse (this broker does
        # not write them meanwhile: it is not the controller, or it refuses such changes).
        reload = follow.documents_to_reload(broker, pulse)
        if reload:
            try:
                contents = await trio.to_thread.run_sync(self._read_documents, reload)
            except StorageError as exc:
                self.warnings.warning("documents", "cannot read %s: %s (read again at the next heartbeat)",
                                      ", ".join(reload), exc)
            else:
                follow.reload_documents(broker, contents, pulse.documents)
        members = tuple(node.node_id for node in pulse.nodes)
        if members != self._members:
            # Act on a change of the live brokers only once two heartbeats agree: while brokers
            # reconnect after the database came back, a view missing some of them would move
            # their partitions here and back (each move fences the other's writes).
            self._members = members
            return False
        wanted = follow.apply_pulse(broker, pulse)
        if wanted:
            opened = await trio.to_thread.run_sync(follow.open_partitions, broker, wanted, wall_clock_ms())
            follow.install(broker, opened)
        return True

    async def _acknowledge_catalog(self) -> None:
        broker = self.broker
        if broker.catalog_seen is not None and not broker.cluster.is_coordinator:
            digest = catalog_digest(broker.catalog_seen)
            if digest != self.acknowledged:
                await trio.to_thread.run_sync(broker.membership.acknowledge_catalog, digest)
                self.acknowledged = digest

    async def _follow_shards(self) -> None:
        """Hand over the shards another live broker is preferred for; load those taken."""
        broker = self.broker
        cluster = broker.cluster
        live = set(cluster.node_ids)
        handed_over = set()
        for shard in sorted(broker.shards):
            preferred = cluster.preferred_for_shard(shard)
            if preferred == cluster.self_id or preferred not in live:
                continue
            dropped = broker.drop_shard(shard)
            handed_over.add(shard)
            try:
                if dropped is not None:
                    log.info("node %d hands coordinator shard %d over to node %d", cluster.self_id, shard, preferred)
                    # A flush round under way may hold some of its entries: it ends first; then the
                    # rest are committed (each commit checks the lock), then the lock goes.
                    await self.durability.sync()
                    await trio.to_thread.run_sync(dropped.close)
            finally:
                # Also when that commit failed (its requests were never answered): a shard this
                # broker no longer serves must not stay locked where no broker can take it.
                await trio.to_thread.run_sync(broker.membership.release_shard, shard)
        loaded = False
        try:
            for shard in cluster.shards_of(cluster.self_id):
                if shard not in broker.shards and shard not in handed_over:
                    read = await trio.to_thread.run_sync(broker.read_shard, shard)
                    broker.load_shard(shard, wall_clock_ms(), read)
                    loaded = True
        finally:
            if loaded:  # also when a later shard failed to load (retried at the next heartbeat)
                self.durability.attach_coordinators()
                self.notify_append()

    def _read_documents(self, names: list[str]) -> dict[str, bytes | None]:
        """Worker thread: the stored bytes of these documents."""
        storage = self.broker.storage
        return {name: storage.document(name).read() for name in names}

    async def catalog_applied(self, saves_before: int) -> None:
        """The controller changed the topic catalog (its saves after number ``saves_before``):
        return once every live broker applied that version or a later one (clients told a topic
        exists then find it on any broker), or after CATALOG_WAIT_S."""
        lagging: list[int] = []
        with trio.move_on_after(CATALOG_WAIT_S):
            while True:
                digests = self.broker.store.digests_since(saves_before)
                try:
                    lagging = await trio.to_thread.run_sync(self.broker.membership.catalog_lagging, digests)
                except StorageError as exc:
                    self.warnings.warning("catalog", "cannot tell whether the brokers applied the catalog: %s", exc)
                    lagging = [-1]
                if not lagging:
                    return
                await trio.sleep(CATALOG_POLL_S)
        log.warning("brokers %s did not apply the topic catalog within %.0f s; answering anyway", lagging,
                    CATALOG_WAIT_S)

    async def forward(self, event: RequestEvent, principal: str, client_host: str) -> bytes:
        """A catalog, config or ACL change sent to a broker that is not the controller: the
        controller answers it (as Kafka's brokers forward such requests, KIP-590, in an Envelope
        carrying the client's principal and address, so its ACLs apply), so there is one writer of
        the catalog. The controller's inner response frame goes back as it is."""
        coordinator = self.broker.cluster.coordinator
        if coordinator is None or event.request is None:
            raise ProtocolError(f"API {event.api_key}: no controller now (the client retries)")
        envelope = wrap(event, principal, client_host)
        try:
            response = await call(coordinator, envelope, ENVELOPE_VERSION, EnvelopeResponse, self.broker.cluster.self_id)
        except (OSError, trio.TooSlowError) as exc:
            raise ProtocolError(f"API {event.api_key}: forwarding to the controller failed: {exc}") from None
        return unwrap_response(response)

    async def _send(self, node: Node, markers: list[RemoteMarker], results: dict[RemoteMarker, bool]) -> None:
        results.update(await send_markers(node, markers, self.broker.cluster.self_id, COORDINATOR_EPOCH))

    async def marker_loop(self) -> None:
        """Send the markers the coordinator asked for, grouped by leader, and complete what they finish."""
        broker = self.broker
        while True:
            if not broker.markers.remote.pending:
                await trio.sleep(MARKER_POLL_S)
                continue
            taken = broker.markers.remote.take()
            # A marker goes out only once its transaction's PrepareCommit/PrepareAbort is durable
            # (appended before the marker was asked for): a coordinator that dies before that
            # must not leave markers of a decision it never logged.
            await self.durability.sync()
            by_leader: dict[int, list[RemoteMarker]] = defaultdict(list)
            unreachable: list[RemoteMarker] = []
            for marker in taken:
                if marker.topic == GROUP_SHARD_TOPIC:  # a group shard's transaction completion
                    holder = broker.cluster.shard_owner(marker.partition)
                    if holder is None or holder == broker.cluster.self_id:
                        unreachable.append(marker)  # nobody holds it yet, or it is here now: retried
                    else:
                        by_leader[holder].append(marker)
                    continue
                topic = broker.topics.get(marker.topic)
                if topic is None:
                    broker.markers.remote.finish(marker, True)  # deleted meanwhile: needs no marker
                    continue
                leader = broker.cluster.leader(topic.meta.topic_id, marker.partition,
                                                topic.meta.assigned(marker.partition))
                if leader == broker.cluster.self_id:
                    unreachable.append(marker)  # led here now: the coordinator's retry writes it itself
                else:
                    by_leader[leader].append(marker)
            results: dict[RemoteMarker, bool] = dict.fromkeys(unreachable, False)
            async with trio.open_nursery() as nursery:
                for node_id, markers in by_leader.items():
                    node = broker.cluster.node(node_id)
                    if node is None or node.port == 0:
                        results.update(dict.fromkeys(markers, False))
                    else:
                        nursery.start_soon(self._send, node, markers, results)
            for marker, written in results.items():
                broker.markers.remote.finish(marker, written)
            if not all(results.values()):
                await trio.sleep(MARKER_RETRY_S)  # then asked for again, by the retry below
            if broker.coordinating:
                for txn in broker.txn_coordinators():
                    txn.retry_unwritten(wall_clock_ms())
                self.notify_append()
