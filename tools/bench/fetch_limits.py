"""python -m tools.bench.fetch_limits: Fetch MB/s by message size, beside a peer and the machine's limits.

    python -m tools.bench.fetch_limits --peer tansu --baseline /path/to/main-checkout

Issue #22 (zero-copy fetch). For each message size (1 KiB, 16 KiB, 1 MiB by default) and each
broker (ours; ``--baseline``: ours from another checkout, e.g. before the change; peers), on a
fresh broker: produce ``--bytes`` into one partition, then read it all back ``--rounds`` times

* ``raw``: one connection sending Fetch v11 with librdkafka's default budgets (fetch.max.bytes
  50 MiB, max.partition.fetch.bytes 1 MiB), one request in flight, the response decoded by our
  codec but its records only walked for the next offset: what the broker can serve to one reader;
  with the broker's CPU seconds per GB sent (all its threads; steadier than MB/s on a busy machine);
* ``consumer``: confluent-kafka's consumer (``workloads.consume``), what an application sees.

and, from the same broker's segment files (ours only), the machine's limits:

* ``loopback``: ``os.sendfile`` of those files over a TCP connection on 127.0.0.1 to a reader
  that only receives (a thread each): no broker can send faster on this machine;
* ``disk`` (page cache): reading the files with ``readinto`` (what a warm broker reads);
* ``disk`` (cold): the same after ``fsync`` and ``posix_fadvise(DONTNEED)`` dropped their pages.

Prints a table (medians over rounds) and writes everything to ``--json``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import statistics
import struct
import sys
import threading
import time
from pathlib import Path
from typing import Any

from rivven_kproto.codec.connection import encode_request
from rivven_kproto.codec.headers import RequestHeader, ResponseHeader, response_header_version
from rivven_kproto.codec.messages.fetch import FetchPartition, FetchRequest, FetchResponse, FetchTopic
from rivven_kproto.codec.records.batch import iter_headers

from . import brokers, procstats
from . import workloads as w

log = logging.getLogger("tools.bench.fetch_limits")

SIZES = (1024, 16 * 1024, 1024 * 1024)
FETCH_MAX_BYTES = 52_428_800  # librdkafka's fetch.max.bytes
PARTITION_MAX_BYTES = 1_048_576  # librdkafka's max.partition.fetch.bytes
VERSION = 11


def baseline(checkout: Path) -> brokers.Target:
    """Ours, run from another checkout (its package first on sys.path, whatever the cwd)."""
    bootstrap = (f"import sys, runpy; sys.path.insert(0, {str(checkout)!r}); "
                 "runpy.run_module('rivven_kproto', run_name='__main__', alter_sys=True)")
    target = brokers.ours()
    serve = target.command[target.command.index("rivven_kproto") + 1:]
    return brokers.Target("baseline", [sys.executable, "-c", bootstrap, *serve], target.ready, secured=True)


def _recv_exact(sock: socket.socket, size: int) -> bytes:
    buf = bytearray(size)
    view, got = memoryview(buf), 0
    while got < size:
        n = sock.recv_into(view[got:])
        if n == 0:
            raise ConnectionError("closed by the broker")
        got += n
    return bytes(buf)


def raw_fetch(bootstrap: str, topic: str, end_offset: int) -> tuple[float, int]:
    """Read partition 0 from offset 0 to ``end_offset``: (seconds, record bytes received)."""
    host, port = bootstrap.rsplit(":", 1)
    offset, received, correlation = 0, 0, 0
    with socket.create_connection((host, int(port)), timeout=60) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        started = time.perf_counter()
        while offset < end_offset:
            correlation += 1
            request = FetchRequest(
                max_wait_ms=500, min_bytes=1, max_bytes=FETCH_MAX_BYTES, isolation_level=0, session_id=0,
                session_epoch=-1, forgotten_topics_data=[],
                topics=[FetchTopic(topic=topic, partitions=[
                    FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=PARTITION_MAX_BYTES)])])
            header = RequestHeader(request_api_key=1, request_api_version=VERSION, correlation_id=correlation,
                                   client_id="fetch-limits")
            sock.sendall(encode_request(header, request))
            (size,) = struct.unpack(">i", _recv_exact(sock, 4))
            frame = _recv_exact(sock, size)
            skip = len(ResponseHeader(correlation_id=0).encode(response_header_version(FetchRequest, VERSION)))
            data = FetchResponse.decode(frame[skip:], VERSION).responses[0].partitions[0]
            if data.error_code != 0:
                raise RuntimeError(f"Fetch at {offset}: error {data.error_code}")
            records = data.record_bytes()
            received += len(records)
            for _, batch in iter_headers(records):
                offset = batch.next_offset
        return time.perf_counter() - started, received


def segment_files(data_dir: Path, topic: str) -> list[Path]:
    return sorted((data_dir / f"{topic}-0").glob("*.log"))


def loopback_sendfile(files: list[Path], repeat: int) -> float:
    """MB/s of sendfile of ``files`` (``repeat`` times) to a receiving thread over 127.0.0.1."""
    total = sum(path.stat().st_size for path in files) * repeat
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        received = [0]

        def receive() -> None:
            conn, _ = server.accept()
            buf = memoryview(bytearray(1 << 20))
            with conn:
                while (n := conn.recv_into(buf)) > 0:
                    received[0] += n

        reader = threading.Thread(target=receive)
        reader.start()
        with socket.create_connection(("127.0.0.1", port)) as out:
            started = time.perf_counter()
            for _ in range(repeat):
                for path in files:
                    fd = os.open(path, os.O_RDONLY)
                    try:
                        offset, size = 0, os.fstat(fd).st_size
                        while offset < size:
                            offset += os.sendfile(out.fileno(), fd, offset, size - offset)
                    finally:
                        os.close(fd)
        reader.join()
        seconds = time.perf_counter() - started
    assert received[0] == total
    return total / seconds / 1e6


def disk_read(files: list[Path], *, cold: bool) -> float:
    """MB/s of reading ``files`` whole; ``cold``: their pages dropped first (fsync + DONTNEED)."""
    if cold:
        for path in files:
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)
    buf = memoryview(bytearray(1 << 20))
    total = 0
    started = time.perf_counter()
    for path in files:
        with path.open("rb", buffering=0) as handle:
            while (n := handle.readinto(buf)) > 0:  # type: ignore[attr-defined]
                total += n
    return total / (time.perf_counter() - started) / 1e6


def point(target: brokers.Target, size: int, total_bytes: int, rounds: int) -> dict[str, Any]:
    running = brokers.Running(target, 0)
    try:
        topic = f"fetch-s{size}"
        count = max(total_bytes // size, 50)
        limit = str(max(2 * size, 1 << 20) + 4096)
        big = {"message.max.bytes": limit} if size >= 512 * 1024 else None
        w.produce(running.bootstrap, topic, count, 1, size=size, client=big,
                  topic_config={"max.message.bytes": limit} if big else None)
        raw: list[float] = []
        cpu: list[float] = []
        for _ in range(rounds):
            before = procstats.usage(running.pid).cpu_s
            seconds, received = raw_fetch(running.bootstrap, topic, count)
            raw.append(received / seconds / 1e6)
            cpu.append((procstats.usage(running.pid).cpu_s - before) / (received / 1e9))
        consumer = [w.consume(running.bootstrap, topic, count, 1, "read_uncommitted", size=size,
                              client={"fetch.max.bytes": limit, "max.partition.fetch.bytes": limit} if big else None
                              ).mb_per_s for _ in range(rounds)]
        result: dict[str, Any] = {"messages": count, "record_bytes": received, "raw_mb_per_s": raw,
                                  "raw_broker_cpu_s_per_gb": cpu, "consumer_mb_per_s": consumer}
        files = segment_files(Path(running.data.name) / "data", topic)
        if files:  # ours: the machine's limits on the same files
            result["loopback_sendfile_mb_per_s"] = [loopback_sendfile(files, 3) for _ in range(rounds)]
            result["disk_cached_mb_per_s"] = [disk_read(files, cold=False) for _ in range(rounds)]
            result["disk_cold_mb_per_s"] = [disk_read(files, cold=True) for _ in range(rounds)]
        return result
    except Exception as exc:  # noqa: BLE001 - a point a broker cannot run is a result
        log.warning("%s size %d: %s", target.name, size, exc)
        return {"error": f"{type(exc).__name__}: {exc}"[:300]}
    finally:
        running.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench.fetch_limits", description=__doc__.splitlines()[0])
    parser.add_argument("--peer", action="append", default=[], help="as in python -m tools.bench; repeatable")
    parser.add_argument("--baseline", type=Path, help="a checkout of ours to compare against (e.g. main)")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--bytes", type=int, default=200 * 1024 * 1024, help="per message size")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path, default=Path("fetch-limits.json"))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s", stream=sys.stderr)
    targets = [brokers.ours()]
    if args.baseline is not None:
        targets.append(baseline(args.baseline.resolve()))
    targets += [brokers.peer(spec) for spec in args.peer]
    results: dict[str, Any] = {"bytes": args.bytes, "rounds": args.rounds, "load_before": os.getloadavg(),
                               "points": {}}
    for size in (int(x) for x in args.sizes.split(",") if x):
        for target in targets:
            figures = point(target, size, args.bytes, args.rounds)
            results["points"].setdefault(target.name, {})[str(size)] = figures
            log.info("%s size=%d: %s", target.name, size, figures)
    results["load_after"] = os.getloadavg()
    args.json.write_text(json.dumps(results, indent=1))
    keys = ("raw_mb_per_s", "raw_broker_cpu_s_per_gb", "consumer_mb_per_s", "loopback_sendfile_mb_per_s", "disk_cached_mb_per_s",
            "disk_cold_mb_per_s")
    print(f"{'broker':14} {'size':>8}  " + "  ".join(f"{k.removesuffix('_mb_per_s')[-17:]:>17}" for k in keys))
    for name, points in results["points"].items():
        for size, figures in points.items():
            cells = [f"{statistics.median(figures[k]):17.1f}" if k in figures else f"{'':17}" for k in keys]
            print(f"{name:14} {size:>8}  " + "  ".join(cells) + ("  " + figures["error"] if "error" in figures else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
