"""Explicit replica assignments (#42): who leads, in which order replicas are listed, and that the
catalog keeps them across a restart."""

from __future__ import annotations

import uuid
from pathlib import Path

from rivven_kproto.broker.cluster import ClusterView, Node
from rivven_kproto.broker.topics import TopicMeta, TopicStore

TOPIC_ID = uuid.UUID(int=7)


def view(*nodes: int) -> ClusterView:
    return ClusterView(nodes[0], tuple(Node(n, "127.0.0.1", 9000 + n) for n in nodes), nodes[0])


def test_the_first_live_replica_of_an_assignment_leads() -> None:
    cluster = view(1, 2, 3)
    assert cluster.replicas(TOPIC_ID, 0, 3, [2, 3, 1]) == [2, 3, 1]
    assert cluster.leader(TOPIC_ID, 0, [3, 1]) == 3
    assert cluster.replicas(TOPIC_ID, 0, 2, [3, 1]) == [3, 1]
    # Broker 2 gone: the next replica leads (the store holds the data, so a live broker can).
    assert view(1, 3).replicas(TOPIC_ID, 0, 3, [2, 3, 1])[:2] == [3, 1]
    # No assignment: the rendezvous ranking, as before.
    assert cluster.replicas(TOPIC_ID, 0, 3) == cluster.ranked(TOPIC_ID, 0)


def test_the_catalog_keeps_assignments(tmp_path: Path) -> None:
    store = TopicStore(tmp_path)
    store.topics["t"] = TopicMeta("t", TOPIC_ID, 3, {}, 2, [[2, 1], [], [1, 2]])
    store.topics["plain"] = TopicMeta("plain", uuid.UUID(int=8), 1, {})
    store.save()
    again = TopicStore(tmp_path).topics
    assert (again["t"].replication_factor, again["t"].assigned(2), again["t"].assigned(1)) == (2, [1, 2], [])
    assert again["plain"].assignments == [] and again["plain"].assigned(0) == []
