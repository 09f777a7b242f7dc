"""Driver-side planning: which topic-partitions, resolved offsets, and Spark's offset ranges.

Everything here runs in the Spark driver's Python planner (or the streaming source runner) and
talks to the broker with :mod:`.wire`: metadata for the subscription, ListOffsets for
earliest/latest (latest is the last stable offset under read_committed, the high watermark
otherwise) and for timestamps. Errors use the messages of Spark's Kafka connector.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

from rivven_kproto.codec.enums import EARLIEST, LATEST

from .options import KafkaOptions, OffsetSpec, TopicPartition, show_partitions
from .wire import Cluster

log = logging.getLogger(__name__)

DATA_LOSS_PREFIX = (
    "[KAFKA_DATA_LOSS] Some data may have been lost because they are not available in Kafka any more; "
    "either the data was aged out by Kafka or the topic may have been deleted before all the data in the "
    "topic was processed. If you don't want your streaming query to fail on such cases, set the source "
    "option failOnDataLoss to false. Reason: "
)


class KafkaDataLossError(RuntimeError):
    """Offsets that should be readable are gone (failOnDataLoss=true)."""


@dataclass(frozen=True)
class OffsetRange:
    topic: str
    partition: int
    start: int  # inclusive
    end: int  # exclusive

    @property
    def size(self) -> int:
        return self.end - self.start


def discover(cluster: Cluster, options: KafkaOptions) -> list[TopicPartition]:
    """The topic-partitions the subscription covers right now, sorted."""
    if options.strategy == "assign":
        return sorted(options.assign)
    if options.strategy == "subscribe":
        metas = cluster.partitions(options.topics)
        missing = sorted(set(options.topics) - set(metas))
        if missing:  # Spark's connector reads nothing from them, silently; say so
            log.warning("subscribed topic(s) %s do not exist: no rows from them", ", ".join(missing))
    else:
        everything = cluster.metadata(None)
        names = [m.name for m in everything.values() if not m.internal and options.topic_matches(m.name)]
        metas = cluster.partitions(names) if names else {}
    return sorted((name, p) for name, meta in metas.items() for p in meta.leaders)


def resolve(
    cluster: Cluster,
    options: KafkaOptions,
    spec: OffsetSpec,
    partitions: list[TopicPartition],
    *,
    position: str,
) -> dict[TopicPartition, int]:
    """Concrete offsets for ``partitions`` from a starting or ending spec."""
    if not partitions:
        return {}
    level = options.isolation_level
    if spec.kind in ("earliest", "latest"):
        stamp = EARLIEST if spec.kind == "earliest" else LATEST
        found = cluster.list_offsets(dict.fromkeys(partitions, stamp), level)
        return {tp: found[tp].offset for tp in partitions}
    if spec.kind == "offsets":
        if set(spec.offsets) != set(partitions):
            raise ValueError(
                "[KAFKA_START_OFFSET_DOES_NOT_MATCH_ASSIGNED] Partitions specified for Kafka start offsets "
                "don't match what are assigned. Maybe topic partitions are created or deleted while the query "
                "is running. Use -1 for latest, -2 for earliest. "
                f"Specified: {show_partitions(spec.offsets)} Assigned: {show_partitions(partitions)}"
            )
        special = {tp: o for tp, o in spec.offsets.items() if o in (EARLIEST, LATEST)}
        found = cluster.list_offsets(special, level) if special else {}
        return {tp: (found[tp].offset if tp in found else spec.offsets[tp]) for tp in partitions}
    if spec.kind == "timestamps":
        if set(spec.offsets) != set(partitions):
            raise ValueError(
                f"[KAFKA_TIMESTAMP_OFFSET_DOES_NOT_MATCH_ASSIGNED] Partitions specified for Kafka timestamp based "
                f"{position} offsets don't match what are assigned. Maybe topic partitions are created or deleted "
                "while the query is running, or you didn't specify all the partitions. "
                f"Specified: {show_partitions(spec.offsets)} Assigned: {show_partitions(partitions)}"
            )
        stamps = dict(spec.offsets)
    else:  # one timestamp for every partition
        stamps = dict.fromkeys(partitions, spec.timestamp)
    found = cluster.list_offsets(stamps, level)
    out = {}
    missing = []
    for tp in partitions:
        offset = found[tp].offset
        if offset < 0:  # no record at or after the timestamp
            if spec.strategy_on_no_match == "error" and position == "starting":
                raise ValueError(
                    f"No offset matched from request of topic-partition {tp[0]}-{tp[1]} and timestamp {stamps[tp]}."
                )
            missing.append(tp)
        out[tp] = offset
    if missing:  # the end of the partition: "latest", like Spark
        latest = cluster.list_offsets(dict.fromkeys(missing, LATEST), level)
        out.update({tp: latest[tp].offset for tp in missing})
    return out


def split_ranges(
    ranges: list[OffsetRange], min_partitions: int | None, max_records: int | None = None
) -> list[OffsetRange]:
    """Spark's KafkaOffsetRangeCalculator: drop empty ranges, cut ranges above maxRecordsPerPartition
    into equal pieces, then split the biggest ones further to reach minPartitions."""
    ranges = [r for r in ranges if r.size > 0]
    if max_records is not None:
        ranges = [piece for r in ranges for piece in _split_evenly(r, -(-r.size // max_records))]
    if min_partitions is None or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)

    def part_count(size: int, total_size: int, parts: int) -> int:
        return max(math.floor(size / total_size * parts + 0.5), 1)  # Scala's math.round

    unsplit = {r for r in ranges if part_count(r.size, total, min_partitions) == 1}
    unsplit_size = sum(r.size for r in unsplit)
    split_total = total - unsplit_size
    split_min = max(min_partitions - len(unsplit), 1)
    out = []
    for r in ranges:
        parts = 1 if r in unsplit else part_count(r.size, split_total, split_min)
        out.extend(_split_evenly(r, parts))
    return out


def _split_evenly(r: OffsetRange, parts: int) -> list[OffsetRange]:
    """``parts`` consecutive pieces; the last ones take the rounding, as in Spark."""
    out = []
    remaining = r.size
    start = r.start
    for part in range(parts):
        this = remaining // (parts - part)
        remaining -= this
        end = min(start + this, r.end)
        if end > start:
            out.append(OffsetRange(r.topic, r.partition, start, end))
        start = end
    return out


def data_loss(message: str, options: KafkaOptions) -> None:
    """Raise with Spark's data-loss wording, or do nothing when failOnDataLoss is false."""
    if options.fail_on_data_loss:
        raise KafkaDataLossError(DATA_LOSS_PREFIX + message)


