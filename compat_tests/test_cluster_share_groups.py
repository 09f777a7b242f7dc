"""Share groups (KIP-932) on the three-broker PostgreSQL cluster, with the real client.

ShareGroupHeartbeat goes to the group's coordinator (FindCoordinator, key type GROUP); ShareFetch
and ShareAcknowledge go to each partition's leader, which keeps the share-partition and writes its
state to the database. A leader killed with SIGKILL mid-stream: its partitions move, the new
leader loads their share state, and every produced record is accepted exactly once as far as the
broker confirmed (nothing confirmed accepted is delivered again, nothing is lost).
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path

from confluent_kafka import ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from rivven_kproto.codec.enums import ConfigResourceType
from rivven_kproto.codec.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResource

from . import raw_client
from .broker_process import BrokerProcess
from .share_checker import Accepted, accept_until
from .test_cli import ok
from .test_cluster import NODES, all_see, bootstrap, create, described_by, produce, three_brokers
from .test_share_groups import BROKER_ENV as SHARE_ENV
from .txn_helpers import TIMEOUT_S, wait_for

PARTITIONS = 6
RECORDS = 600


def share_consumers(servers: str, group: str, topic: str, count: int) -> list[ShareConsumer]:
    consumers = []
    for _ in range(count):
        share = ShareConsumer({"bootstrap.servers": servers, "group.id": group,
                               "share.acknowledgement.mode": "explicit"})
        share.subscribe([topic])
        consumers.append(share)
    return consumers


def test_a_killed_leader_loses_no_record_and_redelivers_no_accepted_one(tmp_path: Path, postgres_url: str) -> None:
    env = {node: SHARE_ENV for node in NODES}
    with three_brokers(tmp_path, postgres_url, env=env) as cluster:
        servers = bootstrap(cluster)
        topic, group = f"sh-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
        create(servers, topic, PARTITIONS, 1)
        assert wait_for(lambda: all_see(cluster, set(NODES), topic), TIMEOUT_S)
        produced = produce(servers, topic, PARTITIONS, RECORDS, "r")
        assert len(produced) == RECORDS
        leaders = {p.partition_index: p.leader_id for p in described_by(cluster[1], [topic]).topics[0].partitions}
        victim = leaders[0]
        consumers = share_consumers(servers, group, topic, 2)
        accepted = Accepted()
        try:
            # Mid-stream: some records accepted, partition 0's among them (its leader has share
            # state to lose) ...
            first = {f"r{topic}-{i}".encode() for i in range(0, RECORDS, PARTITIONS)}
            assert accept_until(consumers, accepted,
                                lambda: len(accepted.confirmed) >= RECORDS // 3 and bool(first & accepted.confirmed),
                                4 * TIMEOUT_S)
            cluster[victim].kill()  # ... then the leader of partition 0 dies
            assert wait_for(lambda: all_see(cluster, set(NODES) - {victim}, topic), 2 * TIMEOUT_S)
            # Records after those of the moved partitions: a new leader that lost the share state
            # would start over and deliver the accepted ones again before these.
            produced |= produce(bootstrap(cluster), topic, PARTITIONS, PARTITIONS * 10, "after")
            finished = accept_until(consumers, accepted, lambda: accepted.confirmed >= produced, 6 * TIMEOUT_S)
        finally:
            for share in consumers:
                share.close()
        assert not accepted.violations, f"confirmed accepted, delivered again: {sorted(set(accepted.violations))[:20]}"
        assert finished, f"never accepted: {sorted(produced - accepted.confirmed)[:20]}"
        assert accepted.confirmed == produced
        assert len(produced) == RECORDS + PARTITIONS * 10
        # ... read ahead on a worker thread (server/share_loading.py), not on the event loop
        # and the state it read holds the group (the moved partition had state to carry over).
        loads = re.findall(rf"share state of {re.escape(topic)}-0 loaded \(read ahead\): (\d+) share groups",
                           "".join(cluster[n].log_text() for n in NODES if n != victim))
        assert loads, "no broker read the moved share-partition ahead"
        assert int(loads[-1]) >= 1, f"the new leader loaded no share group for partition 0: {loads}"


def group_config_on(broker: BrokerProcess, group: str, key: str) -> str | None:
    """The group's config as this very broker holds it (DescribeConfigs is answered locally)."""
    request = DescribeConfigsRequest(resources=[DescribeConfigsResource(
        resource_type=int(ConfigResourceType.GROUP), resource_name=group, configuration_keys=[key])],
        include_synonyms=False)
    with raw_client.connect(broker.bootstrap) as sock:
        (result,) = raw_client.call(sock, request, 4).results
    return next((c.value for c in result.configs if c.name == key), None)


def test_a_group_config_set_on_the_controller_reaches_every_leader(tmp_path: Path, postgres_url: str) -> None:
    """The brokers keep their defaults (latest, read_uncommitted); the group is set to earliest and
    read_committed through the cluster's controller, every broker follows it, the group reads what
    was produced before it joined from partitions led by every broker, and its lag is known on
    every partition (at read_committed the leaders' last stable offsets)."""
    env = {node: {"KPROTO_GROUP_SHARE_HEARTBEAT_INTERVAL_MS": "200"} for node in NODES}
    with three_brokers(tmp_path, postgres_url, env=env) as cluster:
        servers = bootstrap(cluster)
        group = f"g-{uuid.uuid4().hex[:6]}"
        for _ in range(5):  # leaders come from a hash of the topic id: several brokers, almost always
            topic = f"shc-{uuid.uuid4().hex[:6]}"
            create(servers, topic, 3, 1)
            assert wait_for(lambda name=topic: all_see(cluster, set(NODES), name), TIMEOUT_S)
            leaders = {p.leader_id for p in described_by(cluster[1], [topic]).topics[0].partitions}
            if len(leaders) >= 2:
                break
        assert len(leaders) >= 2, leaders  # partitions led by several brokers, not only one
        produced = produce(servers, topic, 3, 30, "before")
        admin = AdminClient({"bootstrap.servers": servers})
        entries = [ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET),
                   ConfigEntry("share.isolation.level", "read_committed", incremental_operation=AlterConfigOpType.SET)]
        for future in admin.incremental_alter_configs(
                [ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)]).values():
            future.result(TIMEOUT_S)
        seen = {n: None for n in NODES}

        def everyone_follows() -> bool:
            seen.update({n: group_config_on(cluster[n], group, "share.auto.offset.reset") for n in NODES})
            return all(value == "earliest" for value in seen.values())

        assert wait_for(everyone_follows, TIMEOUT_S), f"the brokers hold {seen}"
        consumers = share_consumers(servers, group, topic, 1)
        accepted = Accepted()
        try:
            finished = accept_until(consumers, accepted, lambda: accepted.confirmed >= produced, 4 * TIMEOUT_S)
        finally:
            for share in consumers:
                share.close()
        assert finished, f"never delivered: {sorted(produced - accepted.confirmed)[:20]} (leaders {sorted(leaders)})"
        assert not accepted.violations
        assert lags(servers, group) == {0: 0, 1: 0, 2: 0}  # -1 was a partition led elsewhere at read_committed
        produce(servers, topic, 3, 9, "after")
        assert sum(lags(servers, group).values()) == 9


def lags(servers: str, group: str) -> dict[int, int]:
    (described,) = ok(servers, "share-groups", "describe", group)["groups"]
    return {o["partition"]: o["lag"] for o in described["offsets"]}
