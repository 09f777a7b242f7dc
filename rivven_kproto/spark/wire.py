"""A compact, blocking Kafka protocol client on our codec: just what the Spark source needs.

Spark calls the data source from plain Python processes (the driver-side planner and one worker
per task), one request at a time, so a blocking socket is the natural fit; the trio client in
:mod:`rivven_kproto.client` would add an event loop per call for nothing. This module speaks to any
Kafka-compatible broker: versions come from its ApiVersions answer intersected with our codec's
ranges, the leader of each partition from Metadata.

TLS and SASL (PLAIN, SCRAM) come from Kafka's client properties (the source's ``kafka.`` options),
through :mod:`rivven_kproto.client.security`. Served here: ApiVersions, Metadata, ListOffsets (by spec -2/-1 or by timestamp, with an isolation
level) and Fetch (v4+, so isolation level, last stable offset and aborted transactions).
"""

from __future__ import annotations

import socket
import ssl
import struct
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TypeVar

from rivven_kproto.auth.sasl_client import SaslRefused, sasl_exchange
from rivven_kproto.client.security import ClientSecurity
from rivven_kproto.codec import messages as _messages  # noqa: F401  (registers every declaration)
from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.api_versions import ApiVersionsResponse
from rivven_kproto.codec.messages.fetch import (
    FetchPartition,
    FetchRequest,
    FetchResponse,
    FetchTopic,
    PartitionData,
)
from rivven_kproto.codec.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
)
from rivven_kproto.codec.messages.metadata import MetadataRequest, MetadataRequestTopic, MetadataResponse
from rivven_kproto.codec.schema import Request, Response
from rivven_kproto.net.errors import ClientError, ProtocolViolationError, UnsupportedApiError
from rivven_kproto.net.protocol import ClientProtocol
from rivven_kproto.net.versions import NegotiatedVersions, api_versions_exchange

FETCH_MIN_VERSION = 4  # isolation level, last stable offset, aborted transactions
MAX_RESPONSE_SIZE = 512 * 1024 * 1024
RECEIVE_SIZE = 1024 * 1024
RETRY_BACKOFF_S = 0.1
RETRIES = 50

_SIZE = struct.Struct(">i")
R = TypeVar("R", bound=Response)


class KafkaWireError(Exception):
    """A broker error code, an unreachable broker or bytes we cannot decode."""

    def __init__(self, message: str, code: int = Errors.UNKNOWN_SERVER_ERROR) -> None:
        super().__init__(message)
        self.code = code

    @property
    def retriable(self) -> bool:
        return Errors.for_code(self.code).retriable


def check(code: int, context: str) -> None:
    if code:
        error = Errors.for_code(code)
        raise KafkaWireError(f"{context}: {error.name} ({code}): {error.message}", code)


def parse_bootstrap(text: str) -> list[tuple[str, int]]:
    """``host:port[,host:port...]``; ValueError when malformed."""
    out = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        host = host.removeprefix("[").removesuffix("]")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"bad broker address {item!r} in kafka.bootstrap.servers: expected HOST:PORT")
        out.append((host, int(port)))
    if not out:
        raise ValueError("kafka.bootstrap.servers is empty")
    return out


