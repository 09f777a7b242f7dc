"""A request asks the authorizer once per resource and operation, however many partitions name it.

Produce checked Write on the topic for every partition, in ``prepare`` and again in ``handle``:
16 decisions for one 8-partition request (measured for the 1,000-ACL benchmark of issue #37).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from rivven_kproto.broker.broker import Broker
from rivven_kproto.broker.config import BrokerConfig
from rivven_kproto.broker.security.acls import AclBinding, Operation, PatternType, Permission, ResourceType
from rivven_kproto.codec.messages.produce import (
    PartitionProduceData,
    ProduceRequest,
    ProduceResponse,
    TopicProduceData,
)
from rivven_kproto.codec.records.records import Record, build_batch
from rivven_kproto.server.context import RequestContext
from rivven_kproto.server.handlers import produce

NOW = 1_700_000_000_000


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    config = BrokerConfig(data_dir=tmp_path / "data", node_id=1, authorizer_enabled=True, super_users=("User:admin",))
    broker = Broker(config, NOW)
    broker.create_topic("orders", 8, 1, {}, NOW)
    assert broker.authorizer is not None
    broker.authorizer.create([AclBinding(ResourceType.TOPIC, "ord", PatternType.PREFIXED, "User:ANONYMOUS", "*",
                                         Operation.WRITE, Permission.ALLOW)])
    yield broker
    broker.close()


def test_one_decision_per_topic_for_a_produce_of_eight_partitions(broker: Broker, monkeypatch: pytest.MonkeyPatch) -> None:
    assert broker.authorizer is not None
    asked: list[tuple[object, ...]] = []
    decide = broker.authorizer.authorize
    monkeypatch.setattr(broker.authorizer, "authorize", lambda *args: asked.append(args) or decide(*args))
    batch = build_batch([Record(offset_delta=0, timestamp_delta=0, key=None, value=b"v")], base_timestamp=NOW)
    request = ProduceRequest(transactional_id=None, acks=1, timeout_ms=1000, topic_data=[
        TopicProduceData(name="orders", partition_data=[PartitionProduceData(index=p, records=batch) for p in range(8)])])
    ctx = RequestContext(broker, broker.config, NOW, "bench")

    async def prepare_then_handle() -> object:
        await produce.prepare(ctx, request, trio.CapacityLimiter(1))
        return produce.handle(ctx, request, 9)

    response = trio.run(prepare_then_handle)
    assert isinstance(response, ProduceResponse)
    errors = [p.error_code for t in response.responses for p in t.partition_responses]
    assert errors == [0] * 8
    assert [args[2:] for args in asked] == [(Operation.WRITE, ResourceType.TOPIC, "orders")]
