"""python -m tools.bench.fetch_shape: what one Fetch returns from each broker for the consume workloads.

The consume workloads are bound by the client (the null broker, answering from memory, is no
faster), and confluent-kafka reads a response faster or slower depending on its shape. This
produces the consume workloads' topic (``produce-8p``) on our broker, the peer and the null broker,
then sends each the Fetch librdkafka sends by default (8 partitions at offset 1, 1 MiB each, 50 MiB
in all) and prints the bytes and record batches it returned per partition, beside the byte limits
Kafka applies (``partition_max_bytes`` per partition, ``max_bytes`` per response).

    python -m tools.bench.fetch_shape --peer tansu
"""

from __future__ import annotations

import argparse
import socket
import sys
from typing import Any

from rivven_kproto.codec.messages.fetch import FetchPartition, FetchRequest, FetchResponse, FetchTopic
from rivven_kproto.codec.records.batch import iter_headers
from rivven_kproto.net.protocol import ClientProtocol

from . import brokers
from . import workloads as w
from .runner import CONSUMED_PARTITIONS, CONSUMED_TOPIC

FETCH_VERSION = 11
PARTITION_MAX_BYTES = 1 << 20  # librdkafka's max.partition.fetch.bytes
MAX_BYTES = 50 << 20  # librdkafka's fetch.max.bytes


def fetch_request(topic: str, partitions: int, offset: int) -> FetchRequest:
    return FetchRequest(
        max_wait_ms=500, min_bytes=1, max_bytes=MAX_BYTES, isolation_level=0,
        topics=[FetchTopic(topic=topic, partitions=[
            FetchPartition(partition=p, fetch_offset=offset, partition_max_bytes=PARTITION_MAX_BYTES)
            for p in range(partitions)])],
        forgotten_topics_data=[],
    )


def fetch_once(address: str, topic: str, partitions: int, offset: int = 1) -> FetchResponse:
    protocol = ClientProtocol(client_id="fetch-shape")
    _, data = protocol.send_request(fetch_request(topic, partitions, offset), FETCH_VERSION)
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(data)
        while (answered := protocol.next_response()) is None:
            chunk = sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError(f"{address} closed the connection before answering the Fetch")
            protocol.receive_data(chunk)
    response = answered[1]
    assert isinstance(response, FetchResponse)
    return response


def batches(records: bytes) -> list[tuple[int, int]]:
    """(bytes, records) of each whole record batch in ``records`` (a partial one at the end, as
    Kafka may send, left out)."""
    return [(header.size, header.records_count) for _, header in iter_headers(records)]


def shape(response: FetchResponse) -> list[dict[str, Any]]:
    rows = []
    for topic in response.responses:
        for part in sorted(topic.partitions, key=lambda p: p.partition_index):
            records = part.records  # decoded: the bytes themselves (ExternalBytes is the server's sendfile)
            data = bytes(records) if isinstance(records, (bytes, bytearray, memoryview)) else b""
            found = batches(data)
            rows.append({"partition": part.partition_index, "bytes": len(data), "batches": len(found),
                         "records": sum(count for _, count in found)})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench.fetch_shape", description=__doc__.split("\n\n")[0])
    parser.add_argument("--peer", action="append", default=[], help="also this broker (tansu, postgresql, or a command)")
    parser.add_argument("--messages", type=int, default=500_000, help="produced before the Fetch (%(default)s)")
    args = parser.parse_args(argv)
    targets = [brokers.ours(), *(brokers.peer(spec) for spec in args.peer), brokers.null_broker()]
    for target in targets:
        running = brokers.Running(target, 0)
        try:
            w.produce(running.bootstrap, CONSUMED_TOPIC, args.messages, CONSUMED_PARTITIONS)
            rows = shape(fetch_once(running.bootstrap, CONSUMED_TOPIC, CONSUMED_PARTITIONS))
        finally:
            running.stop()
        total = sum(row["bytes"] for row in rows)
        print(f"{target.name}: one Fetch (8 partitions at offset 1, {PARTITION_MAX_BYTES} bytes each, "
              f"{MAX_BYTES} in all) returned {total} bytes")
        for row in rows:
            print(f"  partition {row['partition']}: {row['bytes']:>9} bytes, {row['batches']:>3} batches, "
                  f"{row['records']:>6} records")
    return 0


if __name__ == "__main__":
    sys.exit(main())
