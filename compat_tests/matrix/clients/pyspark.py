"""PySpark 4 through our Kafka data source, by Spark's own name ``format("kafka")`` (the shim).

Rows that produce write with Spark's sink (``df.write.format("kafka")``: one task, so one
producer, per write; ``kafka.compression.type``, ``kafka.acks``, ``kafka.enable.idempotence`` and
the security options as a Spark user sets them) and read back with Spark's source, so they check
both directions. Transactional commit is the sink's ``exactlyOnce=true``. Spark's sink sets no
record timestamps (Spark's connector takes none). ``connect`` and ``metadata`` report what the
source's own protocol client (``rivven_kproto.spark.wire``, the code Spark's driver plans with)
negotiated and saw. The column's cells run in one process, on one local[2] Spark session.
"""

from __future__ import annotations

import json
import time
from typing import Any

from ..data import Profile, Rec
from ..model import Client, Ctx

_session: Any = None


def spark() -> Any:
    global _session
    if _session is None:
        from ...test_spark import spark_session

        _session = spark_session("local[2]", "compat-matrix", {"spark.sql.shuffle.partitions": "2"})
    return _session


def _bytes(value: Any) -> bytes | None:
    return None if value is None else bytes(value)


_SINK_SCHEMA = "partition int, key binary, value binary, headers array<struct<key: string, value: binary>>"


class Adapter:
    profile = Profile(timestamps=False)  # Spark's sink takes no timestamp column

    def api_versions(self, ctx: Ctx) -> dict[int, tuple[int, int]]:
        from rivven_kproto.codec.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
        from rivven_kproto.spark.wire import Connection

        host, port = ctx.bootstrap.rsplit(":", 1)
        connection = Connection(host, int(port))
        try:
            answer = connection.request(ApiVersionsRequest(), 3, ApiVersionsResponse)
        finally:
            connection.close()
        return {entry.api_key: (entry.min_version, entry.max_version) for entry in answer.api_keys}

    def metadata(self, ctx: Ctx, topic: str) -> dict[str, Any]:
        from rivven_kproto.spark.wire import Cluster

        with Cluster(ctx.bootstrap) as cluster:
            meta = cluster.partitions([topic])[topic]
            return {"brokers": sorted(cluster.brokers), "partitions": dict(meta.leaders)}

    def _write(self, ctx: Ctx, topic: str, records: list[Rec], **options: str) -> None:
        rows = [(r.partition, r.key, r.value, [list(h) for h in r.headers] or None) for r in records]
        df = spark().createDataFrame(rows, _SINK_SCHEMA).coalesce(1)  # one task: written in order
        writer = (df.write.format("kafka").mode("append").option("kafka.bootstrap.servers", ctx.bootstrap)
                  .option("topic", topic))
        for key, value in {**_security_options(ctx.security), **options}.items():
            writer = writer.option(key, value)
        writer.save()

    def produce(self, ctx: Ctx, topic: str, records: list[Rec], *, codec: str, acks: str, idempotent: bool) -> None:
        # A long linger keeps each partition's records in one batch: librdkafka sends a batch
        # uncompressed when compressing would not shrink it, which a lone small record split off
        # does not. 1 s was not enough on a loaded machine (a codec row once stored a ``none``
        # batch among snappy ones; likely a stall between the two input slices the task reads). The linger costs
        # nothing: the task's flush() sends at once, linger or not.
        self._write(ctx, topic, records, **{"kafka.compression.type": codec, "kafka.acks": acks,
                                            "kafka.enable.idempotence": str(idempotent).lower(),
                                            "kafka.linger.ms": "30000"})

    def txn_produce(self, ctx: Ctx, topic: str, txn_id: str, transactions: list[tuple[list[Rec], str]]) -> None:
        """Only commits: the sink aborts a transaction when its task fails, never on request."""
        for records, end in transactions:
            if end != "commit":
                raise NotImplementedError("Spark's sink has no way to abort a transaction on request")
            self._write(ctx, topic, records, exactlyOnce="true", transactionalIdPrefix=txn_id)

    def _load(self, ctx: Ctx, topic: str, partitions: list[int], read_committed: bool, **options: str) -> Any:
        reader = (spark().read.format("kafka").option("kafka.bootstrap.servers", ctx.bootstrap)
                  .option("assign", json.dumps({topic: partitions})).option("includeHeaders", "true")
                  .option("kafka.isolation.level", "read_committed" if read_committed else "read_uncommitted"))
        for key, value in {**_security_options(ctx.security), **options}.items():
            reader = reader.option(key, value)
        return reader.load().selectExpr("partition", "offset", "key", "value", "unix_millis(timestamp) AS ms",
                                        "headers")

    def read(self, ctx: Ctx, topic: str, partitions: list[int], count: int, *, read_committed: bool = False,
             settle_s: float = 0.0) -> list[Rec]:
        """Batch reads (earliest to latest, or to the last stable offset) until ``count`` rows."""
        deadline = time.monotonic() + ctx.wait(30.0)
        while True:
            rows = [
                Rec(r["partition"], _bytes(r["key"]), _bytes(r["value"]),
                    tuple((h["key"], _bytes(h["value"])) for h in (r["headers"] or ())), r["ms"], r["offset"])
                for r in self._load(ctx, topic, partitions, read_committed).collect()
            ]
            if len(rows) >= count or time.monotonic() > deadline:
                if settle_s:
                    time.sleep(settle_s)
                    rows = self.read(ctx, topic, partitions, 0, read_committed=read_committed)
                return sorted(rows, key=lambda r: (r.partition, r.offset))
            time.sleep(0.3)

    def offsets_for_times(self, ctx: Ctx, topic: str, partition: int, timestamps: list[int]) -> dict[int, int | None]:
        """``startingOffsetsByTimestamp``: the first row's offset, none when no record is that new."""
        out: dict[int, int | None] = {}
        for ts in timestamps:
            first = self._load(ctx, topic, [partition], False,
                               startingOffsetsByTimestamp=json.dumps({topic: {str(partition): ts}}),
                               startingOffsetsByTimestampStrategy="latest").agg({"offset": "min"}).collect()
            out[ts] = first[0][0]
        return out


