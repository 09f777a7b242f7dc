"""Reading partitions' share-state logs (``share_state_log.py``) without leading the partitions.

The group's coordinator answers DescribeShareGroupOffsets (Kafka answers it from the share
coordinator's ReadShareGroupStateSummary) from what the partitions' leaders made durable: it
replays each partition's ``share/<topic id>/<partition>`` log (snapshot, then the entries after
it) read-only, never writing to it, so it is correct wherever the leaders are and while they move:
a leader answers a ShareFetch or ShareAcknowledge only after its state is in these rows. One
query per table for any number of partitions; run on a worker thread.

DeleteTopics drops a partition's share-state log with its rows (``queries.delete_partition``).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from rivven_kproto.broker.durable.log import scan
from rivven_kproto.broker.share.config import ShareConfig
from rivven_kproto.broker.share.partition import SharePartition
from rivven_kproto.broker.share.summary import group_states

from .pool import PgPool
from .share_state_log import share_log_name

Key = tuple[uuid.UUID, int]  # (topic id, partition)
PartitionKey = tuple[str, int]  # (topic, partition)


def read_share_logs(pool: PgPool, keys: Sequence[Key]) -> dict[Key, list[bytes]]:
    """Each partition's share-state payloads in replay order (none: no share group read it)."""
    names = {share_log_name(*key): key for key in keys}
    if not names:
        return {}
    found: dict[Key, list[bytes]] = {}
    base: dict[str, int] = {}
    with pool.connection() as conn, conn.transaction():  # one snapshot of both tables
        for name, seq, data in conn.execute(
                "SELECT name, seq, payloads FROM kproto_coordinator_snapshots WHERE name = ANY(%s)",
                (list(names),)).fetchall():
            payloads, _ = scan(bytes(data))
            found[names[name]] = payloads
            base[name] = seq
        for name, seq, payload in conn.execute(
                "SELECT name, seq, payload FROM kproto_coordinator_log WHERE name = ANY(%s) ORDER BY name, seq",
                (list(names),)).fetchall():
            if seq >= base.get(name, 0):
                found.setdefault(names[name], []).append(bytes(payload))
    return found


def partition_ends(pool: PgPool, keys: Sequence[Key]) -> dict[Key, int]:
    """Each partition's next offset as committed (its high watermark on this engine)."""
    if not keys:
        return {}
    with pool.connection() as conn:
        rows: list[Any] = conn.execute(
            "SELECT topic_id, partition, next_offset FROM kproto_partitions"
            " WHERE (topic_id, partition) IN (SELECT * FROM unnest(%s::uuid[], %s::int[]))",
            ([k[0] for k in keys], [k[1] for k in keys])).fetchall()
    return {(row[0], row[1]): int(row[2]) for row in rows}


def group_summary(storage: Any, config: ShareConfig, group_id: str, keys: Mapping[Key, PartitionKey],
                  ) -> tuple[dict[PartitionKey, SharePartition], dict[PartitionKey, int]]:
    """Worker thread: the group's share-partitions among ``keys`` ((topic id, partition) -> (topic,
    partition)) as their logs hold them, and those partitions' high watermarks."""
    pool: PgPool = storage.pool
    logs = read_share_logs(pool, list(keys))
    states = {key: state for key, state in group_states(config, logs, group_id).items() if key in keys.values()}
    ends = {keys[key]: end for key, end in partition_ends(pool, list(keys)).items()}
    return states, ends
