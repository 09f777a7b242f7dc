"""Merging the leaders' answers into a response (pure): the request's order, every partition
answered once, whichever broker answered it."""

from __future__ import annotations

from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.fetch import FetchPartition, FetchRequest, FetchResponse, FetchTopic
from rivven_kproto.codec.messages.produce import (
    PartitionProduceData,
    ProduceRequest,
    ProduceResponse,
    TopicProduceData,
    TopicProduceResponse,
)
from rivven_kproto.server.handlers import fetch, produce
from rivven_kproto.server.leader_forwarding import Split, has_records, local_request, merge
from rivven_kproto.server.routes import Leader


def _shape(route: object) -> object:
    assert isinstance(route, Leader)  # Produce and Fetch are answered by each partition's leader
    return route.shape


SHAPE_OF_PRODUCE, SHAPE_OF_FETCH = _shape(produce.ROUTE), _shape(fetch.ROUTE)


def produce_request(layout: list[tuple[str, list[int]]]) -> ProduceRequest:
    return ProduceRequest(transactional_id=None, acks=-1, timeout_ms=1000, topic_data=[
        TopicProduceData(name=name, partition_data=[PartitionProduceData(index=i, records=b"") for i in indexes])
        for name, indexes in layout])


def answered(index: int, offset: int):  # noqa: ANN201 - a PartitionProduceResponse
    answer = produce.error_partition(index, Errors.NONE)
    answer.base_offset = offset
    return answer


def test_forwarded_and_local_answers_come_back_in_the_requests_order() -> None:
    request = produce_request([("a", [2, 0, 1]), ("b", [0])])
    local = ProduceResponse(throttle_time_ms=0, responses=[
        TopicProduceResponse(name="a", partition_responses=[answered(0, 10)])])
    forwarded = {("a", 2): answered(2, 20), ("a", 1): answered(1, 30), ("b", 0): answered(0, 40)}
    merged = merge(SHAPE_OF_PRODUCE, request, local, forwarded)
    assert [(t.name, [(p.index, p.base_offset) for p in t.partition_responses]) for t in merged.responses] == [
        ("a", [(2, 20), (0, 10), (1, 30)]), ("b", [(0, 40)])]


def test_a_partition_nobody_answered_is_an_error_not_a_gap() -> None:
    request = produce_request([("a", [0, 1])])
    local = ProduceResponse(throttle_time_ms=0, responses=[
        TopicProduceResponse(name="a", partition_responses=[answered(0, 1)])])
    merged = merge(SHAPE_OF_PRODUCE, request, local, {})
    assert [p.error_code for p in merged.responses[0].partition_responses] == [Errors.NONE, Errors.UNKNOWN_SERVER_ERROR]


def test_fetch_answers_merge_by_topic_and_partition_and_records_end_the_local_wait() -> None:
    request = FetchRequest(replica_id=-1, max_wait_ms=500, min_bytes=1, topics=[FetchTopic(topic="t", partitions=[
        FetchPartition(partition=i, fetch_offset=0, partition_max_bytes=1) for i in (1, 0)])],
        forgotten_topics_data=[])
    empty = fetch.error_partition(0, Errors.NONE)
    with_data = fetch.error_partition(1, Errors.NONE)
    with_data.records = b"batch"
    local = FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=[])
    merged = merge(SHAPE_OF_FETCH, request, local, {("t", 0): empty, ("t", 1): with_data})
    assert [p.partition_index for p in merged.responses[0].partitions] == [1, 0]
    assert has_records({("t", 1): with_data}) and not has_records({("t", 0): empty})
    assert local_request(Split(request, {}), {("t", 1): with_data}).max_wait_ms == 0
    assert local_request(Split(request, {}), {("t", 0): empty}).max_wait_ms == 500
