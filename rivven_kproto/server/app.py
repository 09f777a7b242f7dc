"""The trio shell around the broker: listeners, one task per connection, background duties.

``serve(config, task_status=...)`` opens the broker, starts listening, reports the bound port
through ``task_status`` and runs until cancelled or :meth:`Server.shutdown` is called; on the way
out it stops accepting, lets in-flight requests finish, flushes and marks a clean shutdown.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from typing import Any

import trio

from rivven_kproto.broker.broker import Broker
from rivven_kproto.broker.config import BrokerConfig
from rivven_kproto.broker.security.principal_mapping import NoMatchingRule
from rivven_kproto.broker.security.x500 import MalformedCertificate
from rivven_kproto.codec.connection import (
    MIN_REQUEST_FRAME,
    ProtocolError,
    RequestEvent,
    ServerConnection,
    decode_request,
    encode_response,
    encode_response_frame,
    frame_api_key,
)
from rivven_kproto.codec.schema import Response
from rivven_kproto.codec.splice import Frame

from . import duties, heap
from .cluster import ClusterFollower
from .connection_limits import (
    ACCEPT_RETRY_S,
    RESOURCE_ERRNOS,
    ConnectionLimits,
    default_max_connections,
    raise_descriptor_limit,
)
from .context import NoResponse, Redispatch, RequestContext
from .delayed import APPENDED, HEARTBEAT_FOLLOWED, DelayedResponses, Pending, group_keys, wake_keys
from .durability import Durability, wall_clock_ms
from .handlers import SERVED, newer_than_ours
from .http import serve_metrics
from .leader_forwarding import forward as forward_to_leaders
from .leader_forwarding import local_request
from .leader_forwarding import merge as merge_forwarded
from .leader_forwarding import split as split_by_leader
from .log_limits import RateLimitedLog
from .metrics import BrokerMetrics
from .peers import close as close_peers
from .peers import configure as configure_peers
from .routes import Controller, Coordinator, Leader
from .sending import send_reply
from .session import SASL_MAX_RECEIVE_BYTES, ListenerRuntime, Session, open_listeners, raw_sasl_token
from .share_disconnect import release_disconnected

log = logging.getLogger(__name__)

RECEIVE_SIZE = 256 * 1024
SHUTDOWN_GRACE_S = 5.0
CPU_THREADS = 2
# Requests (other than Produce, whose bulk is record bytes) larger than this are decoded, and
# their responses encoded, on a worker thread: tens of thousands of array elements cost Python time.
OFFLOAD_FRAME_BYTES = 64 * 1024
TLS_HANDSHAKE_TIMEOUT_S = 10.0
SLOW_REQUEST_S = 10.0  # a request answered later than this is logged (at most one line per 10 s)


class Server:
    def __init__(self, broker: Broker, config: BrokerConfig, metrics: BrokerMetrics | None = None) -> None:
        self.broker = broker
        self.config = config
        self.metrics = metrics
        self.durability = Durability(broker, config, metrics)
        # A parked request answered after a pause re-checks the claims first (broker/claims.py).
        self.delayed = DelayedResponses(wall_clock_ms, broker.claims.refresh)
        self._group_timers_moved = trio.Event()  # set: the group loop looks at the deadlines again
        # (shards dropped so far, claims valid) at the last look: a drop or a lapse since wakes parked joins.
        self._served: tuple[int, bool] = (0, True)
        broker.wake_group = self.wake_group
        if broker.storage.acknowledge_after_commit:
            # Readers see records once committed (the high watermark): wake parked fetches then.
            self.durability.after_commit = self.notify_append
        self._idle_scopes: set[trio.CancelScope] = set()
        self._busy = 0
        self.stopping = False
        # CPU-heavy work kept off the event loop (record validation, recompression, decoding and
        # encoding of large requests) runs on at most this many threads.
        self.cpu_limiter = trio.CapacityLimiter(CPU_THREADS)
        descriptors = raise_descriptor_limit()
        metrics_sockets = config.metrics_max_connections if config.metrics_listen is not None else 0
        self.limits = ConnectionLimits(
            config.max_connections or default_max_connections(descriptors, metrics_sockets), config.max_connections_per_ip
        )
        self._slot_freed = trio.Event()
        self.warnings = RateLimitedLog(log)
        self.default_runtime = ListenerRuntime(config.primary_listener, None, config.advertised)
        # Brokers sharing a store: heartbeats, leadership, the catalog, the coordinator's remote markers.
        self.follower = (
            ClusterFollower(broker, self.durability, config.advertised, self.notify_append, self.warnings,
                            lambda: self.delayed.notify([HEARTBEAT_FOLLOWED]))
            if broker.membership.heartbeat_interval_s is not None else None
        )

    # -- appends wake fetch long-polls --------------------------------------------------------

    def notify_append(self) -> None:
        self.delayed.notify([APPENDED])

    # -- connections --------------------------------------------------------------------------

    async def accept_loop(self, listener: trio.SocketListener, nursery: trio.Nursery, runtime: ListenerRuntime) -> None:
        """Accept within max.connections (else wait for a slot) and max.connections.per.ip (else close)."""
        while True:
            while self.limits.full:
                await self._slot_freed.wait()
            try:
                stream = await listener.accept()
            except trio.ClosedResourceError:
                return  # shutting down
            except OSError as exc:
                if exc.errno not in RESOURCE_ERRNOS:
                    raise
                self.warnings.warning(
                    "accept", "cannot accept a connection (%s); %d open, retrying", exc.strerror, self.limits.total
                )
                await trio.sleep(ACCEPT_RETRY_S)
                continue
            ip = _peer_name(stream).rsplit(":", 1)[0]
            if not self.limits.admit(ip):
                self.warnings.warning(
                    "per-ip", "refusing a connection from %s: max.connections.per.ip=%d reached", ip, self.limits.max_per_ip
                )
                await trio.aclose_forcefully(stream)
                continue
            nursery.start_soon(self._connection, stream, ip, runtime)

    async def _connection(self, stream: trio.SocketStream, ip: str, runtime: ListenerRuntime) -> None:
        try:
            await self.handle_connection(stream, runtime)
        finally:
            self.limits.release(ip)
            event, self._slot_freed = self._slot_freed, trio.Event()
            event.set()

    async def handle_connection(self, raw: trio.SocketStream, runtime: ListenerRuntime | None = None) -> None:
        peer = _peer_name(raw)
        client_host = "/" + peer.rsplit(":", 1)[0]  # Kafka's InetAddress form, for DescribeGroups
        connection = ServerConnection(self.config.socket_request_max_bytes)
        idle_s = self.config.connections_max_idle_ms / 1000
        runtime = runtime or self.default_runtime
        stream: trio.abc.Stream = raw
        # Fetch may answer with file regions: sent by sendfile on a plain socket, read and sent a
        # chunk at a time on TLS (sending.py), so no connection builds a whole response in memory.
        zero_copy = True
        listener_name = runtime.listener.name
        if self.metrics is not None:
            self.metrics.connections.labels(listener_name).inc()
            self.metrics.connections_opened.labels(listener_name).inc()
        session: Session | None = None
        try:
            if runtime.ssl_context is not None:
                secured = await self._tls_handshake(raw, runtime, peer)
                if secured is None:
                    self._count_auth_failure(listener_name, "TLS")
                    return
                stream = secured
            try:
                session = Session.open(runtime, self.config, self.broker, stream)
            except (NoMatchingRule, MalformedCertificate) as exc:
                self.warnings.warning("tls", "refusing the TLS client %s on %s: %s", peer, runtime.listener.name, exc)
                self._count_auth_failure(listener_name, "TLS")
                return
            while not self.stopping:
                # One scope per wait (they cost): cancelled by drain() (stopping) or at the idle deadline.
                with trio.CancelScope(deadline=trio.current_time() + idle_s) as waiting:
                    self._idle_scopes.add(waiting)
                    data = await stream.receive_some(RECEIVE_SIZE)
                self._idle_scopes.discard(waiting)
                if waiting.cancelled_caught:
                    if not self.stopping:
                        log.info("closing idle connection from %s", peer)
                    return
                if not data:
                    return
                if self.metrics is not None:
                    self.metrics.bytes_received.inc(len(data))
                connection.receive_data(bytes(data))
                while True:
                    connection.max_frame_size = self._frame_limit(session)
                    connection.min_frame_size = 0 if session.raw_tokens else MIN_REQUEST_FRAME
                    if (frame := connection.next_frame()) is None:
                        break
                    self._busy += 1
                    api_key = None
                    reply: bytes | Frame | None
                    try:
                        if session.raw_tokens:
                            reply = raw_sasl_token(session, frame, wall_clock_ms())
                        else:
                            received = time.perf_counter()
                            event = await self._decode(frame)
                            api_key = event.api_key
                            if self.metrics is not None:
                                self.metrics.observe_queue(api_key, time.perf_counter() - received)
                            reply = await self.dispatch(event, client_host, session, zero_copy=zero_copy)
                    finally:
                        self._busy -= 1
                    if session.failed_authentication:
                        self.warnings.info("authentication", "authentication of %r from %s failed (%s)", session.user,
                                           peer, session.mechanism)
                        self._count_auth_failure(listener_name, session.mechanism or "none")
                        await trio.sleep(self.config.security.failed_authentication_delay_ms / 1000)
                    if reply is not None:
                        sending = time.perf_counter()
                        sent, spliced = await send_reply(stream, reply, self.cpu_limiter)
                        if self.metrics is not None:
                            self.metrics.bytes_sent.inc(sent)
                            if spliced:
                                self.metrics.bytes_sent_zero_copy.inc(spliced)
                            if api_key is not None:
                                self.metrics.observe_send(api_key, time.perf_counter() - sending)
                    if session.failed_authentication:
                        return
        except ProtocolError as exc:
            self.warnings.warning("protocol", "closing connection from %s: %s", peer, exc)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        except Exception:
            log.exception("closing connection from %s after an internal error", peer)
        finally:
            await trio.aclose_forcefully(stream)
            if session is not None and session.share_sessions and release_disconnected(self.broker, session):
                self.notify_append()  # parked share fetches may acquire what the member held
            if self.metrics is not None:
                self.metrics.connections.labels(listener_name).dec()
                self.metrics.connections_closed.labels(listener_name).inc()

    def _count_auth_failure(self, listener_name: str, mechanism: str) -> None:
        if self.metrics is not None:
            self.metrics.authentication_failures.labels(listener_name, mechanism).inc()

    def _frame_limit(self, session: Session) -> int:
        """Kafka's bound on what an unauthenticated SASL client may send (sasl.server.max.receive.size)."""
        if session.sasl is not None and not session.sasl.authenticated:
            return min(self.config.socket_request_max_bytes, SASL_MAX_RECEIVE_BYTES)
        return self.config.socket_request_max_bytes

    async def _tls_handshake(self, raw: trio.SocketStream, runtime: ListenerRuntime, peer: str) -> trio.SSLStream[trio.SocketStream] | None:
        """The TLS handshake, bounded in time; a failure closes only this connection, with a log line."""
        assert runtime.ssl_context is not None
        stream = trio.SSLStream(raw, runtime.ssl_context, server_side=True)
        with trio.move_on_after(TLS_HANDSHAKE_TIMEOUT_S):
            try:
                await stream.do_handshake()
                return stream
            except trio.BrokenResourceError as exc:
                self.warnings.warning("tls", "TLS handshake with %s on %s failed: %s", peer, runtime.listener.name, exc.__cause__ or exc)
                return None
        self.warnings.warning("tls", "TLS handshake with %s on %s timed out", peer, runtime.listener.name)
        return None

    async def _decode(self, frame: bytes) -> RequestEvent:
        handler = SERVED.get(frame_api_key(frame)) if len(frame) > OFFLOAD_FRAME_BYTES else None
        if handler is not None and not handler.decode_inline:
            return await trio.to_thread.run_sync(decode_request, frame, limiter=self.cpu_limiter)
        return decode_request(frame)

    async def dispatch(
        self, event: RequestEvent, client_host: str = "", session: Session | None = None, *, zero_copy: bool = False,
        forwarded: bool = False,
    ) -> bytes | Frame | None:
        """Handle one request; ``zero_copy``: the reply may be a :class:`Frame` with file regions
        (the caller sends it with ``send_reply``, which releases them); ``forwarded``: a request
        another broker forwarded in an Envelope (handled here, never forwarded again)."""
        started = time.perf_counter()
        session = session or Session.plaintext(self.default_runtime)
        if not session.may_call(event.api_key, wall_clock_ms()):
            if session.sasl is not None and session.sasl.authenticated:
                raise ProtocolError(f"{session.listener_name}: the authentication session of {session.principal} "
                                    "expired (connections.max.reauth.ms) and the client did not re-authenticate")
            raise ProtocolError(f"{session.listener_name}: API {event.api_key} before SASL authentication")
        if event.request is None:
            log.info("API %d v%d is newer than ours; answering UNSUPPORTED_VERSION", event.api_key, event.api_version)
            return newer_than_ours(event.header.correlation_id)
        handler = SERVED.get(event.api_key)
        if handler is None or event.api_version not in handler.versions:
            raise ProtocolError(f"API {event.api_key} v{event.api_version} is not served")
        # One clock reading per request: while this broker's claims may have lapsed (its heartbeat
        # stale), it answers for no partition and no coordinator shard (broker/claims.py).
        self.broker.claims.refresh()
        route = handler.route
        key = route.key(event.request, event.api_version) if isinstance(route, Coordinator) else None
        if key is not None and not self.broker.coordinates(key):
            raise ProtocolError(f"API {event.api_key} for {key!r} sent to node {self.config.node_id}, which does not "
                                "coordinate its shard (the client looks the coordinator up again)")
        if (self.follower is not None and isinstance(handler.route, Controller)
                and not self.broker.cluster.is_coordinator and not forwarded):
            return await self.follower.forward(event, session.principal, client_host)
        ctx = RequestContext(
            self.broker, self.config, wall_clock_ms(), event.header.client_id, client_host, event.api_version,
            session=session, zero_copy=zero_copy,
        )
        coordinator_writes, critical = self.broker.coordinator_writes, self.broker.work.critical_submitted
        catalog_saves = self.broker.store.saves
        request = event.request
        shape = handler.route.shape if isinstance(handler.route, Leader) and self.follower is not None else None
        forwarding = split_by_leader(ctx, shape, request) if shape is not None else None
        leader_answers: dict[tuple[str, int], Any] = {}
        if shape is not None and forwarding is not None:  # a client with a stale view of the leaders: served all the same
            leader_answers = await forward_to_leaders(ctx, shape, event.api_version, forwarding)
            if self.metrics is not None:
                self.metrics.observe_forwarded(event.api_key, len(leader_answers))
            request = local_request(forwarding, leader_answers)
        if handler.prepare is not None:
            await handler.prepare(ctx, request, self.cpu_limiter)
            ctx.now_ms = wall_clock_ms()
        self.broker.claims.refresh()  # again after the waits above: the broker may have been paused meanwhile
        reply = handler.handle(ctx, request, event.api_version)
        if isinstance(reply, Redispatch):
            return await self._redispatch(reply, event, session)
        if handler.moves_group_timers:
            self.group_timers_moved()
        self.wake_unserved_groups()
        response: Response | NoResponse = await self.delayed.wait(reply) if isinstance(reply, Pending) else reply
        if ctx.appended:
            self.notify_append()
        await self.durability.after_request(ctx, coordinator_writes, critical)
        if self.follower is not None and self.broker.store.saves != catalog_saves:
            await self.follower.catalog_applied(catalog_saves)
        if fenced := [partition for partition in [*ctx.touched, *ctx.shares_touched] if partition.fenced]:
            if handler.on_fenced is None:
                raise ProtocolError("a partition this request wrote moved to another broker before the write was "
                                    "durable (the client retries with the new leader)")
            response = handler.on_fenced(response, fenced)
        if shape is not None and forwarding is not None and not isinstance(response, NoResponse):
            response = merge_forwarded(shape, event.request, response, leader_answers)
        elapsed = time.perf_counter() - started
        if self.metrics is not None:
            self.metrics.observe_request(event.api_key, elapsed, response, event.api_version)
        if elapsed > SLOW_REQUEST_S:
            # INFO: a long poll or a rebalance waits by design; the rest says where a client's time went.
            self.warnings.info("slow-request", "a request took %.1f s to answer: API %d v%d, correlation id %d, "
                                  "client %s (%s)", elapsed, event.api_key, event.api_version,
                                  event.header.correlation_id, event.header.client_id, client_host)
        if isinstance(response, NoResponse):
            return None
        encode = encode_response_frame if zero_copy else encode_response
        if event.frame_size > OFFLOAD_FRAME_BYTES and not handler.decode_inline:
            return await trio.to_thread.run_sync(encode, event.header, response, limiter=self.cpu_limiter)
        return encode(event.header, response)

    async def _redispatch(self, reply: Redispatch, event: RequestEvent, session: Session) -> bytes:
        """A handler answering with another request's answer (an Envelope's inner request, which
        runs its own pipeline, effects included, as its client's and is never forwarded again)."""
        inner = await self.dispatch(reply.event, reply.client_host, session.forwarded_for(reply.principal),
                                    forwarded=True)
        assert not isinstance(inner, Frame)  # only a client connection's Fetch answers with file regions
        return encode_response(event.header, reply.answer(inner))

    def wake_group(self, group_id: str) -> None:
        """The effect a group coordinator reports when it answered a parked JoinGroup/SyncGroup
        (an operation or a timer did): that group's parked requests look again."""
        self.delayed.notify(wake_keys((group_id,)))

    def wake_unserved_groups(self) -> None:
        """Every parked group request once a shard stopped being served here (handed over, or the
        claims lapsed): those of its groups answer COORDINATOR_NOT_AVAILABLE instead of waiting out
        their timeout."""
        served = (self.broker.shards_dropped, self.broker.claims.valid)
        if served != self._served and (served[0] != self._served[0] or not served[1]):
            self.delayed.notify(group_keys(self.delayed.parked_keys()))
        self._served = served

    # -- lifecycle ----------------------------------------------------------------------------

    async def background(self) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.durability.run)
            nursery.start_soon(duties.retention_loop, self)
            nursery.start_soon(duties.transaction_loop, self)
            nursery.start_soon(duties.group_loop, self)
            if self.metrics is not None:
                nursery.start_soon(duties.loop_lag, self.metrics)
            if self.follower is not None and self.broker.membership.heartbeat_interval_s is not None:
                # A shared store: this broker's registration, the cluster's leadership, remote markers.
                nursery.start_soon(self.follower.heartbeat_loop, self.broker.membership.heartbeat_interval_s)
                nursery.start_soon(self.follower.marker_loop)

    def group_timers_moved(self) -> None:
        """A group request may have armed a timer earlier than the one the group loop sleeps for."""
        self._group_timers_moved.set()

    async def drain(self) -> None:
        """Stop reading new requests; wait (bounded) for in-flight ones to finish."""
        self.stopping = True
        self.notify_append()
        self.delayed.close()
        for scope in list(self._idle_scopes):
            scope.cancel()
        with trio.move_on_after(SHUTDOWN_GRACE_S):
            while self._busy:
                await trio.sleep(0.01)


