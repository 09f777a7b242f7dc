"""Requests this broker sends to the others of its cluster: transaction markers, topic creation,
a leader's AddPartitionsToTxn to the coordinator (KIP-890: verify, or with transactions V2 add,
a producer's partition before its first transactional batch there is written), and the requests
a follower forwards (to a partition's leader, or in an Envelope to the controller or coordinator).

When a transaction ends, the coordinator (the broker holding the coordinator lease) writes its
markers on the partitions it leads itself and sends a WriteTxnMarkers request to the leader of
each other partition, as Kafka's coordinator does; the leader answers once the markers are
durable. A broker that is not the controller asks it to create the topics a client's Metadata
request auto-creates.

Every request goes through the connection driver the client uses too (``net/connection.py``), as
Kafka's broker uses its clients module's NetworkClient: one definition of framing, correlation ids, TLS
and SASL. Peers run the same software, so each request names its version (no ApiVersions round
trip). The connection goes to the address of the peer's inter-broker listener as it registered
it and is secured as that listener requires (Kafka's ``inter.broker.listener.name``): TLS,
verified against the listener's trust store, and SASL (SaslHandshake, SaslAuthenticate) with the
broker's own credentials, so the other broker's authorizer sees this broker's principal (a super
user, say), never ANONYMOUS. :func:`configure` sets how a broker (by node id) connects. Answered
connections are kept for the next request to the same peer (``peer_pool.py``, one request at a
time on each) until :func:`close`; one the peer closed while idle (it restarted) is retried once
on a new connection.
"""
from __future__ import annotations

import logging
import struct
from collections import defaultdict
from typing import TypeVar

import trio

from rivven_kproto.auth.sasl_client import ClientSecurity
from rivven_kproto.broker.cluster import Node
from rivven_kproto.broker.config import InterBrokerClient
from rivven_kproto.broker.markers.remote import RemoteMarker
from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction,
)
from rivven_kproto.codec.messages.create_topics import (
    CreatableTopic,
    CreateTopicsRequest,
    CreateTopicsResponse,
)
from rivven_kproto.codec.messages.sasl_authenticate import SaslAuthenticateRequest
from rivven_kproto.codec.messages.write_txn_markers import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from rivven_kproto.codec.schema import Request, Response
from rivven_kproto.net import protocol
from rivven_kproto.net.connection import BrokerConnection
from rivven_kproto.net.errors import (
    ClientError,
    ConnectionLostError,
    KafkaResponseError,
    ProtocolViolationError,
)
from rivven_kproto.net.versions import NegotiatedVersions

from .peer_pool import PeerKey, PeerPool
from .tls import client_context

log = logging.getLogger(__name__)

PEER_CLIENT_PREFIX = "kproto-broker-"  # the client id of the requests brokers of our cluster send each other
WRITE_TXN_MARKERS_VERSION = 1
ADD_PARTITIONS_TO_TXN_VERSION = 5  # the broker-to-coordinator form (v4+), with TRANSACTION_ABORTABLE
CREATE_TOPICS_VERSION = 4  # the first with -1 (the controller's default) partitions and replication factor
PEER_TIMEOUT_S = 30.0  # a leader that does not answer within this is asked again later
MAX_RESPONSE_BYTES = 16 * 1024 * 1024
SASL_AUTHENTICATE_VERSION = 1  # the first with a session lifetime
# Peers run the same software: no ApiVersions round trip. Each request names its version; this is
# the one SASL exchange (auth/sasl_client) leaves to the driver.
_FIXED_VERSIONS = NegotiatedVersions.fixed({SaslAuthenticateRequest: SASL_AUTHENTICATE_VERSION})
_SIZE = struct.Struct(">i")
R = TypeVar("R", bound=Response)
# How each broker of this process (by node id) connects to the others; absent: plaintext, no SASL.
_links: dict[int, ClientSecurity] = {}
# Its idle connections to them, from configure to close; absent: one connection per request.
_pools: dict[int, PeerPool] = {}


def configure(self_id: int, client: InterBrokerClient) -> None:
    """Broker ``self_id`` connects to the others as ``client`` says, keeping idle connections
    until :func:`close`. ConfigError when its TLS trust or key store cannot be loaded."""
    listener = client.listener
    context = client_context(client.security) if listener.uses_tls else None
    _links[self_id] = ClientSecurity(listener.protocol, context, client.mechanism, client.username, client.password)
    _pools.setdefault(self_id, PeerPool())


