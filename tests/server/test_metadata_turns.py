"""A Metadata request naming many topics is answered a slice per event-loop turn, with the same
answer (issue #37 item 5: one anonymous request naming 24,000 topics stalled every client).

Deterministic: a task beside ``prepare`` counts the turns it gets; no clock is involved.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from rivven_kproto.broker.broker import Broker
from rivven_kproto.broker.config import BrokerConfig
from rivven_kproto.broker.security.acls import AclBinding, Operation, PatternType, Permission, ResourceType
from rivven_kproto.codec.messages.metadata import MetadataRequest, MetadataRequestTopic
from rivven_kproto.server.context import RequestContext
from rivven_kproto.server.handlers import metadata

NOW = 1_700_000_000_000


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    config = BrokerConfig(data_dir=tmp_path / "data", node_id=1, authorizer_enabled=True, super_users=("User:admin",))
    broker = Broker(config, NOW)
    for name in ("visible-1", "visible-2", "hidden"):
        broker.create_topic(name, 2, 1, {}, NOW)
    assert broker.authorizer is not None
    broker.authorizer.create([AclBinding(ResourceType.TOPIC, "visible-", PatternType.PREFIXED, "User:ANONYMOUS", "*",
                                         Operation.READ, Permission.ALLOW)])
    yield broker
    broker.close()


def request(count: int) -> MetadataRequest:
    names = ["visible-1", "hidden", "visible-2", "visible-1"] + [f"absent-{i}" for i in range(count)]
    return MetadataRequest(topics=[MetadataRequestTopic(name=name) for name in names], allow_auto_topic_creation=False,
                           include_cluster_authorized_operations=False, include_topic_authorized_operations=True)


def test_many_named_topics_leave_the_loop_to_others_and_answer_the_same(broker: Broker) -> None:
    hostile = request(4 * metadata.TOPICS_PER_TURN)  # 4 slices: 4 turns, 3 at least counted
    reference = metadata.handle(RequestContext(broker, broker.config, NOW, "ref"), hostile, 12)
    ctx = RequestContext(broker, broker.config, NOW, "hostile")

    async def main() -> int:
        turns = 0

        async def other_client() -> None:
            nonlocal turns
            while True:
                await trio.lowlevel.checkpoint()
                turns += 1

        async with trio.open_nursery() as nursery:
            nursery.start_soon(other_client)
            await trio.lowlevel.checkpoint()
            before = turns
            await metadata.prepare(ctx, hostile, trio.CapacityLimiter(1))
            during = turns - before
            nursery.cancel_scope.cancel()
        return during

    assert trio.run(main) >= 3
    answer = metadata.handle(ctx, hostile, 12)
    assert answer == reference
    by_name = {topic.name: topic for topic in answer.topics}
    assert by_name["visible-1"].error_code == 0 and by_name["hidden"].error_code != 0
    assert by_name["visible-1"].topic_authorized_operations == reference.topics[0].topic_authorized_operations > 0