def _security_options(security: dict[str, str]) -> dict[str, str]:
    """The cell's security as a Spark user writes it for Spark's Kafka connector (Java client keys)."""
    options: dict[str, str] = {}
    if not security:
        return options
    options["kafka.security.protocol"] = security["security.protocol"]
    if "ssl.ca.location" in security:
        options.update({"kafka.ssl.truststore.type": "PEM", "kafka.ssl.truststore.location": security["ssl.ca.location"]})
    if "ssl.certificate.location" in security:  # mTLS: our source also takes librdkafka's key names
        options.update({"kafka.ssl.certificate.location": security["ssl.certificate.location"],
                        "kafka.ssl.key.location": security["ssl.key.location"]})
    if "sasl.mechanism" in security:
        module = "plain.PlainLoginModule" if security["sasl.mechanism"] == "PLAIN" else "scram.ScramLoginModule"
        options["kafka.sasl.mechanism"] = security["sasl.mechanism"]
        options["kafka.sasl.jaas.config"] = (
            f"org.apache.kafka.common.security.{module} required "
            f'username="{security["sasl.username"]}" password="{security["sasl.password"]}";'
        )
    return options


def version() -> dict[str, str]:
    import pyspark

    return {"version": pyspark.__version__, "source": "format(\"kafka\") reads and writes via the rivven_kproto shim"}


_NO_ABORT = "Spark's sink aborts a task's transaction only when the task fails; it has no abort on request"
_NO_FENCE = ("Spark's sink exposes no producer: it fences its own earlier task attempts (compat_tests/"
             "test_spark_sink.py), which a user cannot drive")
_TXN_IDS = ("the sink derives its transactional ids (prefix, job, Spark partition) and commits a group offset "
            "per task, so it needs more than Write on one literal transactional id")
_NO_GROUP = "Spark's Kafka source uses no consumer group: a query keeps its offsets in its checkpoint"
_NO_ADMIN = "Spark's Kafka source has no admin operations"

CLIENT = Client(
    name="pyspark",
    adapter=Adapter(),
    version=version,
    not_offered={
        "txn-abort": _NO_ABORT,
        "fencing": _NO_FENCE,
        "acl-txn": _TXN_IDS,
        **dict.fromkeys(("group-rebalance", "commit-offsets", "send-offsets-txn", "group-rebalance-kip848",
                         "send-offsets-txn-kip848", "group-upgrade-kip848"), _NO_GROUP),
        **dict.fromkeys(("admin-topics", "admin-configs", "list-describe-txn", "admin-replica-assignment",
                         "config-sources-41", "list-config-resources"), _NO_ADMIN),
        "share-group": "Spark's Kafka source reads partitions by offset; it has no share-group (KIP-932) source",
    },
)
