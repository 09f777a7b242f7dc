"""confluent-kafka (librdkafka): every capability but list/describe transactions and ListConfigResources."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import confluent_kafka
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaException,
    Producer,
    ShareConsumer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
)

from ..data import Profile, Rec
from ..model import Client, Ctx
from .common import collect, librdkafka_api_versions, until


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _rec(msg: Any) -> Rec:
    return Rec(
        msg.partition(), msg.key(), msg.value(), tuple(msg.headers() or ()), msg.timestamp()[1], msg.offset()
    )


def _check(futures: dict, timeout: float) -> dict:
    return {key: future.result(timeout) for key, future in futures.items()}


class Adapter:
    profile = Profile()

    def _admin(self, ctx: Ctx, **config: Any) -> AdminClient:
        return AdminClient({"bootstrap.servers": ctx.bootstrap, **ctx.security, **config})

    def _consumer(self, ctx: Ctx, group: str | None = None, **config: Any) -> Consumer:
        return Consumer(
            {
                "bootstrap.servers": ctx.bootstrap,
                **ctx.security,
                "group.id": group or ctx.name("reader"),
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "fetch.wait.max.ms": 100,
                **config,
            }
        )

    def _txn_producer(self, ctx: Ctx, txn_id: str) -> Producer:
        return Producer(
            {
                "bootstrap.servers": ctx.bootstrap,
                **ctx.security,
                "transactional.id": txn_id,
                "linger.ms": 5,
                "transaction.timeout.ms": 60_000,
            }
        )

    def api_versions(self, ctx: Ctx) -> dict[int, tuple[int, int]]:
        handler = _Lines()
        logger = logging.getLogger(f"matrix.librdkafka.{ctx.unique}")
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)
        logger.propagate = False
        admin = self._admin(ctx, debug="feature", logger=logger)
        admin.list_topics(timeout=ctx.remaining())
        admin.poll(0.2)
        return librdkafka_api_versions(handler.lines)

    def metadata(self, ctx: Ctx, topic: str) -> dict:
        meta = self._admin(ctx).list_topics(topic, timeout=ctx.remaining())
        return {
            "brokers": {b.id: f"{b.host}:{b.port}" for b in meta.brokers.values()},
            "partitions": {p.id: p.leader for p in meta.topics[topic].partitions.values()},
        }

    def produce(
        self, ctx: Ctx, topic: str, records: list[Rec], *, codec: str, acks: str, idempotent: bool
    ) -> None:
        messages = []
        for r in records:
            message: dict[str, Any] = {
                "key": r.key,
                "value": r.value,
                "partition": r.partition,
                "headers": list(r.headers) or None,
            }
            if r.timestamp is not None:
                message["timestamp"] = r.timestamp
            messages.append(message)
        producer = Producer({
            "bootstrap.servers": ctx.bootstrap, "linger.ms": 5, **ctx.security,
            "compression.type": codec, "acks": acks, "enable.idempotence": idempotent,
        })
        errors: list[Any] = []
        for message in messages:
            producer.produce(topic, on_delivery=lambda err, _m: errors.append(err) if err else None, **message)
        if producer.flush(ctx.remaining()):
            raise AssertionError(f"{len(producer)} messages not delivered in time")
        if errors:
            raise KafkaException(errors[0])

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
            ctx, **{"isolation.level": "read_committed" if read_committed else "read_uncommitted"}
        )
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        try:
            return collect(ctx.wait(), count, lambda: self._poll(consumer, 0.1), settle_s)
        finally:
            consumer.close()

    @staticmethod
    def _poll(consumer: Consumer, timeout: float) -> list[Rec]:
        out = []
        for msg in consumer.consume(num_messages=500, timeout=timeout):
            if msg.error() is not None:
                raise KafkaException(msg.error())
            out.append(_rec(msg))
        return out

    def txn_produce(
        self, ctx: Ctx, topic: str, txn_id: str, transactions: list[tuple[list[Rec], str]]
    ) -> None:
        producer = self._txn_producer(ctx, txn_id)
        producer.init_transactions(ctx.remaining())
        for records, end in transactions:
            producer.begin_transaction()
            for r in records:
                producer.produce(topic, key=r.key, value=r.value, partition=r.partition)
            assert producer.flush(ctx.remaining()) == 0
            if end == "commit":
                producer.commit_transaction(ctx.remaining())
            else:
                producer.abort_transaction(ctx.remaining())

    def fence(self, ctx: Ctx, topic: str, txn_id: str) -> str:
        zombie = self._txn_producer(ctx, txn_id)
        zombie.init_transactions(ctx.remaining())
        zombie.begin_transaction()
        zombie.produce(topic, value=b"zombie", partition=0)
        assert zombie.flush(ctx.remaining()) == 0
        self.txn_produce(ctx, topic, txn_id, [([Rec(0, None, b"winner")], "commit")])
        try:
            zombie.produce(topic, value=b"zombie-2", partition=0)
            zombie.commit_transaction(ctx.remaining())
        except KafkaException as exc:
            error = exc.args[0]
            return f"{error.name()}: {error.str()}"
        raise AssertionError("the fenced producer committed")

    def group_rebalance_kip848(self, ctx: Ctx, topic: str, group: str, phase1: list[Rec], phase2: list[Rec]) -> dict:
        """The same with group.protocol=consumer: the broker assigns, callbacks are incremental."""
        return self.group_rebalance(ctx, topic, group, phase1, phase2, kip848=True)

    def group_rebalance(self, ctx: Ctx, topic: str, group: str, phase1: list[Rec], phase2: list[Rec],
                        *, kip848: bool = False) -> dict:
        from ..fixtures import produce_plain  # noqa: PLC0415

        config: dict[str, Any] = {"group.protocol": "consumer"} if kip848 else {
            "session.timeout.ms": 10_000,
            "heartbeat.interval.ms": 300,
            "partition.assignment.strategy": "range",
        }
        members = {"a": self._consumer(ctx, group, **config), "b": self._consumer(ctx, group, **config)}
        assigned: dict[str, set[int]] = {"a": set(), "b": set()}
        records: dict[str, list[Rec]] = {"a": [], "b": []}

        def tracker(who: str) -> dict:
            def on_assign(_c: Any, partitions: list) -> None:
                added = {p.partition for p in partitions}
                assigned[who] = assigned[who] | added if kip848 else added

            def on_revoke(_c: Any, partitions: list) -> None:
                assigned[who] = assigned[who] - {p.partition for p in partitions} if kip848 else set()

            return {"on_assign": on_assign, "on_revoke": on_revoke}

        def poll(*who: str) -> None:
            for w in who:
                records[w] += self._poll(members[w], 0.1)

        deadline = time.monotonic() + ctx.remaining()
        try:
            produce_plain(ctx.bootstrap, topic, phase1)
            members["a"].subscribe([topic], **tracker("a"))
            values1 = {r.value for r in phase1}
            until(
                deadline,
                "member A to read the first records",
                lambda: poll("a") or {r.value for r in records["a"]},
                lambda seen: values1 <= seen,
            )
            a_first = sorted(assigned["a"])
            members["b"].subscribe([topic], **tracker("b"))
            until(
                deadline,
                "the rebalance to give B partitions",
                lambda: poll("a", "b") or dict(assigned),
                lambda a: bool(a["b"]) and bool(a["a"]) and a["a"] | a["b"] == {0, 1, 2},
            )
            after = {w: sorted(assigned[w]) for w in "ab"}
            produce_plain(ctx.bootstrap, topic, phase2)
            values2 = {r.value for r in phase2}
            until(
                deadline,
                "the later records",
                lambda: poll("a", "b") or {r.value for w in "ab" for r in records[w]},
                lambda seen: values2 <= seen,
            )
            poll("a", "b")
        finally:
            for consumer in members.values():
                consumer.close()
        return {
            "a_first": a_first,
            "a_after": after["a"],
            "b_after": after["b"],
            "a_records": records["a"],
            "b_records": records["b"],
        }

    def group_upgrade(self, ctx: Ctx, topic: str, group: str, phases: list[list[Rec]],
                      group_type: Callable[[], str]) -> dict:
        """Member A classic (eager ``range``), member B ``group.protocol=consumer``; each commits what
        it read before the next step, so a partition that moves resumes after it."""
        from ..fixtures import produce_plain  # noqa: PLC0415

        members = {
            "a": self._consumer(ctx, group, **{"group.protocol": "classic", "session.timeout.ms": 10_000,
                                               "heartbeat.interval.ms": 300,
                                               "partition.assignment.strategy": "range"}),
            "b": self._consumer(ctx, group, **{"group.protocol": "consumer"}),
        }
        assigned: dict[str, set[int]] = {"a": set(), "b": set()}
        records: dict[str, list[Rec]] = {"a": [], "b": []}

        def on_assign(who: str) -> Callable[[Any, list], None]:
            def run(_c: Any, partitions: list) -> None:  # eager for A (the whole set), incremental for B
                added = {p.partition for p in partitions}
                assigned[who] = added if who == "a" else assigned[who] | added
            return run

        def on_revoke(who: str) -> Callable[[Any, list], None]:
            def run(_c: Any, partitions: list) -> None:
                assigned[who] = set() if who == "a" else assigned[who] - {p.partition for p in partitions}
            return run

        def poll(*who: str) -> None:
            for w in who:
                got = self._poll(members[w], 0.1)
                if got:
                    members[w].commit(asynchronous=False)
                records[w] += got

        def read_all(what: str, phase: list[Rec], *who: str) -> None:
            produce_plain(ctx.bootstrap, topic, phase)
            values = {r.value for r in phase}
            until(deadline, what, lambda: poll(*who) or {r.value for w in who for r in records[w]},
                  lambda seen: values <= seen)

        deadline = time.monotonic() + ctx.remaining()
        types = []
        try:
            members["a"].subscribe([topic], on_assign=on_assign("a"), on_revoke=on_revoke("a"))
            read_all("the classic member to read the first records", phases[0], "a")
            a_first = sorted(assigned["a"])
            types.append(group_type())
            members["b"].subscribe([topic], on_assign=on_assign("b"), on_revoke=on_revoke("b"))
            until(deadline, "the upgraded group to give both members partitions",
                  lambda: poll("a", "b") or {w: set(assigned[w]) for w in "ab"},
                  lambda a: bool(a["a"]) and bool(a["b"]) and a["a"] | a["b"] == {0, 1, 2})
            split = {w: sorted(assigned[w]) for w in "ab"}
            types.append(group_type())
            read_all("the records produced while upgraded", phases[1], "a", "b")
            poll("a", "b")
            members.pop("b").close()
            until(deadline, "the classic member to own every partition after the leave",
                  lambda: poll("a") or set(assigned["a"]), lambda a: a == {0, 1, 2})
            a_last = sorted(assigned["a"])  # before close() revokes it
            types.append(group_type())
            read_all("the records produced after the downgrade", phases[2], "a")
            poll("a")
        finally:
            for consumer in members.values():
                consumer.close()
        return {"types": types, "a_first": a_first, "a_split": split["a"], "b_split": split["b"],
                "a_last": a_last, "a_records": records["a"], "b_records": records["b"]}

    def commit_fetch(self, ctx: Ctx, topic: str, group: str) -> dict:
        first = self._consumer(ctx, group)
        try:
            first.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
            consumed = collect(ctx.wait(), 4, lambda: self._poll(first, 0.3))[:4]
            first.commit(offsets=[TopicPartition(topic, 0, 4, "matrix")], asynchronous=False)
            [committed] = first.committed([TopicPartition(topic, 0)], timeout=ctx.remaining())
        finally:
            first.close()
        resumed = self._resume(ctx, topic, group, 6)
        return {
            "consumed": consumed,
            "committed": committed.offset,
            "metadata": committed.metadata,
            "resumed": resumed,
            "how": "assign + commit(offsets), committed()",
        }

    def _resume(self, ctx: Ctx, topic: str, group: str, count: int) -> list[Rec]:
        second = self._consumer(ctx, group)
        try:
            second.assign([TopicPartition(topic, 0)])  # no offset: start at the committed one
            return collect(ctx.wait(), count, lambda: self._poll(second, 0.3))
        finally:
            second.close()

    def send_offsets_kip848(self, ctx: Ctx, in_topic: str, out_topic: str, group: str, txn_id: str) -> str:
        return self.send_offsets(ctx, in_topic, out_topic, group, txn_id, kip848=True)

    def send_offsets(self, ctx: Ctx, in_topic: str, out_topic: str, group: str, txn_id: str,
                     *, kip848: bool = False) -> str:
        protocol = {"group.protocol": "consumer"} if kip848 else {}
        consumer = self._consumer(ctx, group, **{"isolation.level": "read_committed"}, **protocol)
        producer = self._txn_producer(ctx, txn_id)
        try:
            consumer.subscribe([in_topic])  # a live member: its generation goes with the offsets (KIP-447)
            records = collect(ctx.wait(), 5, lambda: self._poll(consumer, 0.3))
            producer.init_transactions(ctx.remaining())
            producer.begin_transaction()
            for r in records[:5]:
                producer.produce(out_topic, key=r.key, value=b"out-" + (r.value or b""), partition=0)
            producer.send_offsets_to_transaction(
                [TopicPartition(in_topic, 0, 5)], consumer.consumer_group_metadata(), ctx.remaining()
            )
            producer.commit_transaction(ctx.remaining())
        finally:
            consumer.close()
        return "subscribed member's group metadata" + (" (member epoch, KIP-848)" if kip848 else "")

    def committed(self, ctx: Ctx, group: str, topic: str, partitions: list[int]) -> dict[int, int | None]:
        consumer = self._consumer(ctx, group)
        try:
            tps = consumer.committed([TopicPartition(topic, p) for p in partitions], timeout=ctx.remaining())
        finally:
            consumer.close()
        return {tp.partition: (tp.offset if tp.offset >= 0 else None) for tp in tps}

    def admin_topics(self, ctx: Ctx, name: str) -> dict:
        admin = self._admin(ctx)
        _check(
            admin.create_topics([NewTopic(name, 2, 1, config={"retention.ms": "3600000"})]), ctx.remaining()
        )
        listed = name in admin.list_topics(timeout=ctx.remaining()).topics
        from confluent_kafka import TopicCollection  # noqa: PLC0415

        [description] = _check(admin.describe_topics(TopicCollection([name])), ctx.remaining()).values()
        resource = ConfigResource(ConfigResource.Type.TOPIC, name)
        [configs] = _check(admin.describe_configs([resource]), ctx.remaining()).values()
        _check(admin.delete_topics([name], operation_timeout=ctx.remaining()), ctx.remaining())
        gone = until(
            time.monotonic() + ctx.remaining(),
            "the deleted topic to leave the listing",
            lambda: name in admin.list_topics(timeout=ctx.remaining()).topics,
            lambda listed: not listed,
        )
        return {
            "listed_after_create": listed,
            "partitions": [p.id for p in description.partitions],
            "retention": configs["retention.ms"].value,
            "listed_after_delete": gone,
        }

    def admin_configs(self, ctx: Ctx, topic: str) -> dict:
        admin = self._admin(ctx)
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
        [before] = _check(admin.describe_configs([resource]), ctx.remaining()).values()
        change = ConfigResource(
            ConfigResource.Type.TOPIC,
            topic,
            incremental_configs=[
                ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET)
            ],
        )
        _check(admin.incremental_alter_configs([change]), ctx.remaining())
        [after] = _check(admin.describe_configs([resource]), ctx.remaining()).values()
        return {
            "before": {k: v.value for k, v in before.items()},
            "after": {k: v.value for k, v in after.items()},
        }

    def broker_ids(self, ctx: Ctx) -> list[int]:
        admin = self._admin(ctx)  # kept referenced until the answer is in
        return [node.id for node in admin.describe_cluster().result(ctx.remaining()).nodes]

    def assign_replicas(self, ctx: Ctx, name: str, created: list[list[int]], added: list[list[int]]
                        ) -> list[tuple[int, list[int]]]:
        admin = self._admin(ctx)
        _check(admin.create_topics([NewTopic(name, len(created), replica_assignment=created)]), ctx.remaining())
        count = len(created) + len(added)
        _check(admin.create_partitions([NewPartitions(name, count, replica_assignment=added)]), ctx.remaining())
        described = admin.describe_topics(TopicCollection([name]))[name].result(ctx.remaining())
        return [(p.leader.id, [n.id for n in p.replicas]) for p in described.partitions]

    def config_sources(self, ctx: Ctx, topic: str) -> dict[str, tuple[str, str]]:
        admin = self._admin(ctx)
        [entries] = _check(admin.describe_configs([ConfigResource("TOPIC", topic)]), ctx.remaining()).values()
        return {key: (entry.value, ConfigSource(entry.source).name) for key, entry in entries.items()}

    def offsets_for_times(
        self, ctx: Ctx, topic: str, partition: int, timestamps: list[int]
    ) -> dict[int, int | None]:
        consumer = self._consumer(ctx)
        try:
            out = {}
            for ts in timestamps:
                [tp] = consumer.offsets_for_times(
                    [TopicPartition(topic, partition, ts)], timeout=ctx.remaining()
                )
                if tp.error is not None:
                    raise KafkaException(tp.error)
                out[ts] = tp.offset if tp.offset >= 0 else None
            return out
        finally:
            consumer.close()


    def share_consume(self, ctx: Ctx, topic: str, group: str, records: list[Rec]) -> list[Rec]:
        """A ShareConsumer (KIP-932) in a fresh share group. Its share-partition starts at the log
        end (share.auto.offset.reset=latest), so warm-up records are produced until one arrives;
        then ``records`` are produced and read back, and acknowledged (implicit mode, committed)."""
        share = ShareConsumer({"bootstrap.servers": ctx.bootstrap, **ctx.security, "group.id": group})
        share.subscribe([topic])
        warm = Rec(0, None, b"matrix-warm-up")

        def fetch() -> list[Rec]:
            out = []
            for msg in share.poll(0.2):
                if msg.error() is not None:
                    raise KafkaException(msg.error())
                out.append(_rec(msg))
            return out

        try:
            deadline = time.monotonic() + ctx.wait()
            while not any(r.value == warm.value for r in fetch()):
                if time.monotonic() > deadline:
                    raise AssertionError("no warm-up record reached the share consumer")
                self.produce(ctx, topic, [warm], codec="none", acks="all", idempotent=False)
            self.produce(ctx, topic, records, codec="none", acks="all", idempotent=False)
            got = [r for r in collect(ctx.wait(), len(records), fetch) if r.value != warm.value]
            share.commit_sync(ctx.wait())
            return got
        finally:
            share.close()


def version() -> dict[str, str]:
    return {"version": confluent_kafka.__version__, "librdkafka": confluent_kafka.libversion()[0]}


CLIENT = Client(
    name="confluent-kafka",
    adapter=Adapter(),
    version=version,
    not_offered={
        "list-describe-txn": "confluent-kafka's AdminClient (librdkafka) has no ListTransactions/DescribeTransactions",
        "list-config-resources": "confluent-kafka's AdminClient (librdkafka 2.16) has no ListConfigResources",
    },
)
