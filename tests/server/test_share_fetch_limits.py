"""ShareFetch's MinBytes and v2's record-limit acquire mode (KIP-1206) through the real handlers
on a real Broker: one member, one partition, records appended between requests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rivven_kproto.broker.broker import Broker
from rivven_kproto.broker.config import BrokerConfig
from rivven_kproto.broker.share.config import ShareConfig
from rivven_kproto.codec.messages.share_fetch import ShareFetchPartition, ShareFetchRequest, ShareFetchTopic
from rivven_kproto.codec.messages.share_group_heartbeat import ShareGroupHeartbeatRequest
from rivven_kproto.server.context import RequestContext
from rivven_kproto.server.delayed import Pending
from rivven_kproto.server.handlers import share_fetch, share_group_heartbeat

from ..broker.log_helpers import make_batch

NOW = 1_700_000_000_000


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    broker = Broker(BrokerConfig(data_dir=tmp_path / "data", share=ShareConfig(auto_offset_reset="earliest")), NOW)
    broker.create_topic("t", 1, 1, {}, NOW)
    yield broker
    broker.close()


@pytest.fixture
def ctx(broker: Broker) -> RequestContext:
    return RequestContext(broker, broker.config, NOW, "cli", "/10.0.0.1")


def join(ctx: RequestContext) -> str:
    request = ShareGroupHeartbeatRequest(group_id="g", member_id="m-1", member_epoch=0, subscribed_topic_names=["t"])
    response = share_group_heartbeat.handle(ctx, request, 1)
    assert response.error_code == 0, response.error_message
    return response.member_id


def fetch(ctx: RequestContext, epoch: int, version: int = 2, **fields: Any) -> Any:
    topic_id = ctx.broker.topics["t"].meta.topic_id
    request = ShareFetchRequest(group_id="g", member_id="m-1", share_session_epoch=epoch, max_wait_ms=0, min_bytes=1,
                                max_records=500, batch_size=500, topics=[ShareFetchTopic(
                                    topic_id=topic_id, partitions=[ShareFetchPartition(partition_index=0,
                                                                                       acknowledgement_batches=[])])],
                                forgotten_topics_data=[])
    for name, value in fields.items():
        setattr(request, name, value)
    return share_fetch.handle(ctx, ShareFetchRequest.decode(request.encode(version), version), version)


def acquired(response: Any) -> list[tuple[int, int]]:
    (topic,) = response.responses
    (partition,) = topic.partitions
    assert partition.error_code == 0
    return [(a.first_offset, a.last_offset) for a in partition.acquired_records]


def test_record_limit_acquires_part_of_a_batch_and_the_rest_next(ctx: RequestContext, broker: Broker) -> None:
    join(ctx)
    broker.partition("t", 0).append(make_batch(10), NOW)
    assert acquired(fetch(ctx, 0, max_records=3, share_acquire_mode=1)) == [(0, 2)]
    assert acquired(fetch(ctx, 1, max_records=3, share_acquire_mode=1)) == [(3, 5)]
    assert acquired(fetch(ctx, 2, max_records=3)) == [(6, 9)]  # batch-optimized: the rest of the batch


def test_batch_optimized_takes_whole_batches(ctx: RequestContext, broker: Broker) -> None:
    join(ctx)
    broker.partition("t", 0).append(make_batch(10), NOW)
    assert acquired(fetch(ctx, 0, version=1, max_records=3)) == [(0, 9)]


def test_min_bytes_waits_for_more_and_answers_everything_acquired(ctx: RequestContext, broker: Broker) -> None:
    join(ctx)
    log = broker.partition("t", 0)
    log.append(make_batch(2, value_size=10), NOW)
    pending = fetch(ctx, 0, max_wait_ms=30_000, min_bytes=2000)
    assert isinstance(pending, Pending)  # 2 small records acquired: fewer bytes than MinBytes
    assert pending.complete(NOW + 1) is None  # nothing new: still waiting
    log.append(make_batch(5, value_size=1000), NOW)
    response = pending.complete(NOW + 2)
    assert response is not None
    assert acquired(response) == [(0, 1), (2, 6)]
    (partition,) = response.responses[0].partitions
    assert len(partition.records) >= 5000


def test_min_bytes_not_reached_answers_what_it_holds_at_max_wait(ctx: RequestContext, broker: Broker) -> None:
    join(ctx)
    broker.partition("t", 0).append(make_batch(2, value_size=10), NOW)
    pending = fetch(ctx, 0, max_wait_ms=500, min_bytes=2000)
    assert isinstance(pending, Pending)
    assert acquired(pending.expire(NOW + 500)) == [(0, 1)]
