"""The client proper: bootstrap, cluster metadata, per-node connections, timeouts.

``KafkaClient`` knows nothing of our broker: it bootstraps from any reachable address, learns the
brokers, the controller and the partition leaders from Metadata, and routes each request to the
node that must serve it, at the version negotiated with that node. Every request runs under
``trio.fail_after(timeout)``; the failure is a :class:`~.errors.RequestTimeoutError`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TypeVar

import trio

from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.metadata import MetadataRequest, MetadataRequestTopic, MetadataResponse
from rivven_kproto.codec.schema import Request, Response
from rivven_kproto.net.connection import BrokerConnection
from rivven_kproto.net.errors import (
    BrokerUnreachableError,
    ClientError,
    KafkaResponseError,
    RequestTimeoutError,
)
from rivven_kproto.net.versions import NegotiatedVersions, api_name

from .security import ClientSecurity

R = TypeVar("R", bound=Response)

DEFAULT_PORT = 9092
RETRY_BACKOFF_S = 0.1


def parse_bootstrap(text: str) -> list[tuple[str, int]]:
    """``host:port[,host:port...]`` (IPv6 as ``[::1]:9092``); ValueError with a reason if malformed."""
    addresses = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, port_text = item.rpartition(":")
        if not sep:
            host, port_text = item, str(DEFAULT_PORT)
        host = host.removeprefix("[").removesuffix("]")
        if not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise ValueError(f"bad broker address {item!r}: expected HOST:PORT")
        addresses.append((host, int(port_text)))
    if not addresses:
        raise ValueError("no broker address given")
    return addresses


@dataclass(frozen=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass
class PartitionInfo:
    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    offline_replicas: list[int]
    error: int = 0


@dataclass
class TopicInfo:
    name: str
    topic_id: str | None
    internal: bool
    error: int
    partitions: list[PartitionInfo] = field(default_factory=list)

    def partition(self, index: int) -> PartitionInfo:
        for info in self.partitions:
            if info.partition == index:
                return info
        raise KafkaResponseError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"topic {self.name} has no partition {index}")


@dataclass
class ClusterMetadata:
    cluster_id: str | None
    controller_id: int
    brokers: dict[int, BrokerInfo]
    topics: dict[str, TopicInfo]


def _topic_id(value: uuid.UUID) -> str | None:
    return None if value.int == 0 else str(value)


def metadata_from_response(response: MetadataResponse) -> ClusterMetadata:
    brokers = {b.node_id: BrokerInfo(b.node_id, b.host, b.port, b.rack) for b in response.brokers}
    topics = {}
    for topic in response.topics:
        name = topic.name or ""
        partitions = sorted(
            (
                PartitionInfo(
                    p.partition_index,
                    p.leader_id,
                    p.leader_epoch,
                    list(p.replica_nodes),
                    list(p.isr_nodes),
                    list(p.offline_replicas),
                    p.error_code,
                )
                for p in topic.partitions
            ),
            key=lambda p: p.partition,
        )
        topics[name] = TopicInfo(name, _topic_id(topic.topic_id), topic.is_internal, topic.error_code, partitions)
    return ClusterMetadata(response.cluster_id, response.controller_id, brokers, topics)


class KafkaClient:
    """An async Kafka client for one cluster; use as ``async with KafkaClient(...) as client``."""

    def __init__(
        self, bootstrap: str | list[tuple[str, int]], *, timeout: float = 30.0, client_id: str = "kproto",
        security: ClientSecurity | None = None,
    ) -> None:
        self.bootstrap = parse_bootstrap(bootstrap) if isinstance(bootstrap, str) else list(bootstrap)
        self.security = security
        self.timeout = timeout
        self.client_id = client_id
        self.brokers: dict[int, BrokerInfo] = {}
        self.controller_id = -1
        self._by_address: dict[str, BrokerConnection] = {}
        self._bootstrap_connection: BrokerConnection | None = None

    async def __aenter__(self) -> KafkaClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        connections = list(self._by_address.values())
        self._by_address.clear()
        self._bootstrap_connection = None
        for connection in connections:
            await connection.aclose()

    @contextmanager
    def deadline(self, what: str, timeout: float | None = None) -> Iterator[None]:
        """Bound one operation by ``timeout`` (default: the client's), failing with REQUEST_TIMED_OUT."""
        limit = self.timeout if timeout is None else timeout
        try:
            with trio.fail_after(limit):
                yield
        except trio.TooSlowError:
            raise RequestTimeoutError(f"{what} got no answer within {limit:g}s") from None

    async def _open(self, host: str, port: int, node_id: int) -> BrokerConnection:
        address = f"{host}:{port}"
        existing = self._by_address.get(address)
        if existing is not None and existing.usable:
            return existing
        with self.deadline(f"connecting to {address}"):
            connection = await BrokerConnection.connect(
                host, port, node_id=node_id, client_id=self.client_id, security=self.security
            )
        self._by_address[address] = connection
        return connection

    async def any_connection(self) -> BrokerConnection:
        """A connection to the first reachable bootstrap address (kept for reuse)."""
        if self._bootstrap_connection is not None and self._bootstrap_connection.usable:
            return self._bootstrap_connection
        failure: ClientError | None = None
        for host, port in self.bootstrap:
            try:
                self._bootstrap_connection = await self._open(host, port, -1)
                return self._bootstrap_connection
            except ClientError as exc:
                failure = exc
        if len(self.bootstrap) == 1 and failure is not None:
            raise failure
        raise BrokerUnreachableError(f"no bootstrap broker reachable ({failure.message if failure else 'none given'})")

    async def connection(self, node_id: int | None = None) -> BrokerConnection:
        """A connection to ``node_id`` (None or unknown: any bootstrap broker)."""
        if node_id is None or node_id < 0:
            return await self.any_connection()
        broker = self.brokers.get(node_id)
        if broker is None:
            await self.metadata([])
            broker = self.brokers.get(node_id)
            if broker is None:
                raise KafkaResponseError(Errors.BROKER_NOT_AVAILABLE, f"no broker with id {node_id} in the cluster")
        return await self._open(broker.host, broker.port, node_id)

    async def versions(self, node_id: int | None = None) -> NegotiatedVersions:
        return (await self.connection(node_id)).versions

    async def call(
        self,
        request_cls: type[Request],
        build: Callable[[int], Request],
        response_cls: type[R],
        *,
        node_id: int | None = None,
        min_version: int = 0,
        max_version: int | None = None,
        timeout: float | None = None,
    ) -> R:
        """Build the request for the version negotiated with the node, send it, return the response.

        ``timeout`` overrides the client's for requests the broker may legitimately hold longer
        (JoinGroup waits for a whole rebalance)."""
        connection = await self.connection(node_id)
        version = connection.versions.version_for(request_cls, min_version, max_version)
        with self.deadline(f"{api_name(request_cls.API_KEY)} to {connection.address}", timeout):
            return await connection.request(build(version), version, response_cls)

    async def send_only(
        self, request_cls: type[Request], build: Callable[[int], Request], *, node_id: int | None = None,
        min_version: int = 0, max_version: int | None = None,
    ) -> None:
        """Send a request the broker does not answer (Produce with acks=0)."""
        connection = await self.connection(node_id)
        version = connection.versions.version_for(request_cls, min_version, max_version)
        with self.deadline(f"{api_name(request_cls.API_KEY)} to {connection.address}"):
            await connection.send_only(build(version), version)

    async def metadata(self, topics: list[str] | None, *, auto_create: bool = False) -> ClusterMetadata:
        """Metadata for ``topics`` (None: every topic); also refreshes the broker list."""

        def build(version: int) -> MetadataRequest:
            if topics is None:
                wanted: list[MetadataRequestTopic] | None = None if version >= 1 else []
            else:
                wanted = [MetadataRequestTopic(name=name) for name in topics]
            return MetadataRequest(topics=wanted, allow_auto_topic_creation=auto_create or version < 4)

        response = await self.call(MetadataRequest, build, MetadataResponse)
        metadata = metadata_from_response(response)
        self.brokers = metadata.brokers
        self.controller_id = metadata.controller_id
        return metadata

    async def topic(self, name: str, *, auto_create: bool = False) -> TopicInfo:
        """One topic with a leader for every partition, retrying while leaders are being elected."""
        with self.deadline(f"finding the leaders of {name}"):
            while True:
                info = (await self.metadata([name], auto_create=auto_create)).topics.get(name)
                if info is None:
                    raise KafkaResponseError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name} not in metadata")
                waiting = info.error == Errors.LEADER_NOT_AVAILABLE or (
                    info.error == 0 and any(p.leader < 0 or p.error == Errors.LEADER_NOT_AVAILABLE for p in info.partitions)
                )
                if not waiting:
                    break
                await trio.sleep(RETRY_BACKOFF_S)
        if info.error:
            raise KafkaResponseError(info.error, context=f"topic {name}")
        return info
