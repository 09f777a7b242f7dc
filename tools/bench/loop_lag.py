"""Does the event loop wait for the disk? Probe latency under ``--fsync always`` with a slow fsync.

    python -m tools.bench.loop_lag [--delays 0,20] [--seconds 8]

For each emulated fsync latency (every ``os.fsync`` in the broker process sleeps that long
first, as a slow disk would), a fresh broker runs with ``--fsync always`` while one thread runs
transactions (10 records each, with the consumer's offsets sent to the transaction) and another
commits a consumer group's offsets synchronously. A probe connection sends ApiVersions every
10 ms; its round trips are what any other client waits when the loop is busy. When fsyncs run
on the event loop, the probe's p99/max grow with the fsync latency; when they run on worker
threads, they do not (the transactions and commits themselves still wait for the disk).
Bounded: each delay runs ``--seconds`` at most, with a hard deadline per call.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field

from confluent_kafka import Consumer, Producer, TopicPartition

from tools.hostile_latency import Probe

from .brokers import OURS_READY
from .workloads import create_topic

SLOW_FSYNC_SERVE = """
import os, sys, time
_fsync = os.fsync
_delay = float(sys.argv.pop(1)) / 1000
def slow_fsync(fd):
    time.sleep(_delay)
    return _fsync(fd)
os.fsync = slow_fsync
from rivven_kproto.cli.main import main
sys.exit(main())
"""


@dataclass
class Counts:
    transactions: int = 0
    commits: int = 0
    errors: list[str] = field(default_factory=list)


def start_broker(data_dir: str, delay_ms: float) -> tuple[subprocess.Popen[bytes], str]:
    command = [sys.executable, "-c", SLOW_FSYNC_SERVE, str(delay_ms), "serve", "--data-dir", data_dir,
               "--listen", "127.0.0.1:0", "--fsync", "always"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert process.stderr is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        if not line:
            break
        match = OURS_READY.search(line)
        if match:
            threading.Thread(target=process.stderr.read, daemon=True).start()  # keep the pipe drained
            return process, f"127.0.0.1:{int(match.group(1))}"
    process.kill()
    raise SystemExit("the broker did not start")


def run_transactions(bootstrap: str, stop: threading.Event, counts: Counts) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "lag-txn", "linger.ms": 1})
    try:
        producer.init_transactions(30)
        while not stop.is_set():
            producer.begin_transaction()
            for _ in range(10):
                producer.produce("lag-out", b"x" * 100)
            producer.commit_transaction(30)
            counts.transactions += 1
    except Exception as exc:  # reported, the run goes on
        counts.errors.append(f"transactions: {exc}")


def run_commits(bootstrap: str, stop: threading.Event, counts: Counts) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "lag-group", "enable.auto.commit": False})
    try:
        offset = 0
        while not stop.is_set():
            offset += 1
            consumer.commit(offsets=[TopicPartition("lag-in", 0, offset)], asynchronous=False)
            counts.commits += 1
    except Exception as exc:
        counts.errors.append(f"commits: {exc}")
    finally:
        consumer.close()


def measure(delay_ms: float, seconds: float) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="kproto-lag-") as data_dir:
        process, bootstrap = start_broker(data_dir, delay_ms)
        try:
            create_topic(bootstrap, "lag-out", 1)
            create_topic(bootstrap, "lag-in", 1)
            counts, stop = Counts(), threading.Event()
            workers = [threading.Thread(target=run, args=(bootstrap, stop, counts), daemon=True)
                       for run in (run_transactions, run_commits)]
            for worker in workers:
                worker.start()
            time.sleep(1)  # past the transactional producer's start
            probe = Probe(bootstrap)
            probe.start()
            time.sleep(seconds)
            probe.running = False
            stop.set()
            for worker in workers:
                worker.join(60)
            probe.join(10)
        finally:
            process.kill()
            process.wait()
    samples = sorted(s * 1000 for s in probe.samples)
    for error in counts.errors:
        print(f"  error: {error}", file=sys.stderr)
    return {
        "fsync_delay_ms": delay_ms,
        "probe_p50_ms": statistics.median(samples),
        "probe_p99_ms": samples[int(len(samples) * 0.99) - 1],
        "probe_max_ms": samples[-1],
        "probes": len(samples),
        "txn_per_s": counts.transactions / seconds,
        "commits_per_s": counts.commits / seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--delays", default="0,20", help="emulated fsync latencies in ms, comma-separated")
    parser.add_argument("--seconds", type=float, default=8.0, help="probe time per delay")
    args = parser.parse_args()
    print(f"{'fsync ms':>8} {'probe p50':>10} {'p99':>8} {'max':>8} {'txn/s':>7} {'commits/s':>10}")
    for delay in (float(d) for d in args.delays.split(",")):
        row = measure(delay, args.seconds)
        print(f"{row['fsync_delay_ms']:>8.0f} {row['probe_p50_ms']:>9.1f}ms {row['probe_p99_ms']:>6.1f}ms "
              f"{row['probe_max_ms']:>6.1f}ms {row['txn_per_s']:>7.1f} {row['commits_per_s']:>10.1f}")


if __name__ == "__main__":
    main()