class Connection:
    """One blocking TCP connection with negotiated API versions."""

    def __init__(self, host: str, port: int, *, timeout: float = 30.0, client_id: str = "rivven-spark",
                 security: ClientSecurity | None = None) -> None:
        self.address = f"{host}:{port}"
        self.client_id = client_id
        try:
            sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as exc:
            raise KafkaWireError(f"cannot connect to {self.address}: {exc}", Errors.NETWORK_EXCEPTION) from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sock = sock
        self._protocol = ClientProtocol(client_id, MAX_RESPONSE_SIZE)
        self._versions = NegotiatedVersions([])
        try:
            if security is not None and security.ssl_context is not None:
                self._sock = self._tls(sock, security.ssl_context, host)
            self._negotiate()
            if security is not None and security.uses_sasl:
                self._authenticate(security)
        except BaseException:
            self.close()
            raise

    def _tls(self, sock: socket.socket, context: ssl.SSLContext, host: str) -> socket.socket:
        try:
            return context.wrap_socket(sock, server_hostname=host)
        except (OSError, ssl.SSLError) as exc:
            sock.close()
            raise KafkaWireError(f"TLS handshake with {self.address} failed: {exc}", Errors.NETWORK_EXCEPTION) from None

    def _authenticate(self, security: ClientSecurity) -> None:
        """Carry :func:`sasl_exchange`'s requests (SaslHandshake v1, then SaslAuthenticate rounds)."""
        exchange = sasl_exchange(security)
        try:
            step = next(exchange)
            while True:
                step = exchange.send(self.request(*step))
        except StopIteration:
            return
        except SaslRefused as exc:
            error = Errors.for_code(exc.error_code)
            raise KafkaWireError(f"SASL {security.mechanism} with {self.address}: {error.name}: {exc.message}",
                                 exc.error_code) from None

    def _negotiate(self) -> None:
        exchange = api_versions_exchange("rivven-kproto-spark", "0.1.0")
        request, version = next(exchange)
        try:
            while True:
                request, version = exchange.send(self.request(request, version, ApiVersionsResponse))
        except StopIteration as done:
            version, response = done.value
        check(response.error_code, f"ApiVersions with {self.address}")
        self._versions = NegotiatedVersions(response.api_keys)

    def version_for(self, request_cls: type[Request], min_version: int = 0) -> int:
        try:
            return self._versions.version_for(request_cls, min_version)
        except UnsupportedApiError as exc:
            raise KafkaWireError(f"{self.address}: {exc}", Errors.UNSUPPORTED_VERSION) from None

    def request(self, request: Request, version: int | None, response_cls: type[R]) -> R:
        """Send ``request`` at ``version`` (None: the negotiated one) and wait for its response."""
        return self.receive(self.send(request, version), response_cls)

    def send(self, request: Request, version: int | None = None) -> tuple[int, Request, int]:
        """Write a request without waiting: the broker answers in order, so callers may pipeline."""
        if version is None:
            version = self.version_for(type(request))
        try:
            correlation_id, data = self._protocol.send_request(request, version)
        except ClientError as exc:
            raise KafkaWireError(str(exc), Errors.INVALID_REQUEST) from None
        try:
            self._sock.sendall(data)
        except OSError as exc:
            self.close()
            raise KafkaWireError(f"connection to {self.address} failed: {exc}", Errors.NETWORK_EXCEPTION) from None
        return correlation_id, request, version

    def receive(self, sent: tuple[int, Request, int], response_cls: type[R]) -> R:
        """The response to a request from :meth:`send` (responses must be collected in order)."""
        correlation_id = sent[0]
        try:
            while (received := self._protocol.next_response()) is None:
                data = self._sock.recv(RECEIVE_SIZE)
                if not data:
                    raise OSError(f"{self.address} closed the connection")
                self._protocol.receive_data(data)
        except OSError as exc:
            self.close()
            raise KafkaWireError(f"connection to {self.address} failed: {exc}", Errors.NETWORK_EXCEPTION) from None
        except ProtocolViolationError as exc:
            self.close()
            raise KafkaWireError(f"{self.address}: {exc}") from None
        answered, response = received
        if answered != correlation_id or not isinstance(response, response_cls):
            self.close()
            raise KafkaWireError(f"{self.address} answered correlation id {answered}, expected {correlation_id}")
        return response

    def close(self) -> None:
        try:
            self._sock.close()
        except OSError:
            pass


@dataclass
class TopicMeta:
    name: str
    error: int
    internal: bool = False
    leaders: dict[int, int] = field(default_factory=dict)  # partition -> leader node id


@dataclass
class PartitionOffsets:
    offset: int
    timestamp: int = -1


