"""How long other clients wait while one client sends hostile input (issue #15's acceptance figure).

    python tools/hostile_latency.py --bootstrap 127.0.0.1:9092 [--pid BROKER_PID]

A probe connection sends ApiVersions every 10 ms throughout; each case below runs in turn on
its own connections, and the probe's round trips during the case are reported (p50, p99, max),
with the broker's RSS before and after when ``--pid`` is given. Bounded: every case has a fixed
size and the whole run takes well under a minute.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import struct
import threading
import time
from collections.abc import Callable
from pathlib import Path

from rivven_kproto.codec.compression import Compression, compress
from rivven_kproto.codec.connection import encode_request
from rivven_kproto.codec.headers import RequestHeader
from rivven_kproto.codec.messages.api_versions import ApiVersionsRequest
from rivven_kproto.codec.messages.metadata import MetadataRequest, MetadataRequestTopic
from rivven_kproto.codec.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from rivven_kproto.codec.records.records import Record, assemble_batch, encode_record

PROBE_INTERVAL_S = 0.01


def connect(bootstrap: str) -> socket.socket:
    host, port = bootstrap.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=120)


def read_frame(sock: socket.socket) -> bytes:
    def exact(size: int) -> bytes:
        data = b""
        while len(data) < size:
            chunk = sock.recv(size - len(data))
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        return data

    (size,) = struct.unpack(">i", exact(4))
    return exact(size)


def send(sock: socket.socket, api_key: int, version: int, request: object) -> None:
    header = RequestHeader(request_api_key=api_key, request_api_version=version, correlation_id=1, client_id="hostile")
    sock.sendall(encode_request(header, request))  # type: ignore[arg-type]


class Probe(threading.Thread):
    def __init__(self, bootstrap: str) -> None:
        super().__init__(daemon=True)
        self.sock = connect(bootstrap)
        self.samples: list[float] = []
        self.running = True

    def run(self) -> None:
        while self.running:
            started = time.perf_counter()
            send(self.sock, 18, 2, ApiVersionsRequest())
            read_frame(self.sock)
            self.samples.append(time.perf_counter() - started)
            time.sleep(PROBE_INTERVAL_S)


def rss_mib(pid: int | None) -> float | None:
    if pid is None:
        return None
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return None


Case = Callable[[str], None]


def zstd_bomb() -> Case:
    record = encode_record(Record(offset_delta=0, timestamp_delta=0, key=b"k", value=bytes(256 << 20)))
    batch = _batch(int(Compression.ZSTD), 1, compress(Compression.ZSTD, record))
    return lambda bootstrap: _produce(bootstrap, batch)


def garbage_batches() -> Case:
    batch = _batch(0, 1000, bytes(range(256)) * 4)

    def case(bootstrap: str) -> None:
        for _ in range(200):
            _produce(bootstrap, batch)
    return case


def _batch(attributes: int, count: int, payload: bytes) -> bytes:
    return assemble_batch(base_offset=0, partition_leader_epoch=-1, attributes=attributes, last_offset_delta=count - 1,
                          base_timestamp=0, max_timestamp=0, producer_id=-1, producer_epoch=-1, base_sequence=-1,
                          records_count=count, payload=payload)


def _produce(bootstrap: str, batch: bytes) -> None:
    sock = connect(bootstrap)
    request = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[
        TopicProduceData(name="hostile-latency", partition_data=[PartitionProduceData(index=0, records=batch)])])
    send(sock, 0, 9, request)
    read_frame(sock)
    sock.close()


def metadata_elements(count: int) -> Callable[[], Case]:
    def prepare() -> Case:
        names = [MetadataRequestTopic(name=f"absent-{i}") for i in range(count)]
        request = MetadataRequest(topics=names, allow_auto_topic_creation=False,
                                  include_cluster_authorized_operations=False, include_topic_authorized_operations=False)
        header = RequestHeader(request_api_key=3, request_api_version=9, correlation_id=1, client_id="hostile")
        data = encode_request(header, request)

        def case(bootstrap: str) -> None:
            sock = connect(bootstrap)
            sock.sendall(data)
            try:
                read_frame(sock)
            except ConnectionError:
                pass  # over the element budget: the broker closes the connection
            sock.close()
        return case
    return prepare


def empty_names() -> Case:
    count = 4_000_000
    frame = struct.pack(">hhi", 3, 1, 9) + struct.pack(">h", 7) + b"hostile" + struct.pack(">i", count) + b"\0\0" * count
    data = struct.pack(">i", len(frame)) + frame

    def case(bootstrap: str) -> None:
        sock = connect(bootstrap)
        sock.sendall(data)
        try:
            sock.recv(1)
        except OSError:
            pass
        sock.close()
    return case


def idle_connections() -> Case:
    def case(bootstrap: str) -> None:
        held = [connect(bootstrap) for _ in range(2000)]
        time.sleep(0.5)
        for sock in held:
            sock.close()
    return case


# Each entry prepares its bytes first (outside the measurement: the probe shares this process's GIL).
CASES: dict[str, Callable[[], Case]] = {
    "zstd bomb (256 MiB of zeros, ~8 KB sent)": zstd_bomb,
    "200 batches of garbage records": garbage_batches,
    "Metadata with 25,000 topic names (the budget)": metadata_elements(25_000),
    "Metadata with 4M empty names (8 MB)": empty_names,
    "2,000 connections opened and closed": idle_connections,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--pid", type=int, help="the broker's pid, for its RSS")
    args = parser.parse_args()
    print(f"{'case':45} {'probes':>6} {'p50 ms':>7} {'p99 ms':>7} {'max ms':>7} {'RSS MiB':>15}")
    for name, prepare in CASES.items():
        case = prepare()
        probe = Probe(args.bootstrap)
        before = rss_mib(args.pid)
        probe.start()
        time.sleep(0.2)
        case(args.bootstrap)
        time.sleep(0.2)
        probe.running = False
        probe.join()
        after = rss_mib(args.pid)
        samples = sorted(s * 1000 for s in probe.samples)
        p99 = samples[min(len(samples) - 1, int(len(samples) * 0.99))]
        rss = "" if before is None or after is None else f"{before:.0f} -> {after:.0f}"
        print(f"{name:45} {len(samples):6} {statistics.median(samples):7.1f} {p99:7.1f} {samples[-1]:7.1f} {rss:>15}")


if __name__ == "__main__":
    main()
