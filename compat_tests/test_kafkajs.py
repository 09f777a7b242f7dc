"""kafkajs (Node) produces and administers; kafka-python reads the records back.

``compat_tests/node/produce_consume.js`` drives kafkajs (``kafkajs ^2.2``, written against 2.2.4)
in one mode per call; its single JSON line on stdout is parsed here. kafkajs' consumer only works
through consumer groups, which the broker does not serve yet, so the records are read back with
kafka-python's ``KafkaConsumer(group_id=None)`` and manual ``assign()``.

Needs ``npm install --prefix compat_tests/node`` (done by ``.ci/run``); a missing install is a
test failure, not a skip.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, TopicPartition

from .broker_process import BrokerProcess

NODE_DIR = Path(__file__).parent / "node"
SCRIPT = NODE_DIR / "produce_consume.js"
PARTITIONS = 3
NODE_TIMEOUT_S = 60.0  # the script's own watchdog fires at 40 s


def node(broker: BrokerProcess, topic: str, mode: str, stdin: Any = None) -> Any:
    executable = shutil.which("node")
    assert executable, "node is not on PATH"
    assert (NODE_DIR / "node_modules" / "kafkajs" / "package.json").exists(), (
        "kafkajs is not installed: run `npm install --prefix compat_tests/node`"
    )
    command = [executable, str(SCRIPT), broker.bootstrap, topic, mode]
    data = None if stdin is None else json.dumps(stdin).encode()
    try:
        done = subprocess.run(command, input=data, capture_output=True, timeout=NODE_TIMEOUT_S, check=False,
                              cwd=NODE_DIR)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(
            f"{mode}: node timed out; stderr={exc.stderr!r}\nbroker log tail:\n{broker.log_text()[-3000:]}"
        ) from exc
    stderr = done.stderr.decode(errors="replace")
    assert done.returncode == 0, (
        f"{mode}: node exited {done.returncode}\nstderr:\n{stderr[-4000:]}\nbroker log tail:\n{broker.log_text()[-3000:]}"
    )
    lines = done.stdout.decode().strip().splitlines()
    assert lines, f"{mode}: no output; stderr:\n{stderr[-4000:]}"
    return json.loads(lines[-1])


def messages_for(base_ts: int) -> list[list[dict[str, Any]]]:
    """Two sends: the first spreads over all partitions (one batch each), the second adds one more per partition."""
    first: list[dict[str, Any]] = []
    for i in range(5):
        for p in range(PARTITIONS):
            first.append({
                "partition": p,
                "key": None if i == 1 else f"key-{p}-{i}",
                "value": None if i == 3 else f"value-{p}-{i}-" + "x" * 50,
                "headers": {} if i == 0 else {"trace": f"t-{p}-{i}", "multi": ["a", "b"], "ünï": "çødé"},
                "timestamp": str(base_ts + 10 * i + p),
            })
    second = [
        {"partition": p, "key": f"late-{p}", "value": "", "headers": {"h": ""}, "timestamp": str(base_ts + 1000 + p)}
        for p in range(PARTITIONS)
    ]
    return [first, second]


def expected_headers(headers: dict[str, str | list[str]]) -> list[tuple[str, bytes]]:
    out: list[tuple[str, bytes]] = []
    for name, value in headers.items():
        for item in value if isinstance(value, list) else [value]:
            out.append((name, item.encode()))
    return out


def read_back(broker: BrokerProcess, topic: str, per_partition: dict[int, int]) -> dict[int, list[Any]]:
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        client_id="compat-kafkajs-reader",
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        request_timeout_ms=15_000,
        fetch_max_wait_ms=100,
    )
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        got: dict[int, list[Any]] = {p: [] for p in range(PARTITIONS)}
        deadline = time.monotonic() + 30.0
        while any(len(got[p]) < n for p, n in per_partition.items()):
            assert time.monotonic() < deadline, {p: len(r) for p, r in got.items()}
            for tp, records in consumer.poll(timeout_ms=500).items():
                got[tp.partition].extend(records)
        extra = consumer.poll(timeout_ms=500)
        assert not any(extra.values()), extra
        return got
    finally:
        consumer.close()


@pytest.mark.parametrize("codec", ["none", "gzip"])
def test_kafkajs_produce_python_reads(broker: BrokerProcess, topic_name: str, codec: str) -> None:
    created = node(broker, topic_name, "create")
    assert created["created"] is True
    assert topic_name in created["topics"]

    sends = messages_for(base_ts=int(time.time() * 1000) - 30_000)
    produced = node(broker, topic_name, f"produce-{codec}", {"sends": sends})

    # RecordMetadata per send: one entry per partition, base offsets continuing across sends.
    first, second = produced["results"]
    assert sorted((r["topicName"], r["partition"], r["errorCode"], r["baseOffset"]) for r in first) == [
        (topic_name, p, 0, "0") for p in range(PARTITIONS)
    ]
    assert sorted((r["partition"], r["errorCode"], r["baseOffset"]) for r in second) == [
        (p, 0, "5") for p in range(PARTITIONS)
    ]

    expected: dict[int, list[dict[str, Any]]] = {p: [] for p in range(PARTITIONS)}
    for send in sends:
        for message in send:
            expected[message["partition"]].append(message)
    got = read_back(broker, topic_name, {p: len(m) for p, m in expected.items()})

    for p in range(PARTITIONS):
        assert [r.offset for r in got[p]] == list(range(len(expected[p])))
        for record, message in zip(got[p], expected[p], strict=True):
            assert record.topic == topic_name
            assert record.partition == p
            assert record.key == (None if message["key"] is None else message["key"].encode())
            assert record.value == (None if message["value"] is None else message["value"].encode())
            assert list(record.headers) == expected_headers(message["headers"])
            assert record.timestamp == int(message["timestamp"])
            assert record.timestamp_type == 0

    # kafkajs admin sees the layout and the high watermarks it produced.
    meta = node(broker, topic_name, "metadata")
    [topic] = meta["metadata"]["topics"]
    assert topic["name"] == topic_name
    partitions = sorted(topic["partitions"], key=lambda part: part["partitionId"])
    assert [part["partitionId"] for part in partitions] == list(range(PARTITIONS))
    for part in partitions:
        assert part["partitionErrorCode"] == 0
        assert part["leader"] == 0
        assert part["replicas"] == [0]
        assert part["isr"] == [0]
    offsets = sorted(meta["offsets"], key=lambda entry: entry["partition"])
    assert [(o["partition"], o["offset"], o["high"], o["low"]) for o in offsets] == [
        (p, str(len(expected[p])), str(len(expected[p])), "0") for p in range(PARTITIONS)
    ]


def test_kafkajs_create_existing_topic(broker: BrokerProcess, topic_name: str) -> None:
    """createTopics answers ``false`` (not an error) when the topic already exists, as against Kafka."""
    assert node(broker, topic_name, "create")["created"] is True
    again = node(broker, topic_name, "create")
    assert again["created"] is False
    assert again["topics"].count(topic_name) == 1
    meta = node(broker, topic_name, "metadata")
    assert [len(t["partitions"]) for t in meta["metadata"]["topics"]] == [PARTITIONS]
    assert [(o["partition"], o["high"], o["low"]) for o in sorted(meta["offsets"], key=lambda o: o["partition"])] == [
        (p, "0", "0") for p in range(PARTITIONS)
    ]