class Cluster:
    """Bootstrap, metadata and one connection per broker; blocking and single-threaded."""

    def __init__(self, bootstrap: str, *, timeout: float = 30.0, security: ClientSecurity | None = None) -> None:
        self.bootstrap = parse_bootstrap(bootstrap)
        self.timeout = timeout
        self.security = security
        self.brokers: dict[int, tuple[str, int]] = {}
        self._connections: dict[tuple[str, int], Connection] = {}

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for connection in self._connections.values():
            connection.close()
        self._connections.clear()

    def _connect(self, address: tuple[str, int]) -> Connection:
        connection = self._connections.get(address)
        if connection is None:
            connection = self._connections[address] = Connection(*address, timeout=self.timeout, security=self.security)
        return connection

    def _drop(self, connection: Connection) -> None:
        for address, known in list(self._connections.items()):
            if known is connection:
                del self._connections[address]
        connection.close()

    def any_connection(self) -> Connection:
        if self._connections:
            return next(iter(self._connections.values()))
        failure: Exception | None = None
        for address in self.bootstrap:
            try:
                return self._connect(address)
            except KafkaWireError as exc:
                failure = exc
        raise KafkaWireError(f"no bootstrap broker reachable: {failure}", Errors.NETWORK_EXCEPTION)

    def node(self, node_id: int) -> Connection:
        address = self.brokers.get(node_id)
        if address is None:
            self.metadata([])
            address = self.brokers.get(node_id)
            if address is None:
                raise KafkaWireError(f"no broker with id {node_id}", Errors.BROKER_NOT_AVAILABLE)
        return self._connect(address)

    def metadata(self, topics: list[str] | None) -> dict[str, TopicMeta]:
        """Topic -> partitions and leaders (None: every topic); never auto-creates topics."""
        connection = self.any_connection()
        version = connection.version_for(MetadataRequest)
        if topics is None:
            wanted: list[MetadataRequestTopic] | None = None if version >= 1 else []
        else:
            wanted = [MetadataRequestTopic(name=name) for name in topics]
        request = MetadataRequest(topics=wanted, allow_auto_topic_creation=version < 4)
        try:
            response = connection.request(request, version, MetadataResponse)
        except KafkaWireError:
            self._drop(connection)
            raise
        self.brokers = {b.node_id: (b.host, b.port) for b in response.brokers}
        out = {}
        for topic in response.topics:
            meta = TopicMeta(topic.name or "", topic.error_code, topic.is_internal)
            for partition in topic.partitions:
                meta.leaders[partition.partition_index] = partition.leader_id
            out[meta.name] = meta
        return out

    def partitions(self, topics: Iterable[str]) -> dict[str, TopicMeta]:
        """Metadata for existing topics with a leader everywhere; missing topics are left out."""
        names = sorted(set(topics))
        for _ in range(RETRIES):
            metas = self.metadata(names)
            waiting = False
            for name in names:
                meta = metas.get(name)
                if meta is None or meta.error == Errors.UNKNOWN_TOPIC_OR_PARTITION:
                    metas.pop(name, None)
                    continue
                if meta.error in (Errors.LEADER_NOT_AVAILABLE,) or any(leader < 0 for leader in meta.leaders.values()):
                    waiting = True
                elif meta.error:
                    check(meta.error, f"Metadata for topic {name}")
            if not waiting:
                return metas
            time.sleep(RETRY_BACKOFF_S)
        raise KafkaWireError(f"no leader for some partition of {names}", Errors.LEADER_NOT_AVAILABLE)

    def _by_leader(self, topic_partitions: Iterable[tuple[str, int]]) -> dict[int, list[tuple[str, int]]]:
        wanted = sorted(set(topic_partitions))
        metas = self.partitions({t for t, _ in wanted})
        grouped: dict[int, list[tuple[str, int]]] = {}
        for topic, partition in wanted:
            meta = metas.get(topic)
            if meta is None or partition not in meta.leaders:
                raise KafkaWireError(f"unknown topic-partition {topic}-{partition}", Errors.UNKNOWN_TOPIC_OR_PARTITION)
            grouped.setdefault(meta.leaders[partition], []).append((topic, partition))
        return grouped

    def list_offsets(
        self, specs: dict[tuple[str, int], int], isolation_level: int
    ) -> dict[tuple[str, int], PartitionOffsets]:
        """Resolve (topic, partition) -> timestamp spec (-2 earliest, -1 latest, or ms) to offsets.

        ``offset`` is -1 when a timestamp matches no record.
        """
        out: dict[tuple[str, int], PartitionOffsets] = {}
        for attempt in range(RETRIES):
            pending = {tp: ts for tp, ts in specs.items() if tp not in out}
            if not pending:
                break
            retry = False
            for leader, tps in self._by_leader(pending).items():
                connection = self.node(leader)
                version = connection.version_for(ListOffsetsRequest, 2)
                by_topic: dict[str, list[ListOffsetsPartition]] = {}
                for topic, partition in tps:
                    by_topic.setdefault(topic, []).append(
                        ListOffsetsPartition(partition_index=partition, timestamp=pending[(topic, partition)])
                    )
                request = ListOffsetsRequest(
                    replica_id=-1,
                    isolation_level=isolation_level,
                    topics=[ListOffsetsTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
                )
                response = connection.request(request, version, ListOffsetsResponse)
                for answer in response.topics:
                    for p in answer.partitions:
                        if p.error_code and Errors.for_code(p.error_code).retriable and attempt + 1 < RETRIES:
                            retry = True
                            continue
                        check(p.error_code, f"ListOffsets {answer.name}-{p.partition_index}")
                        out[(answer.name, p.partition_index)] = PartitionOffsets(p.offset, p.timestamp)
            if retry:
                time.sleep(RETRY_BACKOFF_S)
        missing = set(specs) - set(out)
        if missing:
            raise KafkaWireError(f"ListOffsets gave no answer for {sorted(missing)}")
        return out

    def leader_of(self, topic: str, partition: int) -> Connection:
        (leader,) = self._by_leader([(topic, partition)])
        return self.node(leader)

    def send_fetch(
        self,
        connection: Connection,
        topic: str,
        partition: int,
        offset: int,
        *,
        isolation_level: int,
        max_bytes: int,
        max_wait_ms: int = 0,
    ) -> tuple[int, Request, int]:
        """Send a single-partition Fetch (v4+) without waiting; collect it with :meth:`receive_fetch`."""
        version = connection.version_for(FetchRequest, FETCH_MIN_VERSION)
        request = FetchRequest(
            max_wait_ms=max_wait_ms,
            min_bytes=1 if max_wait_ms else 0,
            max_bytes=max_bytes,
            isolation_level=isolation_level,
            topics=[FetchTopic(topic=topic, partitions=[
                FetchPartition(partition=partition, fetch_offset=offset, partition_max_bytes=max_bytes)
            ])],
            forgotten_topics_data=[],
        )
        return connection.send(request, version)

    @staticmethod
    def receive_fetch(connection: Connection, sent: tuple[int, Request, int], topic: str, partition: int) -> PartitionData:
        """The partition's data from a Fetch answer; the caller checks its error code."""
        response = connection.receive(sent, FetchResponse)
        check(response.error_code, f"Fetch {topic}-{partition}")
        for topic_response in response.responses:
            for data in topic_response.partitions:
                if data.partition_index == partition:
                    return data
        raise KafkaWireError(f"Fetch response without {topic}-{partition}")
