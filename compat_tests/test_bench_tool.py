"""The benchmark tool keeps working: its null broker serves a real client, and a tiny run of
``python -m tools.bench`` against our broker and the null broker yields sane figures.

The figures themselves are not judged here (speed is measured by the tool, never asserted in
tests); what is checked is that every workload ran, counted the messages it was asked for and
read the broker's CPU and memory.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from tools.bench import acl_broker, brokers, fetch_shape, workloads

ROOT = Path(__file__).resolve().parents[1]


def test_the_null_broker_serves_confluent_kafka_produce_and_consume() -> None:
    running = brokers.Running(brokers.null_broker(), 0)
    try:
        workloads.create_topic(running.bootstrap, "limit", 3)
        producer = Producer({"bootstrap.servers": running.bootstrap, "enable.idempotence": True, "linger.ms": 5})
        sent = [f"m{i}".encode() for i in range(3000)]
        for i, value in enumerate(sent):
            producer.produce("limit", value, partition=i % 3)
        assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": running.bootstrap, "group.id": "limit",
                             "enable.auto.commit": False, "isolation.level": "read_committed"})
        consumer.assign([TopicPartition("limit", p, 0) for p in range(3)])
        got: dict[int, list[bytes]] = {0: [], 1: [], 2: []}
        for _ in range(100):
            for message in consumer.consume(1000, 0.5):
                assert message.error() is None, message.error()
                got[message.partition()].append(message.value())
            if sum(map(len, got.values())) >= len(sent):
                break
        consumer.close()
        assert got == {p: sent[p::3] for p in range(3)}
    finally:
        running.stop()


def test_fetch_shape_reads_what_one_fetch_of_our_broker_returns() -> None:
    """Our broker answers the default librdkafka Fetch from every partition within its 1 MiB limit;
    the tool counts the records (the produce workload's warm-up message at offset 0 skipped)."""
    running = brokers.Running(brokers.ours(), 0)
    try:
        workloads.produce(running.bootstrap, "shape", 4000, 8)
        rows = fetch_shape.shape(fetch_shape.fetch_once(running.bootstrap, "shape", 8))
    finally:
        running.stop()
    assert [row["partition"] for row in rows] == list(range(8))
    assert sum(row["records"] for row in rows) == 4000
    assert all(0 < row["bytes"] <= fetch_shape.PARTITION_MAX_BYTES and row["batches"] for row in rows)


def test_a_tiny_bench_run_reports_every_workload(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    selected = ["produce-8p", "consume-uncommitted", "consume-committed", "transactions", "latency", "connections",
                "produce-8p-tls", "consume-sasl-ssl", "produce-8p-scraped"]
    run = subprocess.run(
        [sys.executable, "-m", "tools.bench", "--rounds", "1", "--messages", "5000", "--transactions", "20",
         "--latency-seconds", "1", "--workloads", ",".join(selected), "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=240,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    document = json.loads(out.read_text())
    ours = document["rounds"]["rivven_kproto"][0]
    null = document["rounds"]["null"][0]
    assert set(ours) == {"idle", *selected}
    assert set(null) == {"idle", "produce-8p", "consume-uncommitted", "consume-committed", "transactions"}
    assert null["transactions"]["messages"] == 200  # the null broker answers the transactional APIs too
    assert ours["produce-8p"]["messages"] == 5000 and ours["connections"]["idle_connections"] == 200
    assert ours["consume-committed"]["consumed"] == 5000 + 8  # the warm-up message of each partition
    assert ours["transactions"]["messages"] == 200 and ours["transactions"]["p99_ms"] > 0
    assert ours["latency"]["messages"] == ours["latency"]["sent"] == 5000
    assert ours["produce-8p-tls"]["messages"] == 5000 and ours["consume-sasl-ssl"]["consumed"] == 5000 + 8
    assert ours["produce-8p-scraped"]["messages"] == 5000 and "scrapes" in ours["produce-8p-scraped"]
    for figures in (ours[name] for name in selected):
        assert figures["msgs_per_s"] > 0 and figures["broker_cpu_s"] >= 0 and figures["peak_rss_mib"] > 10
    assert ours["idle"]["rss_mib"] > 10
    assert document["summary"]["produce-8p"]["vs_null"]["per_round"]
    assert any(goal["goal"].startswith("produce-8p") for goal in document["goals"])
    assert "produce-8p" in run.stdout and "rivven_kproto" in run.stdout


def test_a_tiny_share_bench_run_puts_the_share_group_beside_a_classic_group(tmp_path: Path) -> None:
    """Issue #39's workload, tiny: four share consumers (explicit acks) and a four-member classic
    group read every record of one topic in the same run, with broker CPU per record, and the
    share/classic goal is judged (the figures themselves are not)."""
    out = tmp_path / "bench.json"
    selected = ["consume-group", "share-consume"]
    run = subprocess.run(
        [sys.executable, "-m", "tools.bench", "--no-limit", "--rounds", "1", "--messages", "2000",
         "--workloads", ",".join(selected), "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=240,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    document = json.loads(out.read_text())
    ours = document["rounds"]["rivven_kproto"][0]
    assert set(ours) == {"idle", *selected}
    for name, kind in zip(selected, ("classic", "share"), strict=True):
        figures = ours[name]
        assert figures["kind"] == kind and figures["consumers"] == 4
        assert figures["consumed"] == figures["messages"] == 2000 + 8  # the warm-up record of each partition
        assert figures["msgs_per_s"] > 0 and figures["broker_cpu_us_per_record"] >= 0
    assert "redelivered" in ours["share-consume"]
    (goal,) = [g for g in document["goals"] if g["goal"].startswith("share-consume")]
    assert goal["met"] is not None and "us/record" in goal["measured"]
    assert "share-consume" in run.stdout and "consume-group" in run.stdout


def test_the_acl_peer_decides_every_request_from_its_1000_acls() -> None:
    """``--peer acl``: our broker with an authorizer and 1,000 ACLs. The workloads' client (no
    super user) produces to a ``bench-`` topic through the prefixed ALLOWs, and is refused a topic
    outside the prefix and one under a prefixed DENY among the fillers."""
    running = brokers.Running(brokers.peer("acl"), 0)
    try:
        assert running.notes == {"acls": acl_broker.ACL_COUNT}
        figures = workloads.produce(running.bootstrap, "bench-acl", 500, 2)
        assert figures.messages == 500
        for refused in ("elsewhere", "bench-secret-6-topic"):
            with pytest.raises(KafkaException) as raised:
                workloads.create_topic(running.bootstrap, refused, 1)
            assert raised.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, refused
    finally:
        running.stop()


def test_a_tiny_acl_bench_run_puts_both_runs_side_by_side(tmp_path: Path) -> None:
    """The done-when of issue #37: produce and transactions without an authorizer and with 1,000
    ACLs, in one table, with the goal judged from the per-round ratios (not asserted here)."""
    out = tmp_path / "bench.json"
    selected = ["produce-8p", "transactions"]
    run = subprocess.run(
        [sys.executable, "-m", "tools.bench", "--peer", "acl", "--no-limit", "--rounds", "1", "--messages", "2000",
         "--transactions", "20", "--workloads", ",".join(selected), "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=240,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    document = json.loads(out.read_text())
    plain, authorized = document["rounds"]["rivven_kproto"][0], document["rounds"]["rivven_kproto-acl"][0]
    assert authorized["idle"]["acls"] == 1000 and "acls" not in plain["idle"]
    for figures in (plain, authorized):
        assert figures["produce-8p"]["messages"] == 2000 and figures["transactions"]["messages"] == 200
    assert [g["goal"].split(":")[0] for g in document["goals"]] == selected
    assert all("1,000 ACLs" in g["goal"] and g["met"] is not None for g in document["goals"])
    assert "rivven_kproto-acl" in run.stdout


def test_a_tiny_curves_run_charts_both_curves(tmp_path: Path) -> None:
    """``python -m tools.bench.curves`` against our broker alone: every point measured (none
    recorded as an error), both charts written as PNG files."""
    out = tmp_path / "json"
    run = subprocess.run(
        [sys.executable, "-m", "tools.bench.curves", "--partitions", "1,10", "--sizes", "100,16384",
         "--messages", "2000", "--bytes", "200000", "--out", str(tmp_path), "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=240,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    document = json.loads(out.read_text())
    points = document["partitions"]["rivven_kproto"]
    assert sorted(points) == ["1", "10"] and all("error" not in p for p in points.values()), points
    assert all(p["produce_msgs_per_s"] > 0 and p["consume_msgs_per_s"] > 0 and p["metadata_p99_ms"] > 0
               for p in points.values())
    sizes = document["sizes"]["rivven_kproto"]
    assert sorted(sizes) == ["100", "16384"] and all(s["produce_mb_per_s"] > 0 for s in sizes.values()), sizes
    for chart in ("curve-partitions.png", "curve-message-size.png"):
        assert (tmp_path / chart).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_tiny_load_curves_run_measures_every_point(tmp_path: Path) -> None:
    """``python -m tools.bench.load_curves`` against our broker alone, tiny: connections (idle and
    active), consumer groups and transactional producers all measured, figures positive, three PNGs."""
    out = tmp_path / "json"
    run = subprocess.run(
        [sys.executable, "-m", "tools.bench.load_curves", "--connections", "5,20", "--active", "4",
         "--groups", "1,3", "--producers", "1,2", "--messages", "2000", "--commits", "50", "--transactions", "10",
         "--metadata-rounds", "10", "--idle-seconds", "0.5", "--budget", "60", "--out", str(tmp_path),
         "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=240,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    document = json.loads(out.read_text())
    assert set(document) == {"run", "connections", "groups", "producers"}
    connections = document["connections"]["rivven_kproto"]
    assert sorted(connections) == ["20", "5"] and all("error" not in p for p in connections.values()), connections
    for point in connections.values():
        assert point["rss_mib"] > 10 and point["open_s"] > 0
        for variant in ("idle", "active"):
            figures = point[variant]
            assert figures["produce_msgs_per_s"] > 0 and figures["metadata_p99_ms"] > 0, figures
        assert point["active"]["active_round_trips_per_s"] > 0 and point["active"]["active_connections"] == 4
    groups = document["groups"]["rivven_kproto"]
    assert sorted(groups) == ["1", "3"] and all("error" not in p for p in groups.values()), groups
    assert all(p["join_all_s"] > 0 and p["commits_per_s"] > 0 and p["commit_p99_ms"] > 0 and p["describe_p99_ms"] > 0
               and p["list_p99_ms"] > 0 for p in groups.values())
    producers = document["producers"]["rivven_kproto"]
    assert sorted(producers) == ["1", "2"] and all("error" not in p for p in producers.values()), producers
    assert all(p["txn_per_s"] > 0 and p["commit_p99_ms"] > 0 and p["transactions"] == 10 for p in producers.values())
    for chart in ("curve-connections.png", "curve-groups.png", "curve-txn-producers.png"):
        assert (tmp_path / chart).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed (apt-get install kcat)")
def test_a_tiny_cli_bulk_run_times_both_tools_both_ways(tmp_path: Path) -> None:
    """``python -m tools.bench.cli_bulk``, tiny: kproto and kcat each produce the file and read it
    back whole (the tool checks the bytes), and the figures come out side by side."""
    out = tmp_path / "bulk.json"
    run = subprocess.run(
        [sys.executable, "-m", "tools.bench.cli_bulk", "--lines", "2000", "--rounds", "1", "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=240,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    document = json.loads(out.read_text())
    assert document["run"]["lines"] == 2000 and document["run"]["bytes"] == 2000 * 77
    (only,) = document["rounds"]
    for direction in ("produce", "consume"):
        assert set(only[direction]) == {"kproto", "kcat"}
        assert all(figures["seconds"] > 0 and figures["cpu_s"] >= 0 for figures in only[direction].values())
        assert document["summary"][direction]["ratio"] > 0
    assert "kproto/kcat" in run.stdout and "produce" in run.stdout and "consume" in run.stdout
