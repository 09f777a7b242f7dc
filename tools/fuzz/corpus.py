"""Seed inputs for each target: well-formed examples the mutator starts from."""

from __future__ import annotations

import struct

from rivven_kproto.codec.connection import encode_request
from rivven_kproto.codec.headers import RequestHeader
from rivven_kproto.codec.messages.metadata import MetadataRequest, MetadataRequestTopic
from rivven_kproto.codec.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from rivven_kproto.codec.records.records import Record, build_batch, encode_record

from .targets import REQUEST_CHOICES, request_header


def _records(count: int) -> list[Record]:
    return [
        Record(offset_delta=i, timestamp_delta=i, key=b"key-%d" % i if i % 3 else None, value=b"v" * i,
               headers=[("h", b"x")] if i % 2 else [])
        for i in range(count)
    ]


def _rich_requests() -> list[tuple[RequestHeader, object]]:
    batch = build_batch(_records(3), base_timestamp=1_700_000_000_000)
    produce = ProduceRequest(
        transactional_id=None, acks=-1, timeout_ms=1000,
        topic_data=[TopicProduceData(name="t", partition_data=[PartitionProduceData(index=0, records=batch)])],
    )
    metadata = MetadataRequest(topics=[MetadataRequestTopic(name="a"), MetadataRequestTopic(name="b")])
    return [
        (RequestHeader(request_api_key=0, request_api_version=9, correlation_id=1, client_id="seed"), produce),
        (RequestHeader(request_api_key=3, request_api_version=12, correlation_id=2, client_id="seed"), metadata),
    ]


def request_seeds() -> list[bytes]:
    seeds = []
    for index, (cls, version) in enumerate(REQUEST_CHOICES):
        body = encode_request(
            RequestHeader(request_api_key=cls.API_KEY, request_api_version=version, correlation_id=7, client_id="fuzz"),
            cls(),
        )[4 + len(request_header(cls, version)) :]
        seeds.append(index.to_bytes(2, "big") + body)
    return seeds


def frame_seeds() -> list[bytes]:
    frames = [
        encode_request(
            RequestHeader(request_api_key=cls.API_KEY, request_api_version=version, correlation_id=1, client_id="s"),
            cls(),
        )
        for cls, version in REQUEST_CHOICES
    ]
    frames += [encode_request(header, request) for header, request in _rich_requests()]  # type: ignore[arg-type]
    return frames + [frames[0] + frames[-1]]


def batch_seeds() -> list[bytes]:
    seeds = []
    for count in (0, 1, 3, 7):
        payload = b"".join(encode_record(r) for r in _records(count))
        for mode in range(11):
            seeds.append(struct.pack(">Bii", mode, count, max(count - 1, 0)) + payload)
    return seeds


SEEDS = {"frame": frame_seeds, "request": request_seeds, "batch": batch_seeds}