async def close(self_id: int) -> None:
    """Broker ``self_id`` stops: forget how it connects and close its idle connections (one still
    answering a request is closed by its caller, cancelled with the broker)."""
    _links.pop(self_id, None)
    pool = _pools.pop(self_id, None)
    if pool is not None:
        await pool.aclose()


def peer_client_id(node_id: int) -> str:
    return f"{PEER_CLIENT_PREFIX}{node_id}"


def markers_request(markers: list[RemoteMarker], coordinator_epoch: int) -> WriteTxnMarkersRequest:
    """One entry per (producer, epoch, result), its partitions grouped by topic."""
    grouped: dict[tuple[int, int, bool], dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for marker in markers:
        grouped[(marker.producer_id, marker.producer_epoch, marker.commit)][marker.topic].append(marker.partition)
    return WriteTxnMarkersRequest(markers=[
        WritableTxnMarker(
            producer_id=pid, producer_epoch=epoch, transaction_result=commit, coordinator_epoch=coordinator_epoch,
            topics=[WritableTxnMarkerTopic(name=name, partition_indexes=sorted(indexes))
                    for name, indexes in sorted(topics.items())],
        )
        for (pid, epoch, commit), topics in grouped.items()
    ])


def marker_errors(response: WriteTxnMarkersResponse) -> dict[tuple[int, str, int], Errors]:
    """(producer id, topic, partition) -> the leader's error code."""
    errors: dict[tuple[int, str, int], Errors] = {}
    for result in response.markers:
        for topic in result.topics:
            for partition in topic.partitions:
                errors[(result.producer_id, topic.name, partition.partition_index)] = Errors(partition.error_code)
    return errors


async def send_markers(leader: Node, markers: list[RemoteMarker], self_id: int, coordinator_epoch: int) -> dict[
        RemoteMarker, bool]:
    """Ask ``leader`` to write ``markers``; which of them it wrote (durably). Failures (the
    leader gone, moved, or not answering) leave them unwritten, to be asked for again."""
    request = markers_request(markers, coordinator_epoch)
    written = dict.fromkeys(markers, False)
    try:
        response = await call(leader, request, WRITE_TXN_MARKERS_VERSION, WriteTxnMarkersResponse, self_id)
    except (OSError, trio.TooSlowError) as exc:
        log.info("WriteTxnMarkers to node %d (%s:%d) failed: %s; asked again later", leader.node_id,
                 *leader.peer_address, exc)
        return written
    errors = marker_errors(response)
    for marker in markers:
        error = errors.get((marker.producer_id, marker.topic, marker.partition), Errors.UNKNOWN_SERVER_ERROR)
        if error in (Errors.NONE, Errors.UNKNOWN_TOPIC_OR_PARTITION):  # a deleted topic needs no marker
            written[marker] = True
        else:
            log.info("node %d did not write the marker on %s-%d: %s", leader.node_id, marker.topic,
                     marker.partition, error.name)
    return written


async def create_topics(controller: Node, names: list[str], self_id: int, timeout_ms: int) -> dict[str, Errors]:
    """Ask the controller to create these topics with its defaults (a client's Metadata request
    auto-creates them here); each topic's error (NONE: created, TOPIC_ALREADY_EXISTS: someone
    was first). The controller answers once every live broker has the new catalog."""
    request = CreateTopicsRequest(
        topics=[CreatableTopic(name=name, num_partitions=-1, replication_factor=-1, assignments=[], configs=[])
                for name in names],
        timeout_ms=timeout_ms, validate_only=False)
    response = await call(controller, request, CREATE_TOPICS_VERSION, CreateTopicsResponse, self_id)
    return {result.name: Errors(result.error_code) for result in response.topics}


async def add_partitions_to_txn(
    coordinator: Node, self_id: int, transactional_id: str, producer_id: int, producer_epoch: int,
    partitions: list[tuple[str, int]], verify_only: bool,
) -> dict[tuple[str, int], Errors]:
    """Ask the coordinator to verify (V1) or add (V2) a producer's partitions; the error per
    partition. The caller maps a failure to reach it (OSError, TooSlowError) itself."""
    topics: dict[str, list[int]] = defaultdict(list)
    for topic, index in partitions:
        topics[topic].append(index)
    request = AddPartitionsToTxnRequest(transactions=[AddPartitionsToTxnTransaction(
        transactional_id=transactional_id, producer_id=producer_id, producer_epoch=producer_epoch,
        verify_only=verify_only,
        topics=[AddPartitionsToTxnTopic(name=name, partitions=sorted(indexes)) for name, indexes in topics.items()],
    )])
    response = await call(coordinator, request, ADD_PARTITIONS_TO_TXN_VERSION, AddPartitionsToTxnResponse, self_id)
    errors = dict.fromkeys(partitions, Errors(response.error_code) if response.error_code else Errors.UNKNOWN_SERVER_ERROR)
    for result in response.results_by_transaction or ():
        for topic_result in result.topic_results:
            for partition in topic_result.results_by_partition:
                key = (topic_result.name, partition.partition_index)
                if key in errors:
                    errors[key] = Errors(partition.partition_error_code)
    return errors


async def call(node: Node, request: Request, version: int, response_cls: type[R], self_id: int) -> R:
    """One request of this broker's own (client id ``kproto-broker-<id>``) to ``node`` at
    ``version``, and its response, through the connection driver (``net/``) on a connection secured
    as broker ``self_id`` was configured to: an idle one of its pool, or a new one. The
    coordinator's markers and a follower's forwarding of a client's request both go this way.
    OSError when the peer cannot be reached, refuses this broker's TLS or SASL, or breaks the
    connection; trio.TooSlowError when it does not answer within :data:`PEER_TIMEOUT_S`."""
    pool = _pools.get(self_id)
    key = (node.node_id, *node.peer_address)
    with trio.fail_after(PEER_TIMEOUT_S):
        try:
            if pool is not None and (idle := await pool.take(key)) is not None:
                received = idle.bytes_received
                try:
                    return await _request(idle, request, version, response_cls, pool, key)
                except ConnectionLostError as exc:
                    if idle.bytes_received != received:
                        raise
                    # Lost before any byte of the answer: the peer closed the idle connection
                    # (it restarted, or timed it out) and never saw the request. Once more, anew.
                    log.debug("idle connection to node %d lost (%s); asking on a new one", node.node_id, exc)
            return await _request(await _connect(node, self_id), request, version, response_cls, pool, key)
        except ClientError as exc:
            raise OSError(f"node {node.node_id}: {exc}") from None


async def _request(connection: BrokerConnection, request: Request, version: int, response_cls: type[R],
                   pool: PeerPool | None, key: PeerKey) -> R:
    """One request on ``connection``, given back to the pool once answered; closed on any failure
    or cancellation (its stream may be out of step), or after it when there is no pool."""
    try:
        response = await connection.request(request, version, response_cls)
    except BaseException:
        await connection.aclose()
        raise
    if pool is None:
        await connection.aclose()
    else:
        await pool.give(key, connection)
    return response


async def _connect(node: Node, self_id: int) -> BrokerConnection:
    """A connection to ``node``'s inter-broker listener, TLS and SASL done; OSError when refused."""
    security = _links.get(self_id)
    host, port = node.peer_address
    try:
        return await BrokerConnection.connect(
            host, port, node_id=node.node_id, client_id=peer_client_id(self_id), security=security,
            versions=_FIXED_VERSIONS, max_response_size=MAX_RESPONSE_BYTES)
    except KafkaResponseError as exc:  # with the versions fixed, only SASL answers an error at connect
        who = f"{security.mechanism} as {security.username}" if security is not None else "?"
        raise OSError(f"SASL {who} refused: {exc.error.name} {exc.message}") from None


def decode_response(frame: bytes, request: Request, version: int, response_cls: type[R]) -> R:
    """The body of a size-prefixed response frame (a forwarded request's answer, out of its
    envelope); ValueError when it is not one."""
    try:
        response = protocol.decode_response(frame[_SIZE.size:], request.API_KEY, version)
    except ProtocolViolationError as exc:
        raise ValueError(str(exc)) from None
    if not isinstance(response, response_cls):
        raise ValueError(f"expected {response_cls.__name__}, got {type(response).__name__}")
    return response
