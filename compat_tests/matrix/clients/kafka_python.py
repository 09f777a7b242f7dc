"""kafka-python (3.x): every capability, including ListTransactions/DescribeTransactions."""

from __future__ import annotations

import threading
import time
from typing import Any

import kafka
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic
from kafka.structs import OffsetAndMetadata

from ...test_kafka_python import admin as kp_admin
from ..data import Profile, Rec
from ..model import Client, Ctx
from .common import collect, kafka_python_security, until


def _rec(r: Any) -> Rec:
    return Rec(r.partition, r.key, r.value, tuple(r.headers or ()), r.timestamp, r.offset)


class Adapter:
    # KafkaProducer.send refuses a record with neither key nor value ("Need at least one") and
    # header values that are not bytes.
    profile = Profile(null_key_and_value=False, null_header_values=False)

    def _admin(self, ctx: Ctx) -> Any:
        return kp_admin(ctx)

    def _consumer(self, ctx: Ctx, group: str | None = None, **config: Any) -> KafkaConsumer:
        return KafkaConsumer(
            bootstrap_servers=ctx.bootstrap,
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=100,
            request_timeout_ms=15_000,
            client_id=f"matrix-{ctx.unique}",
            **kafka_python_security(ctx.security),
            **config,
        )

    def _producer(self, ctx: Ctx, **config: Any) -> KafkaProducer:
        return KafkaProducer(
            bootstrap_servers=ctx.bootstrap,
            linger_ms=5,
            request_timeout_ms=15_000,
            client_id=f"matrix-{ctx.unique}",
            **kafka_python_security(ctx.security),
            **config,
        )

    @staticmethod
    def _poll(consumer: KafkaConsumer, timeout_ms: int = 300) -> list[Rec]:
        return [_rec(r) for records in consumer.poll(timeout_ms=timeout_ms).values() for r in records]

    def api_versions(self, ctx: Ctx) -> dict[int, tuple[int, int]]:
        client = self._admin(ctx)
        try:
            return {int(key): tuple(versions) for key, versions in client.api_versions().items()}
        finally:
            client.close()

    def metadata(self, ctx: Ctx, topic: str) -> dict:
        client = self._admin(ctx)
        try:
            cluster = client.describe_cluster()
            [described] = client.describe_topics([topic])
        finally:
            client.close()
        return {
            "brokers": {b["broker_id"]: f"{b['host']}:{b['port']}" for b in cluster["brokers"]},
            "partitions": {p["partition_index"]: p["leader_id"] for p in described["partitions"]},
        }

    def produce(
        self, ctx: Ctx, topic: str, records: list[Rec], *, codec: str, acks: str, idempotent: bool
    ) -> None:
        producer = self._producer(
            ctx,
            compression_type=None if codec == "none" else codec,
            acks="all" if acks == "all" else int(acks),
            enable_idempotence=idempotent,
        )
        try:
            futures = [
                producer.send(
                    topic,
                    key=r.key,
                    value=r.value,
                    partition=r.partition,
                    headers=list(r.headers),
                    timestamp_ms=r.timestamp,
                )
                for r in records
            ]
            producer.flush(ctx.remaining())
            for future in futures:
                future.get(ctx.remaining())
        finally:
            producer.close(5)

    def read(
        self,
        ctx: Ctx,
        topic: str,
        partitions: list[int],
        count: int,
        *,
        read_committed: bool = False,
        settle_s: float = 0.0,
    ) -> list[Rec]:
        consumer = self._consumer(
            ctx, isolation_level="read_committed" if read_committed else "read_uncommitted"
        )
        try:
            consumer.assign([TopicPartition(topic, p) for p in partitions])
            consumer.seek_to_beginning()
            return collect(ctx.wait(), count, lambda: self._poll(consumer, 100), settle_s)
        finally:
            consumer.close()

    def _txn_producer(self, ctx: Ctx, txn_id: str) -> KafkaProducer:
        producer = self._producer(ctx, transactional_id=txn_id, transaction_timeout_ms=60_000)
        producer.init_transactions()
        return producer

    def txn_produce(
        self, ctx: Ctx, topic: str, txn_id: str, transactions: list[tuple[list[Rec], str]]
    ) -> None:
        producer = self._txn_producer(ctx, txn_id)
        try:
            for records, end in transactions:
                producer.begin_transaction()
                for r in records:
                    producer.send(topic, key=r.key, value=r.value, partition=r.partition)
                producer.flush(ctx.remaining())
                if end == "commit":
                    producer.commit_transaction()
                else:
                    producer.abort_transaction()
        finally:
            producer.close(5)

    def fence(self, ctx: Ctx, topic: str, txn_id: str) -> str:
        zombie = self._txn_producer(ctx, txn_id)
        try:
            zombie.begin_transaction()
            zombie.send(topic, value=b"zombie", partition=0).get(ctx.remaining())
            self.txn_produce(ctx, topic, txn_id, [([Rec(0, None, b"winner")], "commit")])
            try:
                zombie.send(topic, value=b"zombie-2", partition=0)
                zombie.commit_transaction()
            except Exception as exc:  # noqa: BLE001 - the fencing error is the observation
                return f"{type(exc).__name__}: {exc}"
            raise AssertionError("the fenced producer committed")
        finally:
            zombie.close(0)

    def group_rebalance(self, ctx: Ctx, topic: str, group: str, phase1: list[Rec], phase2: list[Rec]) -> dict:
        from ..fixtures import produce_plain  # noqa: PLC0415

        members = {
            w: _PolledMember(self._consumer(
                ctx, group, session_timeout_ms=10_000, heartbeat_interval_ms=300, max_poll_interval_ms=30_000
            ))
            for w in "ab"
        }

        def seen(*who: str) -> set[bytes | None]:
            return {r.value for w in who for r in members[w].records()}

        deadline = time.monotonic() + ctx.remaining()
        try:
            produce_plain(ctx.bootstrap, topic, phase1)
            members["a"].start(topic)
            values1 = {r.value for r in phase1}
            until(deadline, "member A to read the first records", lambda: seen("a"), lambda got: values1 <= got)
            a_first = sorted(members["a"].assigned())
            members["b"].start(topic)
            until(
                deadline,
                "the rebalance to give B partitions",
                lambda: (members["a"].assigned(), members["b"].assigned()),
                lambda ab: bool(ab[0]) and bool(ab[1]) and ab[0] | ab[1] == {0, 1, 2} and not ab[0] & ab[1],
            )
            after = {w: sorted(members[w].assigned()) for w in "ab"}
            produce_plain(ctx.bootstrap, topic, phase2)
            values2 = {r.value for r in phase2}
            until(deadline, "the later records", lambda: seen("a", "b"), lambda got: values2 <= got)
            # One more poll each, to catch a record read twice.
            polls = {w: members[w].polls() for w in "ab"}
            until(deadline, "one more poll of each member", lambda: {w: members[w].polls() for w in "ab"},
                  lambda now: all(now[w] > polls[w] for w in "ab"))
        finally:
            # Both stop polling before either leaves: a member still polling would take over the
            # partitions of the one leaving and read them again.
            for member in members.values():
                member.stop_polling()
            for member in members.values():
                member.close()
        return {
            "a_first": a_first,
            "a_after": after["a"],
            "b_after": after["b"],
            "a_records": members["a"].records(),
            "b_records": members["b"].records(),
        }

    def commit_fetch(self, ctx: Ctx, topic: str, group: str) -> dict:
        tp = TopicPartition(topic, 0)
        first = self._consumer(ctx, group)
        try:
            first.assign([tp])
            first.seek_to_beginning()
            got = collect(ctx.wait(), 4, lambda: self._poll(first))
            first.commit({tp: OffsetAndMetadata(4, "matrix", -1)})
            committed = first.committed(tp, metadata=True)
        finally:
            first.close()
        second = self._consumer(ctx, group)
        try:
            second.assign([tp])  # position from the committed offset
            resumed = collect(ctx.wait(), 6, lambda: self._poll(second))
        finally:
            second.close()
        return {
            "consumed": got[:4],
            "committed": committed and committed.offset,
            "metadata": committed and committed.metadata,
            "resumed": resumed,
            "how": "assign + commit(offsets), committed()",
        }

    def send_offsets(self, ctx: Ctx, in_topic: str, out_topic: str, group: str, txn_id: str) -> str:
        tp = TopicPartition(in_topic, 0)
        consumer = self._consumer(ctx, group, isolation_level="read_committed")
        producer = self._txn_producer(ctx, txn_id)
        try:
            consumer.subscribe([in_topic])  # a live member: its generation goes with the offsets (KIP-447)
            consumer.topics()  # partitions known before the first join (see _PolledMember)
            records = collect(ctx.wait(), 5, lambda: self._poll(consumer))
            producer.begin_transaction()
            for r in records[:5]:
                producer.send(out_topic, key=r.key, value=b"out-" + (r.value or b""), partition=0)
            producer.send_offsets_to_transaction(
                {tp: OffsetAndMetadata(5, "", -1)}, consumer.group_metadata()
            )
            producer.commit_transaction()
        finally:
            producer.close(5)
            consumer.close()
        return "subscribed member's group metadata"

    def committed(self, ctx: Ctx, group: str, topic: str, partitions: list[int]) -> dict[int, int | None]:
        consumer = self._consumer(ctx, group)
        try:
            return {p: consumer.committed(TopicPartition(topic, p)) for p in partitions}
        finally:
            consumer.close()

    def admin_topics(self, ctx: Ctx, name: str) -> dict:
        client = self._admin(ctx)
        try:
            client.create_topics([NewTopic(name, 2, 1, topic_configs={"retention.ms": "3600000"})])
            listed = name in client.list_topics()
            [described] = client.describe_topics([name])
            configs = client.describe_configs(
                [ConfigResource(ConfigResourceType.TOPIC, name)], config_filter="all"
            )
            retention = configs["topic"][name]["retention.ms"]["value"]
            client.delete_topics([name])
            gone = until(
                time.monotonic() + ctx.remaining(),
                "the deleted topic to leave the listing",
                lambda: name in client.list_topics(),
                lambda listed: not listed,
            )
        finally:
            client.close()
        return {
            "listed_after_create": listed,
            "partitions": [p["partition_index"] for p in described["partitions"]],
            "retention": retention,
            "listed_after_delete": gone,
        }

    def admin_configs(self, ctx: Ctx, topic: str) -> dict:
        client = self._admin(ctx)
        resource = ConfigResource(ConfigResourceType.TOPIC, topic)

        def describe() -> dict[str, str]:
            entries = client.describe_configs([resource], config_filter="all")["topic"][topic]
            return {key: entry["value"] for key, entry in entries.items()}

        try:
            before = describe()
            client.alter_configs(
                [ConfigResource(ConfigResourceType.TOPIC, topic, configs={"retention.ms": "7200000"})]
            )
            return {"before": before, "after": describe()}
        finally:
            client.close()

    def broker_ids(self, ctx: Ctx) -> list[int]:
        client = self._admin(ctx)
        try:
            return [broker["broker_id"] for broker in client.describe_cluster()["brokers"]]
        finally:
            client.close()

    def assign_replicas(self, ctx: Ctx, name: str, created: list[list[int]], added: list[list[int]]
                        ) -> list[tuple[int, list[int]]]:
        client = self._admin(ctx)
        try:
            client.create_topics([NewTopic(name, replica_assignments=dict(enumerate(created)))])
            client.create_partitions({name: NewPartitions(len(created) + len(added), new_assignments=added)})
            [described] = client.describe_topics([name])
        finally:
            client.close()
        partitions = sorted(described["partitions"], key=lambda p: p["partition_index"])
        return [(p["leader_id"], list(p["replica_nodes"])) for p in partitions]

    def config_sources(self, ctx: Ctx, topic: str) -> dict[str, tuple[str, str]]:
        client = self._admin(ctx)
        try:
            entries = client.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)],
                                              config_filter="all")["topic"][topic]
        finally:
            client.close()
        return {key: (entry["value"], entry["config_source"]) for key, entry in entries.items()}

    def list_config_resources(self, ctx: Ctx) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
        client = self._admin(ctx)
        try:
            return client.list_config_resources(), client.list_config_resources(["TOPIC"])
        finally:
            client.close()

    def offsets_for_times(
        self, ctx: Ctx, topic: str, partition: int, timestamps: list[int]
    ) -> dict[int, int | None]:
        consumer = self._consumer(ctx)
        tp = TopicPartition(topic, partition)
        try:
            out = {}
            for ts in timestamps:
                found = consumer.offsets_for_times({tp: ts})[tp]
                out[ts] = None if found is None else found.offset
            return out
        finally:
            consumer.close()

    def transactions(self, ctx: Ctx, topic: str, txn_id: str) -> dict:
        client = self._admin(ctx)
        producer = self._txn_producer(ctx, txn_id)
        try:
            producer.begin_transaction()
            producer.send(topic, value=b"open", partition=0).get(ctx.remaining())
            listed = {
                t.transactional_id: str(getattr(t.state, "value", t.state))
                for listings in client.list_transactions().values()
                for t in listings
            }
            open_ = self._describe(client, txn_id)
            producer.commit_transaction()
            done = self._describe(client, txn_id)
        finally:
            producer.close(5)
            client.close()
        return {"listed": listed, "open": open_, "done": done}

    @staticmethod
    def _describe(client: Any, txn_id: str) -> dict:
        description = client.describe_transactions([txn_id])[txn_id]
        partitions = [(tp.topic, tp.partition) for tp in description.topic_partitions]
        return {
            "state": str(getattr(description.state, "value", description.state)),
            "partitions": partitions,
        }


