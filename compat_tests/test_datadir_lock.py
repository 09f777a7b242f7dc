"""Issue #16: a second broker on a data directory in use refuses to start (it used to serve beside
the first and overwrite its acknowledged records); the lock dies with its process, kill -9 included."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from confluent_kafka import Producer

from .broker_process import BrokerProcess
from .txn_helpers import consume, create_topics, values


def produce(bootstrap: str, topic: str, prefix: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2})
    for i in range(count):
        producer.produce(topic, f"{prefix}-{i}".encode(), partition=0)
    assert producer.flush(30) == 0


def test_second_broker_on_the_same_directory_refuses_and_data_survives(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = BrokerProcess(data, tmp_path / "a.log").start()
    try:
        create_topics(first.bootstrap, {"locked": 1})
        produce(first.bootstrap, "locked", "A", 50)
        second = subprocess.run(
            [sys.executable, "-m", "rivven_kproto", "serve", "--listen", "127.0.0.1:0", "--data-dir", str(data)],
            capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
        )
        assert second.returncode == 1, second.stderr
        error_lines = [line for line in second.stderr.splitlines() if "Traceback" in line or "lock" in line]
        assert error_lines == [error_lines[0]] and f"pid {first.process.pid}" in error_lines[0], second.stderr
        assert "listening on" not in second.stderr
        produce(first.bootstrap, "locked", "A2", 10)  # the first broker is untouched and still serving
        first.kill()  # the kernel releases the lock of a killed process
        first.start()
        seen = consume("confluent-kafka", first.bootstrap, [("locked", 0)], committed=False, expected=60)
        assert values(seen)[("locked", 0)] == [f"A-{i}".encode() for i in range(50)] + [
            f"A2-{i}".encode() for i in range(10)
        ]
    finally:
        if first.alive():
            first.stop()


def test_corrupt_topic_table_stops_start_up_with_one_line(tmp_path: Path) -> None:
    meta = tmp_path / "data" / "meta"
    meta.mkdir(parents=True)
    (meta / "topics.json").write_text('{"a": {"id": 5')
    result = subprocess.run(
        [sys.executable, "-m", "rivven_kproto", "serve", "--listen", "127.0.0.1:0", "--data-dir", str(tmp_path / "data")],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 1
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and str(meta / "topics.json") in lines[0] and "Traceback" not in result.stderr
