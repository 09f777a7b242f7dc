"""Client-neutral set-up and inspection, over the Kafka protocol only.

* :func:`create_topics`: the runner creates every cell's fresh topics in one CreateTopics request
  (kafka-python's admin client), so a cell's own client is tested on what the row is about.
* :func:`produce_plain` and :class:`TxnMix`: records written with confluent-kafka (librdkafka) for
  rows that test the reading side (read_committed, offsets by time, commits, rebalances).
* :func:`stored_batches`: a raw Fetch (read_uncommitted) of one partition, decoded batch by batch,
  to check what a producer really wrote: the codec, producer ids and sequences, the markers. It
  asks the partition's leader (a bootstrap list of several brokers works too).
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass

from confluent_kafka import KafkaException, Producer

from rivven_kproto.codec.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from rivven_kproto.codec.messages.metadata import MetadataRequest, MetadataRequestTopic
from rivven_kproto.codec.records.control import ControlType
from rivven_kproto.codec.records.records import RecordBatch, decode_batches

from .. import raw_client
from .data import Rec

PARTITIONS = 3
SETUP_TIMEOUT_S = 60.0


def create_topics(bootstrap: str, names: list[str], partitions: int = PARTITIONS) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic  # noqa: PLC0415 - kept out of the cells' imports

    admin = KafkaAdminClient(
        bootstrap_servers=bootstrap, client_id="matrix-setup", request_timeout_ms=int(SETUP_TIMEOUT_S * 1000)
    )
    try:
        for start in range(0, len(names), 50):
            chunk = names[start : start + 50]
            admin.create_topics([NewTopic(name, partitions, 1) for name in chunk])
        deadline = time.monotonic() + SETUP_TIMEOUT_S
        missing = set(names)
        while missing and time.monotonic() < deadline:
            missing -= set(admin.list_topics())
            if missing:
                time.sleep(0.2)
        if missing:
            raise RuntimeError(f"topics not visible after creation: {sorted(missing)[:5]}")
    finally:
        admin.close()


def _producer(bootstrap: str, **config: object) -> Producer:
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 5,
            "acks": "all",
            "enable.idempotence": False,
            "message.timeout.ms": 20_000,
            **config,
        }
    )


def _send(producer: Producer, topic: str, records: list[Rec]) -> None:
    errors: list[str] = []

    def on_delivery(err, _msg) -> None:  # noqa: ANN001 - librdkafka callback
        if err is not None:
            errors.append(str(err))

    for r in records:
        extra = {} if r.timestamp is None else {"timestamp": r.timestamp}
        producer.produce(
            topic,
            key=r.key,
            value=r.value,
            partition=r.partition,
            headers=list(r.headers) or None,
            on_delivery=on_delivery,
            **extra,
        )
    if producer.flush(30) != 0:
        raise RuntimeError("fixture producer: records still queued after 30 s")
    if errors:
        raise RuntimeError(f"fixture producer: {errors[:3]}")


def produce_plain(bootstrap: str, topic: str, records: list[Rec]) -> None:
    """Write ``records`` (explicit partitions and timestamps) with a non-idempotent librdkafka producer."""
    _send(_producer(bootstrap), topic, records)


def _v(text: str) -> bytes:
    return text.encode()


class TxnMix:
    """On partition 0: two plain records, a committed transaction, an aborted one, one more plain
    record, then a transaction left open until :meth:`finish` commits it."""

    def __init__(self, bootstrap: str, topic: str, transactional_id: str) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.txn = _producer(
            bootstrap,
            **{
                "transactional.id": transactional_id,
                "enable.idempotence": True,
                "transaction.timeout.ms": 900_000,  # open across slow readers (PySpark) on a busy machine
            },
        )
        self.plain = _producer(bootstrap)

    def _records(self, *names: str) -> list[Rec]:
        return [Rec(0, b"k-" + _v(name), _v(name)) for name in names]

    def start(self) -> None:
        try:
            _send(self.plain, self.topic, self._records("plain-0", "plain-1"))
            self.txn.init_transactions(30)
            self.txn.begin_transaction()
            _send(self.txn, self.topic, self._records("committed-0", "committed-1", "committed-2"))
            self.txn.commit_transaction(30)
            self.txn.begin_transaction()
            _send(self.txn, self.topic, self._records("aborted-0", "aborted-1", "aborted-2"))
            self.txn.abort_transaction(30)
            _send(self.plain, self.topic, self._records("plain-2"))
            self.txn.begin_transaction()
            _send(self.txn, self.topic, self._records("open-0", "open-1"))
        except KafkaException as exc:
            raise RuntimeError(f"fixture transactions (confluent-kafka): {exc}") from exc

    def finish(self) -> None:
        try:
            self.txn.commit_transaction(30)
        except KafkaException as exc:
            raise RuntimeError(f"fixture commit of the open transaction: {exc}") from exc

    visible_before = ("plain-0", "plain-1", "committed-0", "committed-1", "committed-2", "plain-2")
    visible_after = (*visible_before, "open-0", "open-1")

    def expected(self, names: tuple[str, ...]) -> list[Rec]:
        return self._records(*names)


@dataclass
class Stored:
    """One partition's log as a raw Fetch returns it."""

    batches: list[RecordBatch]

    @property
    def data_batches(self) -> list[RecordBatch]:
        return [b for b in self.batches if not b.is_control]

    def markers(self) -> list[tuple[int, str]]:
        """(offset, "COMMIT"/"ABORT") of every control record."""
        out = []
        for batch in self.batches:
            if batch.is_control:
                for offset, _ts, record in batch.iter_absolute():
                    kind = int.from_bytes((record.key or b"\0\0\0\0")[2:4], "big")
                    out.append((offset, ControlType(kind).name))
        return out

    def offsets_of(self) -> dict[bytes | None, int]:
        """Value -> offset for every data record (values are unique in the scenarios that use this)."""
        return {
            record.value: offset
            for batch in self.data_batches
            for offset, _ts, record in batch.iter_absolute()
        }