_NO_KIP848 = "kafka-python implements only the classic group protocol (JoinGroup/SyncGroup), not group.protocol=consumer (KIP-848)"
_NO_UPGRADE = (
    "kafka-python speaks only the classic group protocol, so none of its members can join with group.protocol=consumer "
    "and upgrade the group (KIP-848); the row's classic side is covered by confluent-kafka's classic member"
)


CLIENT = Client(
    name="kafka-python",
    adapter=Adapter(),
    version=lambda: {"version": kafka.__version__},
    not_offered={
        **dict.fromkeys(("group-rebalance-kip848", "send-offsets-txn-kip848"), _NO_KIP848),
        "group-upgrade-kip848": _NO_UPGRADE,
        "share-group": "kafka-python has no share consumer (KIP-932)",
    },
)


class _PolledMember:
    """A group member polled without pause on a thread of its own, as an application's poll loop is.

    kafka-python 3.0 drops a JoinGroup/SyncGroup round that completes while no ``poll()`` waits on
    it: it sends a new JoinGroup, or none at all if the round itself made the join look done. The
    leader's JoinGroup makes the coordinator rebalance (as Kafka's does), so two members polled in
    turn from one thread can keep a group rebalancing forever (compat_tests/FINDINGS.rst)."""

    def __init__(self, consumer: KafkaConsumer) -> None:
        self._consumer = consumer
        self._lock = threading.Lock()
        self._records: list[Rec] = []
        self._assigned: set[int] = set()
        self._polls = 0
        self._error: BaseException | None = None
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, topic: str) -> None:
        self._thread = threading.Thread(target=self._run, args=(topic,), name=f"member-{topic}", daemon=True)
        self._thread.start()

    def _run(self, topic: str) -> None:
        try:
            self._consumer.subscribe([topic])
            # The topic's partitions known before the first join: a leader that assigns without them
            # joins again once they arrive, and kafka-python loses that second round if a poll()
            # times out during it (the leader's join makes it "not needed" any more).
            self._consumer.topics()
            while not self._stopping.is_set():
                got = Adapter._poll(self._consumer, 500)
                assigned = {tp.partition for tp in self._consumer.assignment()}
                with self._lock:
                    self._records += got
                    self._assigned = assigned
                    self._polls += 1
        except BaseException as exc:  # noqa: BLE001 - raised again on the test's thread
            self._error = exc

    def _checked(self) -> None:
        if self._error is not None:
            raise self._error

    def records(self) -> list[Rec]:
        self._checked()
        with self._lock:
            return list(self._records)

    def assigned(self) -> set[int]:
        self._checked()
        with self._lock:
            return set(self._assigned)

    def polls(self) -> int:
        self._checked()
        with self._lock:
            return self._polls

    def stop_polling(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(30)

    def close(self) -> None:
        self._consumer.close()
