"""A response with file regions encodes to pieces that add up to the bytes encoding (issue #22)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from rivven_kproto.broker.log.region import FileRegion
from rivven_kproto.codec.connection import encode_response, encode_response_frame
from rivven_kproto.codec.headers import RequestHeader
from rivven_kproto.codec.messages.fetch import (
    AbortedTransaction,
    FetchableTopicResponse,
    FetchRequest,
    FetchResponse,
    PartitionData,
)
from rivven_kproto.codec.schema import EncodeError
from rivven_kproto.codec.splice import ExternalBytes, Frame


@pytest.fixture
def segment(tmp_path: Path) -> Iterator[tuple[int, bytes]]:
    data = os.urandom(300_000)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    yield fd, data
    os.close(fd)


def region(fd: int, position: int, length: int) -> FileRegion:
    return FileRegion([(os.dup(fd), position, length)], [length], [0])


def response(records: list[bytes | ExternalBytes | None]) -> FetchResponse:
    partitions = [
        PartitionData(partition_index=i, error_code=0, high_watermark=100 + i, last_stable_offset=90, log_start_offset=0,
                      aborted_transactions=[AbortedTransaction(producer_id=7, first_offset=3)] if i % 2 else None,
                      preferred_read_replica=-1, records=r)
        for i, r in enumerate(records)
    ]
    return FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=[
        FetchableTopicResponse(topic="t-a", partitions=partitions[:2]),
        FetchableTopicResponse(topic="t-b", partitions=partitions[2:]),
    ])


@pytest.mark.parametrize("version", sorted(FetchRequest.VALID_VERSIONS))
def test_pieces_add_up_to_the_bytes_encoding(segment: tuple[int, bytes], version: int) -> None:
    fd, data = segment
    spans = [(0, 70_000), (70_000, 1), (100_000, 200_000)]
    header = RequestHeader(request_api_key=1, request_api_version=version, correlation_id=42, client_id="c")
    regions = [region(fd, p, n) for p, n in spans]
    as_bytes = [data[p:p + n] for p, n in spans]
    frame = encode_response_frame(header, response([regions[0], b"small", regions[1], None, regions[2]]))
    expected = encode_response(header, response([as_bytes[0], b"small", as_bytes[1], None, as_bytes[2]]))
    assert isinstance(frame, Frame)
    assert frame.size == len(expected)
    assert frame.external == regions
    assert frame.materialize() == expected
    frame.release()
    assert all(r.parts == [] for r in regions)


def test_without_regions_the_frame_is_plain_bytes() -> None:
    header = RequestHeader(request_api_key=1, request_api_version=12, correlation_id=1, client_id="c")
    payload = response([b"a", b"bb", None])
    assert encode_response_frame(header, payload) == encode_response(header, payload)


def test_the_bytes_encoder_refuses_a_region(segment: tuple[int, bytes]) -> None:
    fd, _ = segment
    held = region(fd, 0, 10)
    header = RequestHeader(request_api_key=1, request_api_version=11, correlation_id=1, client_id="c")
    with pytest.raises(EncodeError, match="splicing encoder"):
        encode_response(header, response([held]))
    held.release()