def _connect_any(bootstrap: str) -> socket.socket:
    """A raw connection to the first address of a bootstrap list (one broker or a cluster) that answers."""
    error: OSError | None = None
    for address in filter(None, (a.strip() for a in bootstrap.split(","))):
        try:
            return raw_client.connect(address)
        except OSError as exc:
            error = exc
    raise error or OSError(f"no address in bootstrap {bootstrap!r}")


def _leader(bootstrap: str, topic: str, partition: int) -> str:
    sock = _connect_any(bootstrap)
    try:
        meta = raw_client.call(
            sock,
            MetadataRequest(topics=[MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False),
            9,
        )
    finally:
        sock.close()
    brokers = {b.node_id: f"{b.host}:{b.port}" for b in meta.brokers}
    for t in meta.topics:
        for p in t.partitions:
            if t.name == topic and p.partition_index == partition and p.leader_id in brokers:
                return brokers[p.leader_id]
    raise RuntimeError(f"no leader for {topic}-{partition} in metadata")


def stored_batches(bootstrap: str, topic: str, partition: int = 0) -> Stored:
    """Every batch of one partition (up to 8 MiB), read_uncommitted, from its leader."""
    sock = raw_client.connect(_leader(bootstrap, topic, partition))
    batches: list[RecordBatch] = []
    offset = 0
    try:
        for correlation in range(1, 50):
            request = FetchRequest(
                replica_id=-1,
                max_wait_ms=0,
                min_bytes=1,
                max_bytes=8 << 20,
                isolation_level=0,
                topics=[
                    FetchTopic(
                        topic=topic,
                        partitions=[
                            FetchPartition(
                                partition=partition, fetch_offset=offset, partition_max_bytes=8 << 20
                            )
                        ],
                    )
                ],
            )
            data = raw_client.call(sock, request, 11, correlation).responses[0].partitions[0]
            if data.error_code:
                raise RuntimeError(f"raw fetch of {topic}-{partition}: error code {data.error_code}")
            got = decode_batches(data.records or b"")
            if not got:
                break
            batches += got
            offset = got[-1].next_offset
            if offset >= data.high_watermark:
                break
    finally:
        sock.close()
    return Stored(batches)


def group_type(bootstrap: str, group: str) -> str:
    """``classic``, ``consumer`` or ``none``: the group's type as ListGroups v5 filters it (KIP-848)."""
    from confluent_kafka import ConsumerGroupType  # noqa: PLC0415
    from confluent_kafka.admin import AdminClient  # noqa: PLC0415

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for kind, label in ((ConsumerGroupType.CONSUMER, "consumer"), (ConsumerGroupType.CLASSIC, "classic")):
        listed = admin.list_consumer_groups(types={kind}).result(SETUP_TIMEOUT_S)
        if group in {g.group_id for g in listed.valid}:
            return label
    return "none"