def _peer_name(stream: trio.SocketStream) -> str:
    try:
        host, port = stream.socket.getpeername()[:2]
        return f"{host}:{port}"
    except OSError:
        return "?"


async def _open_broker(config: BrokerConfig) -> Broker:
    """Open (recover) the broker on a worker thread, so the health endpoints answer meanwhile; a
    standby waits there for the serving broker to stop, and is abandoned if we are stopped first."""
    return await trio.to_thread.run_sync(
        lambda: Broker(config, wall_clock_ms()), abandon_on_cancel=config.storage_standby)


async def serve(config: BrokerConfig, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
    """Run the broker until cancelled; ``task_status.started(port)`` (the first listener's) once listening.

    With a metrics endpoint it opens first and recovery runs on a worker thread, so /healthz and
    /readyz (503 until the listeners are open) answer during a long recovery.
    """
    metrics = BrokerMetrics(config.metrics_per_partition, config.metrics_max_age_ms) if config.metrics_listen is not None else None
    raise_descriptor_limit()  # before the broker opens: the log sizes its descriptor cache by the limit
    async with trio.open_nursery() as endpoint:
        if metrics is not None and config.metrics_listen is not None:
            host, port = config.metrics_listen
            sockets = await trio.open_tcp_listeners(port, host=host)
            bound_port = sockets[0].socket.getsockname()[1]
            log.info("metrics on http://%s:%d/metrics (also /healthz, /readyz)", host, bound_port)
            endpoint.start_soon(functools.partial(
                serve_metrics, sockets, metrics, max_connections=config.metrics_max_connections,
                idle_s=config.metrics_connections_max_idle_ms / 1000))
            started = time.perf_counter()
            broker = await _open_broker(config)
            metrics.recovery_seconds.set(time.perf_counter() - started)
        elif config.storage_standby:
            broker = await _open_broker(config)
        else:
            broker = Broker(config, wall_clock_ms())
        try:
            await _run(broker, config, metrics, task_status)
        finally:
            endpoint.cancel_scope.cancel()


async def _run(broker: Broker, config: BrokerConfig, metrics: BrokerMetrics | None, task_status: Any) -> None:
    if broker.config.node_id != config.node_id:  # assigned by the store (no --node-id)
        config = dataclasses.replace(config, node_id=broker.config.node_id)
    try:
        config, bound = await open_listeners(config)
    except BaseException:
        broker.close()
        raise
    server = Server(broker, config, metrics)
    server.default_runtime = bound[0][1]
    if server.follower is not None:
        try:  # the brokers of a cluster connect to each other on the inter-broker listener, secured as it is
            inter_broker = config.inter_broker()
            configure_peers(config.node_id, inter_broker)
        except BaseException:
            for sockets, _ in bound:
                for socket_listener in sockets:
                    await socket_listener.aclose()
            broker.close()
            raise
        server.follower.peer_endpoint = next(
            runtime.advertised for _, runtime in bound if runtime.listener.name == inter_broker.listener.name)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(server.background)
            async with trio.open_nursery() as connections:
                for sockets, runtime in bound:
                    for listener in sockets:
                        connections.start_soon(server.accept_loop, listener, connections, runtime)
                for index, (_, runtime) in enumerate(bound):
                    name, (host, advertised_port) = runtime.listener.name, runtime.advertised
                    where = f"{runtime.listener.host}:{runtime.listener.port}"
                    if index == 0:  # the line tools and tests wait for
                        log.info("listening on %s advertised as %s:%d", where, host, advertised_port)
                    else:
                        log.info("listener %s (%s) listening on %s advertised as %s:%d",
                                 name, runtime.listener.protocol, where, host, advertised_port)
                    if runtime.listener.protocol == "PLAINTEXT" and not _loopback(runtime.listener.host):
                        log.warning("listener %s accepts unauthenticated, unencrypted clients on %s", name, where)
                if metrics is not None:
                    metrics.broker, metrics.ready = broker, True
                heap.settle()  # before the first client: full collections skip start-up's heap
                task_status.started(config.listen_port)
                try:
                    await trio.sleep_forever()
                finally:
                    if metrics is not None:
                        metrics.ready = False
                    with trio.CancelScope(shield=True):
                        for sockets, _ in bound:
                            for listener in sockets:
                                await listener.aclose()
                        await server.drain()
                    connections.cancel_scope.cancel()
            nursery.cancel_scope.cancel()
    finally:
        if metrics is not None:
            metrics.broker = None
        heap.release()
        with trio.CancelScope(shield=True):
            await close_peers(config.node_id)  # its idle connections to the other brokers
            await trio.to_thread.run_sync(broker.close)
        log.info("shut down cleanly")


def _loopback(host: str) -> bool:
    return host in ("localhost", "::1") or host.startswith("127.")
