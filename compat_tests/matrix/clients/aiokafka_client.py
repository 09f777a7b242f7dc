"""aiokafka: asyncio, so every adapter method drives its own event loop under the cell's deadline."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import aiokafka
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.client import AIOKafkaClient
from aiokafka.errors import for_code
from aiokafka.helpers import create_ssl_context
from aiokafka.protocol.admin import ApiVersionRequest
from aiokafka.structs import OffsetAndMetadata

from rivven_kproto.broker.topics import ConfigSource

from ..data import Profile, Rec
from ..model import Client, Ctx
from .common import kafka_python_security

T = TypeVar("T")


def _run(ctx: Ctx, body: Callable[[], Awaitable[T]]) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(body(), ctx.remaining())

    return asyncio.run(bounded())


def _rec(r: Any) -> Rec:
    return Rec(r.partition, r.key, r.value, tuple(r.headers or ()), r.timestamp, r.offset)


async def _collect(
    seconds: float, count: int, fetch: Callable[[], Awaitable[list[Rec]]], settle_s: float = 0.0
) -> list[Rec]:
    got: list[Rec] = []
    deadline = time.monotonic() + seconds
    while len(got) < count and time.monotonic() < deadline:
        got += await fetch()
    settle = time.monotonic() + settle_s
    while time.monotonic() < settle:
        got += await fetch()
    return got


async def _until(deadline: float, what: str, check: Callable[[], Awaitable[bool]]) -> None:
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")


def _getmany(consumer: AIOKafkaConsumer, timeout_ms: int = 200) -> Callable[[], Awaitable[list[Rec]]]:
    async def fetch() -> list[Rec]:
        batch = await consumer.getmany(timeout_ms=timeout_ms)
        return [_rec(r) for records in batch.values() for r in records]

    return fetch


def _raise_topic_errors(response: Any) -> None:
    for entry in response.topic_errors:
        if entry[1]:
            raise for_code(entry[1])(f"{entry[0]}: {entry[2] if len(entry) > 2 else ''}")


def _security(ctx: Ctx) -> dict[str, Any]:
    """aiokafka's keywords for the cell's security properties (it takes an SSL context, not files)."""
    options = kafka_python_security(ctx.security)
    cafile, certfile, keyfile = (options.pop(k, None) for k in ("ssl_cafile", "ssl_certfile", "ssl_keyfile"))
    if "SSL" in options.get("security_protocol", ""):
        options["ssl_context"] = create_ssl_context(cafile=cafile, certfile=certfile, keyfile=keyfile)
    return options


class Adapter:
    # AIOKafkaProducer.send refuses a record with neither key nor value ("Need at least one").
    profile = Profile(null_key_and_value=False)

    def _consumer(self, ctx: Ctx, group: str | None = None, **config: Any) -> AIOKafkaConsumer:
        return AIOKafkaConsumer(
            bootstrap_servers=ctx.bootstrap,
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=100,
            request_timeout_ms=15_000,
            client_id=f"matrix-{ctx.unique}",
            **_security(ctx),
            **config,
        )

    def _producer(self, ctx: Ctx, **config: Any) -> AIOKafkaProducer:
        return AIOKafkaProducer(
            bootstrap_servers=ctx.bootstrap,
            linger_ms=5,
            request_timeout_ms=15_000,
            client_id=f"matrix-{ctx.unique}",
            **_security(ctx),
            **config,
        )

    def _admin(self, ctx: Ctx) -> AIOKafkaAdminClient:
        return AIOKafkaAdminClient(bootstrap_servers=ctx.bootstrap, request_timeout_ms=15_000)

    def api_versions(self, ctx: Ctx) -> dict[int, tuple[int, int]]:
        async def body() -> dict[int, tuple[int, int]]:
            client = AIOKafkaClient(bootstrap_servers=ctx.bootstrap)
            await client.bootstrap()
            try:
                node = next(iter(client.cluster.brokers())).nodeId
                response = await client.send(node, ApiVersionRequest())
                return {key: (low, high) for key, low, high in response.api_versions}
            finally:
                await client.close()

        return _run(ctx, body)

    def metadata(self, ctx: Ctx, topic: str) -> dict:
        async def body() -> dict:
            admin = self._admin(ctx)
            await admin.start()
            try:
                cluster = await admin.describe_cluster()
                [described] = await admin.describe_topics([topic])
            finally:
                await admin.close()
            return {
                "brokers": {b["node_id"]: f"{b['host']}:{b['port']}" for b in cluster["brokers"]},
                "partitions": {p["partition"]: p["leader"] for p in described["partitions"]},
            }

        return _run(ctx, body)

    def produce(
        self, ctx: Ctx, topic: str, records: list[Rec], *, codec: str, acks: str, idempotent: bool
    ) -> None:
        async def body() -> None:
            producer = self._producer(
                ctx,
                compression_type=None if codec == "none" else codec,
                acks="all" if acks == "all" else int(acks),
                enable_idempotence=idempotent,
            )
            await producer.start()
            try:
                futures = [
                    await producer.send(
                        topic,
                        key=r.key,
                        value=r.value,
                        partition=r.partition,
                        headers=list(r.headers),
                        timestamp_ms=r.timestamp,
                    )
                    for r in records
                ]
                await asyncio.gather(*futures)
            finally:
                await producer.stop()

        _run(ctx, body)

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
        async def body() -> list[Rec]:
            consumer = self._consumer(
                ctx, isolation_level="read_committed" if read_committed else "read_uncommitted"
            )
            await consumer.start()
            try:
                tps = [TopicPartition(topic, p) for p in partitions]
                consumer.assign(tps)
                await consumer.seek_to_beginning(*tps)
                return await _collect(ctx.wait(), count, _getmany(consumer), settle_s)
            finally:
                await consumer.stop()

        return _run(ctx, body)

    async def _txn_producer(self, ctx: Ctx, txn_id: str) -> AIOKafkaProducer:
        producer = self._producer(ctx, transactional_id=txn_id, transaction_timeout_ms=60_000)
        await producer.start()  # InitProducerId
        return producer

    async def _transactions(
        self, ctx: Ctx, topic: str, txn_id: str, transactions: list[tuple[list[Rec], str]]
    ) -> None:
        producer = await self._txn_producer(ctx, txn_id)
        try:
            for records, end in transactions:
                await producer.begin_transaction()
                for r in records:
                    await producer.send_and_wait(topic, key=r.key, value=r.value, partition=r.partition)
                if end == "commit":
                    await producer.commit_transaction()
                else:
                    await producer.abort_transaction()
        finally:
            await producer.stop()

    def txn_produce(
        self, ctx: Ctx, topic: str, txn_id: str, transactions: list[tuple[list[Rec], str]]
    ) -> None:
        _run(ctx, lambda: self._transactions(ctx, topic, txn_id, transactions))

    def fence(self, ctx: Ctx, topic: str, txn_id: str) -> str:
        async def body() -> str:
            zombie = await self._txn_producer(ctx, txn_id)
            try:
                await zombie.begin_transaction()
                await zombie.send_and_wait(topic, value=b"zombie", partition=0)
                await self._transactions(ctx, topic, txn_id, [([Rec(0, None, b"winner")], "commit")])
                try:
                    await zombie.send_and_wait(topic, value=b"zombie-2", partition=0)
                    await zombie.commit_transaction()
                except Exception as exc:  # noqa: BLE001 - the fencing error is the observation
                    return f"{type(exc).__name__}: {exc}"
                raise AssertionError("the fenced producer committed")
            finally:
                await zombie.stop()

        return _run(ctx, body)

    def group_rebalance(self, ctx: Ctx, topic: str, group: str, phase1: list[Rec], phase2: list[Rec]) -> dict:
        from ..fixtures import produce_plain  # noqa: PLC0415

        async def body() -> dict:
            members = {
                w: self._consumer(ctx, group, session_timeout_ms=10_000, heartbeat_interval_ms=300)
                for w in "ab"
            }
            records: dict[str, list[Rec]] = {"a": [], "b": []}

            def assigned(w: str) -> set[int]:
                return {tp.partition for tp in members[w].assignment()}

            async def poll(*who: str) -> None:
                for w in who:
                    records[w] += await _getmany(members[w], 100)()

            def seen() -> set[bytes | None]:
                return {r.value for w in "ab" for r in records[w]}

            deadline = time.monotonic() + ctx.remaining()
            try:
                produce_plain(ctx.bootstrap, topic, phase1)
                members["a"].subscribe([topic])
                await members["a"].start()
                values1 = {r.value for r in phase1}

                async def a_read_phase1() -> bool:
                    await poll("a")
                    return values1 <= {r.value for r in records["a"]}

                await _until(deadline, "member A to read the first records", a_read_phase1)
                a_first = sorted(assigned("a"))
                members["b"].subscribe([topic])
                await members["b"].start()

                async def rebalanced() -> bool:
                    await poll("a", "b")
                    a, b = assigned("a"), assigned("b")
                    return bool(a) and bool(b) and a | b == {0, 1, 2} and not a & b

                await _until(deadline, "the rebalance to give B partitions", rebalanced)
                after = {w: sorted(assigned(w)) for w in "ab"}
                produce_plain(ctx.bootstrap, topic, phase2)
                values2 = {r.value for r in phase2}

                async def read_phase2() -> bool:
                    await poll("a", "b")
                    return values2 <= seen()

                await _until(deadline, "the later records", read_phase2)
                await poll("a", "b")
            finally:
                for consumer in members.values():
                    await consumer.stop()
            return {
                "a_first": a_first,
                "a_after": after["a"],
                "b_after": after["b"],
                "a_records": records["a"],
                "b_records": records["b"],
            }

        return _run(ctx, body)

    def commit_fetch(self, ctx: Ctx, topic: str, group: str) -> dict:
        tp = TopicPartition(topic, 0)

        async def body() -> dict:
            first = self._consumer(ctx, group)
            await first.start()
            try:
                first.assign([tp])
                await first.seek_to_beginning(tp)
                got = await _collect(ctx.wait(), 4, _getmany(first))
                await first.commit({tp: OffsetAndMetadata(4, "matrix")})
                committed = await first.committed(tp)
            finally:
                await first.stop()
            second = self._consumer(ctx, group)
            await second.start()
            try:
                second.assign([tp])  # position from the committed offset
                resumed = await _collect(ctx.wait(), 6, _getmany(second))
            finally:
                await second.stop()
            return {
                "consumed": got[:4],
                "committed": committed,
                "resumed": resumed,
                "how": "assign + commit(offsets), committed()",
            }

        return _run(ctx, body)

    def send_offsets(self, ctx: Ctx, in_topic: str, out_topic: str, group: str, txn_id: str) -> str:
        tp = TopicPartition(in_topic, 0)

        async def body() -> None:
            consumer = self._consumer(ctx, group, isolation_level="read_committed")
            consumer.subscribe([in_topic])  # a group member while the offsets go to the transaction
            await consumer.start()
            producer = await self._txn_producer(ctx, txn_id)
            try:
                records = await _collect(ctx.wait(), 5, _getmany(consumer))
                await producer.begin_transaction()
                for r in records[:5]:
                    await producer.send_and_wait(
                        out_topic, key=r.key, value=b"out-" + (r.value or b""), partition=0
                    )
                await producer.send_offsets_to_transaction({tp: 5}, group)
                await producer.commit_transaction()
            finally:
                await producer.stop()
                await consumer.stop()

        _run(ctx, body)
        return "subscribed member; aiokafka sends the group id only"

    def committed(self, ctx: Ctx, group: str, topic: str, partitions: list[int]) -> dict[int, int | None]:
        async def body() -> dict[int, int | None]:
            consumer = self._consumer(ctx, group)
            await consumer.start()
            try:
                return {p: await consumer.committed(TopicPartition(topic, p)) for p in partitions}
            finally:
                await consumer.stop()

        return _run(ctx, body)

    @staticmethod
    async def _configs(admin: AIOKafkaAdminClient, topic: str) -> dict[str, str]:
        [response] = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
        [resource] = response.resources
        if resource[0]:
            raise for_code(resource[0])(resource[1])
        return {entry[0]: entry[1] for entry in resource[4]}

    def admin_topics(self, ctx: Ctx, name: str) -> dict:
        async def body() -> dict:
            admin = self._admin(ctx)
            await admin.start()
            try:
                _raise_topic_errors(
                    await admin.create_topics(
                        [
                            NewTopic(
                                name,
                                num_partitions=2,
                                replication_factor=1,
                                topic_configs={"retention.ms": "3600000"},
                            )
                        ]
                    )
                )
                listed = name in await admin.list_topics()
                [described] = await admin.describe_topics([name])
                retention = (await self._configs(admin, name)).get("retention.ms")
                response = await admin.delete_topics([name])
                errors = [entry for entry in response.topic_error_codes if entry[1]]
                if errors:
                    raise for_code(errors[0][1])(str(errors))
                deadline = time.monotonic() + ctx.wait()
                while (still := name in await admin.list_topics()) and time.monotonic() < deadline:
                    await asyncio.sleep(0.1)
            finally:
                await admin.close()
            return {
                "listed_after_create": listed,
                "partitions": [p["partition"] for p in described["partitions"]],
                "retention": retention,
                "listed_after_delete": still,
            }

        return _run(ctx, body)

    def admin_configs(self, ctx: Ctx, topic: str) -> dict:
        async def body() -> dict:
            admin = self._admin(ctx)
            await admin.start()
            try:
                before = await self._configs(admin, topic)
                [response] = await admin.alter_configs(
                    [ConfigResource(ConfigResourceType.TOPIC, topic, configs={"retention.ms": "7200000"})]
                )
                for resource in response.resources:
                    if resource[0]:
                        raise for_code(resource[0])(resource[1])
                return {"before": before, "after": await self._configs(admin, topic)}
            finally:
                await admin.close()

        return _run(ctx, body)

    def broker_ids(self, ctx: Ctx) -> list[int]:
        async def body() -> list[int]:
            admin = self._admin(ctx)
            await admin.start()
            try:
                return [broker["node_id"] for broker in (await admin.describe_cluster())["brokers"]]
            finally:
                await admin.close()

        return _run(ctx, body)

    def assign_replicas(self, ctx: Ctx, name: str, created: list[list[int]], added: list[list[int]]
                        ) -> list[tuple[int, list[int]]]:
        async def body() -> list[tuple[int, list[int]]]:
            admin = self._admin(ctx)
            await admin.start()
            try:
                _raise_topic_errors(await admin.create_topics(
                    [NewTopic(name, -1, -1, replica_assignments=dict(enumerate(created)))]))
                response = await admin.create_partitions(
                    {name: NewPartitions(len(created) + len(added), new_assignments=added)})
                for topic_error in response.topic_errors:
                    if topic_error[1]:
                        raise for_code(topic_error[1])(str(topic_error))
                [described] = await admin.describe_topics([name])
            finally:
                await admin.close()
            partitions = sorted(described["partitions"], key=lambda p: p["partition"])
            return [(p["leader"], list(p["replicas"])) for p in partitions]

        return _run(ctx, body)

    def config_sources(self, ctx: Ctx, topic: str) -> dict[str, tuple[str, str]]:
        async def body() -> dict[str, tuple[str, str]]:
            admin = self._admin(ctx)
            await admin.start()
            try:
                [response] = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
            finally:
                await admin.close()
            if response.API_VERSION < 1:
                raise AssertionError(f"DescribeConfigs v{response.API_VERSION} carries no config sources")
            [resource] = response.resources
            if resource[0]:
                raise for_code(resource[0])(resource[1])
            return {entry[0]: (entry[1], ConfigSource(entry[3]).name) for entry in resource[4]}

        return _run(ctx, body)

    def offsets_for_times(
        self, ctx: Ctx, topic: str, partition: int, timestamps: list[int]
    ) -> dict[int, int | None]:
        tp = TopicPartition(topic, partition)

        async def body() -> dict[int, int | None]:
            consumer = self._consumer(ctx)
            await consumer.start()
            try:
                out = {}
                for ts in timestamps:
                    found = (await consumer.offsets_for_times({tp: ts}))[tp]
                    out[ts] = None if found is None else found.offset
                return out
            finally:
                await consumer.stop()

        return _run(ctx, body)


_NO_KIP848 = "aiokafka implements only the classic group protocol (JoinGroup/SyncGroup), not group.protocol=consumer (KIP-848)"
_NO_UPGRADE = (
    "aiokafka speaks only the classic group protocol, so none of its members can join with group.protocol=consumer "
    "and upgrade the group (KIP-848); the row's classic side is covered by confluent-kafka's classic member"
)


CLIENT = Client(
    name="aiokafka",
    adapter=Adapter(),
    version=lambda: {"version": aiokafka.__version__},
    not_offered={
        **dict.fromkeys(("group-rebalance-kip848", "send-offsets-txn-kip848"), _NO_KIP848),
        "group-upgrade-kip848": _NO_UPGRADE,
        "list-describe-txn": "aiokafka's admin client has no ListTransactions/DescribeTransactions",
        "list-config-resources": "aiokafka's admin client has no ListConfigResources",
        "share-group": "aiokafka has no share consumer (KIP-932)",
    },
)
