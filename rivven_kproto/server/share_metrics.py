"""Share groups' delivery counters (KIP-932) in the metrics registry, read from each share
coordinator's per-group ``ShareStats`` when scraped (see ``broker/share/stats.py``). On
PostgreSQL the partitions' leaders count what they deliver (``LeaderShares.stats``): a broker
exports the sum of its coordinators' and its leader's counts per group (each broker of a cluster
its own: a group's total is the sum over the brokers)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from rivven_kproto.broker.broker import Broker
from rivven_kproto.broker.share.stats import ShareStats


def share_group_families(broker: Broker) -> Iterator[Metric]:
    """Per group: members, records acquired, redelivered, acknowledged by type, archived, and
    lock expiries, for the share groups this broker coordinates."""
    members = GaugeMetricFamily("rivven_share_group_members", "Members of each share group.", labels=["group"])
    acquired = CounterMetricFamily("rivven_share_group_records_acquired",
                                   "Records acquired by share-group members since start.", labels=["group"])
    redelivered = CounterMetricFamily("rivven_share_group_records_redelivered",
                                      "Records acquired again (delivery count above 1) since start.", labels=["group"])
    acknowledged = CounterMetricFamily("rivven_share_group_records_acknowledged",
                                       "Records acknowledged since start, by type (accept, release, reject).",
                                       labels=["group", "type"])
    archived = CounterMetricFamily("rivven_share_group_records_archived",
                                   "Records archived (rejected, or at the delivery-count limit) since start.",
                                   labels=["group"])
    expiries = CounterMetricFamily("rivven_share_group_lock_expiries",
                                   "Records whose acquisition lock expired since start.", labels=["group"])
    for shard in list(broker.shards.values()):
        share = shard.share
        if share is None:
            continue
        for group_id, group in sorted(share.groups.items()):
            members.add_metric([group_id], len(group.members))
    for group_id, stats in sorted(_merged(broker).items()):
        acquired.add_metric([group_id], stats.acquired)
        redelivered.add_metric([group_id], stats.redelivered)
        for kind, count in stats.acknowledged.items():
            acknowledged.add_metric([group_id, kind], count)
        archived.add_metric([group_id], stats.archived)
        expiries.add_metric([group_id], stats.lock_expiries)
    yield from (members, acquired, redelivered, acknowledged, archived, expiries)


def _merged(broker: Broker) -> dict[str, ShareStats]:
    """Per group, the counts of the share coordinators here and of the leader's share partitions."""
    sources = [shard.share.stats for shard in list(broker.shards.values()) if shard.share is not None]
    if broker.leader_shares is not None:
        sources.append(broker.leader_shares.stats)
    merged: dict[str, ShareStats] = {}
    for stats_by_group in sources:
        for group_id, stats in list(stats_by_group.items()):
            total = merged.setdefault(group_id, ShareStats())
            total.acquired += stats.acquired
            total.redelivered += stats.redelivered
            for kind, count in stats.acknowledged.items():
                total.acknowledged[kind] = total.acknowledged.get(kind, 0) + count
            total.archived += stats.archived
            total.lock_expiries += stats.lock_expiries
    return merged
