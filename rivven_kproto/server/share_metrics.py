"""Share groups' delivery counters (KIP-932) in the metrics registry, read from each share
coordinator's per-group ``ShareStats`` when scraped (see ``broker/share/stats.py``)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from rivven_kproto.broker.broker import Broker


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
        for group_id, stats in sorted(share.stats.items()):
            acquired.add_metric([group_id], stats.acquired)
            redelivered.add_metric([group_id], stats.redelivered)
            for kind, count in stats.acknowledged.items():
                acknowledged.add_metric([group_id, kind], count)
            archived.add_metric([group_id], stats.archived)
            expiries.add_metric([group_id], stats.lock_expiries)
    yield from (members, acquired, redelivered, acknowledged, archived, expiries)