def batch_ranges(cluster: Cluster, options: KafkaOptions) -> list[OffsetRange]:
    """The offset ranges of a batch query (default earliest .. latest)."""
    partitions = discover(cluster, options)
    if options.strategy == "assign":
        known = set(discover_all(cluster, {t for t, _ in partitions}))
        unknown = [tp for tp in partitions if tp not in known]
        if unknown:
            raise ValueError(f"Assigned topic-partitions do not exist: {show_partitions(unknown)}")
    starting = resolve(cluster, options, options.starting or OffsetSpec("earliest"), partitions, position="starting")
    ending = resolve(cluster, options, options.ending or OffsetSpec("latest"), partitions, position="ending")
    ranges = []
    for tp in partitions:
        start, end = starting[tp], ending[tp]
        if start > end:
            raise ValueError(
                f"[RESOLVED_START_OFFSET_GREATER_THAN_END_OFFSET] The resolved start offset {start} is greater than "
                f"the resolved end offset {end} for topic {tp[0]} partition {tp[1]}."
            )
        ranges.append(OffsetRange(tp[0], tp[1], start, end))
    return split_ranges(ranges, options.min_partitions, options.max_records_per_partition)


def discover_all(cluster: Cluster, topics: set[str]) -> list[TopicPartition]:
    metas = cluster.partitions(topics)
    return [(name, p) for name, meta in metas.items() for p in meta.leaders]
