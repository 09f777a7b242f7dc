"""kcat (librdkafka's command-line client) against a real broker process.

Written against Debian's kcat 1.7.1 with its bundled librdkafka 2.0.2 (builtin features include
gzip, snappy, lz4 and zstd). librdkafka's producer is non-idempotent by default; we still say so
with ``-X enable.idempotence=false``. Consumers use explicit partitions (``-p N``) and no group.

Topics are created with kafka-python's ``KafkaAdminClient`` (3 partitions), except in the
auto-create test where kcat's own Metadata request creates the topic.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from typing import Any

import pytest
from kafka.admin import KafkaAdminClient

from .broker_process import BrokerProcess

KCAT = shutil.which("kcat") or "/usr/bin/kcat"
PARTITIONS = 3
PER_PARTITION = 6
SUBPROCESS_TIMEOUT_S = 45.0
# Every librdkafka-side wait is shorter than the subprocess timeout, so a broken broker shows up
# as a kcat error message rather than a killed process.
COMMON = [
    "-X", "broker.address.family=v4",
    "-X", "socket.timeout.ms=10000",
    "-X", "metadata.request.timeout.ms=10000",
]
PRODUCER = [
    "-X", "enable.idempotence=false",
    "-X", "linger.ms=100",  # one batch per partition: compression applies to the whole batch
    "-X", "message.timeout.ms=20000",
    "-X", "request.required.acks=-1",
]


def kcat(broker: BrokerProcess, *args: str, stdin: bytes | None = None) -> str:
    command = [KCAT, "-b", broker.bootstrap, *args]
    try:
        done = subprocess.run(command, input=stdin, capture_output=True, timeout=SUBPROCESS_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(
            f"{command} timed out; stderr={exc.stderr!r}\nbroker log tail:\n{broker.log_text()[-3000:]}"
        ) from exc
    assert done.returncode == 0, (
        f"{command} exited {done.returncode}; stderr={done.stderr.decode(errors='replace')}\n"
        f"broker log tail:\n{broker.log_text()[-3000:]}"
    )
    return done.stdout.decode()


def create_topic(broker: BrokerProcess, topic: str, partitions: int = PARTITIONS) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="compat-kcat-admin", request_timeout_ms=10_000)
    try:
        admin.create_topics({topic: {"num_partitions": partitions, "replication_factor": 1}})
        described = admin.describe_topics([topic])
        assert [t["name"] for t in described] == [topic]
        assert sorted(p["partition_index"] for p in described[0]["partitions"]) == list(range(partitions))
    finally:
        admin.close()


def produce_lines(partition: int) -> list[tuple[str | None, str | None]]:
    """(key, value) per message; None is a null key/value (kcat ``-Z`` sends empty as NULL)."""
    lines: list[tuple[str | None, str | None]] = []
    for i in range(PER_PARTITION):
        key = None if i == 2 else f"key-{partition}-{i}"
        value = None if i == 4 else ("v" * 40) + f"-{partition}-{i}-" + ("w" * 40)
        lines.append((key, value))
    return lines


def headers_for(partition: int) -> list[tuple[str, str]]:
    return [("src", "kcat"), ("part", str(partition)), ("dup", "1"), ("dup", "2")]


def consume_json(broker: BrokerProcess, topic: str, partition: int) -> list[dict[str, Any]]:
    out = kcat(broker, "-C", "-t", topic, "-p", str(partition), "-o", "beginning", "-e", "-J", "-q", *COMMON)
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def produce(broker: BrokerProcess, topic: str, partition: int, codec: str, messages: list[tuple[str | None, str | None]],
            headers: list[tuple[str, str]]) -> None:
    stdin = "".join(f"{key or ''}:{value or ''}\n" for key, value in messages).encode()
    header_args = [arg for name, value in headers for arg in ("-H", f"{name}={value}")]
    kcat(
        broker, "-P", "-t", topic, "-p", str(partition), "-K:", "-Z", "-z", codec,
        *header_args, *COMMON, *PRODUCER, stdin=stdin,
    )


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_produce_consume_json(broker: BrokerProcess, topic_name: str, codec: str) -> None:
    create_topic(broker, topic_name)
    before_ms = int(time.time() * 1000)
    for p in range(PARTITIONS):
        produce(broker, topic_name, p, codec, produce_lines(p), headers_for(p))
    after_ms = int(time.time() * 1000)

    for p in range(PARTITIONS):
        got = consume_json(broker, topic_name, p)
        expected = produce_lines(p)
        assert [m["offset"] for m in got] == list(range(PER_PARTITION))
        flat_headers = [item for pair in headers_for(p) for item in pair]
        for message, (key, value) in zip(got, expected, strict=True):
            assert message["topic"] == topic_name
            assert message["partition"] == p
            assert message["key"] == key
            assert message["payload"] == value
            assert message["headers"] == flat_headers
            assert message["tstype"] == "create"
            assert before_ms <= message["ts"] <= after_ms
            assert message["broker"] == 0
        timestamps = [m["ts"] for m in got]
        assert timestamps == sorted(timestamps)


def test_produce_consume_format_string(broker: BrokerProcess, topic_name: str) -> None:
    """The ``-f`` output path: key/value lengths tell null (-1) from empty (0)."""
    create_topic(broker, topic_name)
    messages: list[tuple[str | None, str | None]] = [("a", "1"), ("b", None), (None, "3"), ("d", "four")]
    produce(broker, topic_name, 1, "gzip", messages, [("x", "y")])

    out = kcat(broker, "-C", "-t", topic_name, "-p", "1", "-o", "beginning", "-e", "-q",
               "-f", "%k|%K|%s|%S|%p|%o|%h\n", *COMMON)
    assert out.splitlines() == [
        "a|1|1|1|1|0|x=y",
        "b|1||-1|1|1|x=y",
        "|-1|3|1|1|2|x=y",
        "d|1|four|4|1|3|x=y",
    ]
    # The other partitions stay empty.
    for p in (0, 2):
        assert consume_json(broker, topic_name, p) == []


def test_offsets_from_end_and_absolute(broker: BrokerProcess, topic_name: str) -> None:
    """ListOffsets-driven starts: ``-o -2`` (two before the end) and an absolute offset."""
    create_topic(broker, topic_name)
    messages: list[tuple[str | None, str | None]] = [(f"k{i}", f"v{i}") for i in range(5)]
    produce(broker, topic_name, 0, "lz4", messages, [])

    tail = kcat(broker, "-C", "-t", topic_name, "-p", "0", "-o", "-2", "-e", "-q", "-f", "%o:%k=%s\n", *COMMON)
    assert tail.splitlines() == ["3:k3=v3", "4:k4=v4"]
    middle = kcat(broker, "-C", "-t", topic_name, "-p", "0", "-o", "1", "-c", "2", "-e", "-q",
                  "-f", "%o:%k=%s\n", *COMMON)
    assert middle.splitlines() == ["1:k1=v1", "2:k2=v2"]
    # No headers were sent: the JSON envelope carries none.
    assert all("headers" not in m or m["headers"] in ([], None) for m in consume_json(broker, topic_name, 0))


def test_metadata_listing(broker: BrokerProcess, topic_name: str) -> None:
    create_topic(broker, topic_name)
    host, port = broker.bootstrap.rsplit(":", 1)

    listing = json.loads(kcat(broker, "-L", "-J", "-t", topic_name, *COMMON))
    assert listing["brokers"] == [{"id": 0, "name": f"{host}:{port}"}]
    assert listing["controllerid"] == 0
    assert listing["originating_broker"]["id"] == 0
    assert [t["topic"] for t in listing["topics"]] == [topic_name]
    topic = listing["topics"][0]
    assert "error" not in topic or topic["error"] in (None, "")
    assert [p["partition"] for p in sorted(topic["partitions"], key=lambda p: p["partition"])] == [0, 1, 2]
    for partition in topic["partitions"]:
        assert partition["leader"] == 0
        assert partition["replicas"] == [{"id": 0}]
        assert partition["isrs"] == [{"id": 0}]

    everything = json.loads(kcat(broker, "-L", "-J", *COMMON))
    assert topic_name in {t["topic"] for t in everything["topics"]}
    assert everything["brokers"] == listing["brokers"]


def test_auto_create_on_produce(broker: BrokerProcess, topic_name: str) -> None:
    """No admin call: kcat's Metadata request auto-creates the topic with the default 1 partition."""
    messages: list[tuple[str | None, str | None]] = [("k", "auto-created"), ("k2", "second")]
    produce(broker, topic_name, 0, "snappy", messages, [("h", "v")])
    got = consume_json(broker, topic_name, 0)
    assert [(m["offset"], m["key"], m["payload"], m["headers"]) for m in got] == [
        (0, "k", "auto-created", ["h", "v"]),
        (1, "k2", "second", ["h", "v"]),
    ]
    listing = json.loads(kcat(broker, "-L", "-J", "-t", topic_name, *COMMON))
    assert [len(t["partitions"]) for t in listing["topics"]] == [1]
