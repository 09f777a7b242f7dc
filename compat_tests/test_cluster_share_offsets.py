"""Share-group offsets on the three-broker PostgreSQL cluster, with the real CLI and client.

``kproto share-groups describe`` is answered by the group's coordinator from the partitions'
share-state logs (kept by their leaders, spread over the brokers); ``reset-offsets`` is made by
each partition's leader (the coordinator forwards it); the reset is durable and is what the next
leader serves: a leader killed after it, its partitions' records come back from the new start.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from .test_cli import ok
from .test_cluster import NODES, all_see, bootstrap, create, described_by, produce, three_brokers
from .test_share_groups import BROKER_ENV as SHARE_ENV
from .test_share_groups import consumer
from .txn_helpers import TIMEOUT_S, wait_for

PARTITIONS = 6
RECORDS = 120


def consume_all(servers: str, group: str, topic: str, expected: set[bytes]) -> set[bytes]:
    """One share consumer (implicit acknowledgement) until it saw ``expected``, then it commits
    and leaves; what it saw."""
    share = consumer(servers, group, topic)
    seen: set[bytes] = set()
    try:
        assert wait_for(lambda: _poll(share, seen) >= expected, 6 * TIMEOUT_S), sorted(expected - seen)[:20]
        share.commit_sync(TIMEOUT_S)
    finally:
        share.close()
    return seen


def _poll(share: Any, seen: set[bytes]) -> set[bytes]:
    seen.update(m.value() for m in share.poll(0.5) if not m.error())
    return seen


def described(servers: str, group: str) -> dict[str, Any]:
    (group_info,) = ok(servers, "share-groups", "describe", group)["groups"]
    return dict(group_info)


def offsets(servers: str, group: str) -> dict[int, tuple[int, int]]:
    return {o["partition"]: (o["start_offset"], o["lag"]) for o in described(servers, group)["offsets"]}


def test_describe_and_reset_offsets_on_the_cluster(tmp_path: Path, postgres_url: str) -> None:
    env = {node: SHARE_ENV for node in NODES}
    with three_brokers(tmp_path, postgres_url, env=env) as cluster:
        servers = bootstrap(cluster)
        topic, group = f"sho-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
        create(servers, topic, PARTITIONS, 1)
        assert wait_for(lambda: all_see(cluster, set(NODES), topic), TIMEOUT_S)
        produced = produce(servers, topic, PARTITIONS, RECORDS, "r")
        assert len(produced) == RECORDS
        leaders = {p.partition_index: p.leader_id for p in described_by(cluster[1], [topic]).topics[0].partitions}
        assert len(set(leaders.values())) > 1, leaders  # the state is kept by several brokers

        assert consume_all(servers, group, topic, produced) == produced
        assert wait_for(lambda: described(servers, group)["state"] == "Empty", TIMEOUT_S)
        before = offsets(servers, group)
        assert sorted(before) == list(range(PARTITIONS)), before
        assert sum(start for start, _ in before.values()) == RECORDS and {lag for _, lag in before.values()} == {0}

        done = ok(servers, "share-groups", "reset-offsets", group, "--topic", topic, "--to-earliest", "--execute")
        assert done["executed"] is True, done
        assert offsets(servers, group) == {p: (0, before[p][0]) for p in range(PARTITIONS)}

        victim = next(node for node in leaders.values() if node != 1)  # a leader, not the first broker
        cluster[victim].kill()
        assert wait_for(lambda: all_see(cluster, set(NODES) - {victim}, topic), 2 * TIMEOUT_S)
        servers = bootstrap(cluster)
        assert consume_all(servers, group, topic, produced) == produced  # from the new starts, everywhere
