"""The ``kproto`` admin CLI as users run it: a subprocess, ``--format json``, against a real broker."""

from __future__ import annotations

import json
import os
import pty
import socket
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from rivven_kproto.cli.main import main

from .broker_process import BrokerProcess

RUN_TIMEOUT_S = 60


def kproto(bootstrap: str, *args: str, stdin: str | None = None, output: str = "json") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KPROTO_")}
    command = [sys.executable, "-m", "rivven_kproto", "--bootstrap", bootstrap, "--format", output, *args]
    return subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, env=env)


def ok(bootstrap: str, *args: str, stdin: str | None = None) -> Any:
    result = kproto(bootstrap, *args, stdin=stdin)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    return json.loads(result.stdout)


def failed(result: subprocess.CompletedProcess[str], code: int, starts: str) -> str:
    """The one stderr line of a failed command, checked for status, prefix and the absence of a traceback."""
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr + result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(starts), lines[0]
    return lines[0]


def unused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_cluster_info(broker: BrokerProcess) -> None:
    info = ok(broker.bootstrap, "cluster", "info")
    assert sorted(info) == [
        "api_versions", "brokers", "cluster_id", "controller_id", "coordinator_shards", "coordinator_shards_unheld",
        "features", "kafka_release", "kafka_releases"
    ]
    assert info["coordinator_shards"] == 1 and info["brokers"][0]["coordinator_shards"] == [0]  # alone: one shard
    # transactions V2, the default (KIP-890 part 2); share groups (KIP-932), on by default
    assert info["features"] == {"transaction.version": 2, "share.version": 1}
    assert isinstance(info["cluster_id"], str) and info["cluster_id"]
    assert info["controller_id"] == 0
    assert [(b["node_id"], b["port"]) for b in info["brokers"]] == [(0, broker.port)]
    apis = {a["name"]: a for a in info["api_versions"]}
    assert apis["Metadata"]["negotiated"] == min(apis["Metadata"]["broker_max"], apis["Metadata"]["client_max"])
    assert apis["ApiVersions"]["api_key"] == 18 and apis["Fetch"]["negotiated"] is not None
    # Which Kafka release the table corresponds to: the best match first, consistent with the table.
    releases = {r["release"]: r for r in info["kafka_releases"]}
    assert sorted(releases) == ["3.9", "4.2"] and info["kafka_release"] == info["kafka_releases"][0]["release"]
    ours = {a["api_key"]: a["broker_max"] for a in info["api_versions"]}
    for release in releases.values():
        assert release["same"] and all(key in ours for key in release["same"])
        assert all(d["broker_max"] == ours.get(d["api_key"]) for d in release["behind"] + release["beyond"])
        assert all(d["broker_max"] is None or d["broker_max"] < d["release_max"] for d in release["behind"])


def test_cluster_info_table_shows_every_release(broker: BrokerProcess) -> None:
    """The Kafka-releases table as people read it (#41: release and beyond columns had zero width,
    a row was cut off): every release named in its row, each column as wide as its header, and the
    column rules of every line of the table at the same places."""
    result = kproto(broker.bootstrap, "cluster", "info", output="table")
    assert result.returncode == 0, result.stderr
    releases = ok(broker.bootstrap, "cluster", "info")["kafka_releases"]
    lines = result.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Kafka releases"))
    block = [line.rstrip() for line in lines[start + 1:] if line.strip()]
    header = next(line for line in block if line.startswith("┃"))
    assert [cell.strip() for cell in header.strip("┃").split("┃")] == [
        "release", "at its newest", "behind or missing", "beyond", "behind (key: ours/its)"]
    rows = [[cell.strip() for cell in line.strip("│").split("│")] for line in block if line.startswith("│")]
    starts = [row for row in rows if row[0]]
    assert [row[:4] for row in starts] == [
        [r["release"], str(len(r["same"])), str(len(r["behind"])), str(len(r["beyond"]))] for r in releases]
    for release in releases:  # each "behind" entry of a release is shown, wrapped over its row's lines
        first = next(i for i, row in enumerate(rows) if row[0] == release["release"])
        shown = " ".join(row[4] for row in rows[first:first + 1] + list(_continuations(rows[first + 1:]))).split()
        expected = [f"{d['api_key']}:{'-' if d['broker_max'] is None else d['broker_max']}/{d['release_max']}"
                    for d in release["behind"]]
        assert shown == (expected or ["-"]), shown
    edges = {tuple(i for i, char in enumerate(line) if char in "┏┳┓┃┡╇┩│└┴┘") for line in block}
    assert len(edges) == 1, block


def _continuations(rows: list[list[str]]) -> list[list[str]]:
    """The lines continuing a wrapped row (empty first cell), up to the next row."""
    taken = []
    for row in rows:
        if row[0]:
            break
        taken.append(row)
    return taken


def test_topic_lifecycle(broker: BrokerProcess, topic_name: str) -> None:
    b = broker.bootstrap
    created = ok(b, "topics", "create", topic_name, "--partitions", "2", "--replication-factor", "1", "--config", "retention.ms=3600000")
    assert created == {
        "topic": topic_name,
        "topic_id": created["topic_id"],
        "partitions": 2,
        "replication_factor": 1,
        "configs": {"retention.ms": "3600000"},
    }
    topic_id = created["topic_id"]
    assert uuid.UUID(topic_id).int != 0  # Kafka's topic UUID, kept with the topic
    listed = {t["name"]: t for t in ok(b, "topics", "list")["topics"]}
    assert listed[topic_name]["partitions"] == 2 and listed[topic_name]["internal"] is False
    assert listed[topic_name]["topic_id"] == topic_id

    described = ok(b, "topics", "describe", topic_name)["topics"]
    assert [t["name"] for t in described] == [topic_name]
    assert described[0]["topic_id"] == topic_id
    assert described[0]["partitions"][1] == {
        "partition": 1,
        "leader": 0,
        "leader_epoch": described[0]["partitions"][1]["leader_epoch"],
        "replicas": [0],
        "isr": [0],
        "offline_replicas": [],
        "log_start_offset": 0,
        "high_watermark": 0,
        "last_stable_offset": 0,
        "size_bytes": 0,
    }
    ok(b, "produce", topic_name, "--partition", "1", stdin="one\ntwo\nthree\n")
    (partition,) = [p for p in ok(b, "topics", "describe", topic_name)["topics"][0]["partitions"] if p["partition"] == 1]
    on_disk = sum(f.stat().st_size for f in (broker.data_dir / f"{topic_name}-1").glob("*.log"))
    assert partition["high_watermark"] == 3 and partition["size_bytes"] == on_disk > 0

    assert ok(b, "topics", "add-partitions", topic_name, "--total", "3") == {"topic": topic_name, "partitions": 3}
    assert ok(b, "topics", "add-partitions", topic_name, "--add", "2") == {"topic": topic_name, "partitions": 5}
    assert len(ok(b, "topics", "describe", topic_name)["topics"][0]["partitions"]) == 5

    again = kproto(b, "topics", "create", topic_name)
    failed(again, 1, "error: TOPIC_ALREADY_EXISTS: ")

    assert ok(b, "topics", "delete", topic_name) == {"deleted": [topic_name]}
    assert topic_name not in {t["name"] for t in ok(b, "topics", "list")["topics"]}
    failed(kproto(b, "topics", "describe", topic_name), 1, "error: UNKNOWN_TOPIC_OR_PARTITION: ")


def test_configs_describe_set_delete(broker: BrokerProcess, topic_name: str) -> None:
    b = broker.bootstrap
    ok(b, "topics", "create", topic_name, "--partitions", "1")
    resource = {"type": "topic", "name": topic_name}
    assert ok(b, "configs", "set", "--topic", topic_name, "retention.ms=5000", "cleanup.policy=compact") == {
        "resource": resource,
        "set": {"retention.ms": "5000", "cleanup.policy": "compact"},
    }
    line = failed(kproto(b, "configs", "describe", "--topic", topic_name, "--key", "retention.mss"), 1, "error: INVALID_CONFIG: ")
    assert "retention.mss" in line
    described = ok(b, "configs", "describe", "--topic", topic_name, "--key", "retention.ms")
    assert described == {
        "resource": resource,
        "configs": [
            {"name": "retention.ms", "value": "5000", "source": "DYNAMIC_TOPIC_CONFIG", "read_only": False, "sensitive": False}
        ],
    }
    overrides = ok(b, "configs", "describe", "--topic", topic_name, "--overrides")["configs"]
    assert {c["name"] for c in overrides} == {"retention.ms", "cleanup.policy"}

    assert ok(b, "configs", "delete", "--topic", topic_name, "retention.ms") == {"resource": resource, "deleted": ["retention.ms"]}
    after = ok(b, "configs", "describe", "--topic", topic_name, "--key", "retention.ms")["configs"][0]
    assert after["source"] != "DYNAMIC_TOPIC_CONFIG" and after["value"] != "5000"

    broker_configs = ok(b, "configs", "describe", "--broker", "0")
    assert broker_configs["resource"] == {"type": "broker", "name": "0"}
    assert any(c["name"] == "num.partitions" for c in broker_configs["configs"])
    failed(kproto(b, "configs", "set", "--broker", "0", "num.partitions=3"), 1, "error: INVALID_REQUEST: ")
    failed(kproto(b, "configs", "set", "--topic", topic_name, "retention.ms=abc"), 1, "error: INVALID_CONFIG: ")


def test_produce_then_consume_round_trip(broker: BrokerProcess, topic_name: str) -> None:
    b = broker.bootstrap
    ok(b, "topics", "create", topic_name, "--partitions", "3")
    lines = [f"key{i}|value {i} ünïcode" for i in range(30)]
    produced = ok(
        b, "produce", topic_name, "--key-sep", "|", "--header", "source=cli", "--header", "run=1",
        "--compression", "zstd", stdin="\n".join(lines) + "\n",
    )
    assert produced["topic"] == topic_name and produced["records"] == 30
    assert sum(p["records"] for p in produced["partitions"]) == 30
    for p in produced["partitions"]:
        assert (p["first_offset"], p["last_offset"]) == (0, p["records"] - 1)

    result = kproto(b, "consume", topic_name, "--from-beginning", "-n", "30", "--idle-timeout", "10")
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert sorted(sorted(r) for r in records)[0] == ["headers", "key", "offset", "partition", "timestamp", "topic", "value"]
    assert sorted((r["key"], r["value"]) for r in records) == sorted(tuple(line.split("|")) for line in lines)
    assert all(r["headers"] == [{"key": "source", "value": "cli"}, {"key": "run", "value": "1"}] for r in records)
    by_key = {r["key"]: r["partition"] for r in records}
    # The same key goes to the same partition on a second produce (murmur2, like the Java client).
    ok(b, "produce", topic_name, "--key-sep", "|", stdin="key7|again\n")
    again = kproto(b, "consume", topic_name, "--partition", str(by_key["key7"]), "--from-beginning", "--isolation", "read_committed",
                   "--idle-timeout", "2")
    assert "again" in [json.loads(line)["value"] for line in again.stdout.splitlines()]

    # Unkeyed lines to an explicit partition, read back from an offset with a template.
    ok(b, "produce", topic_name, "--partition", "1", stdin="plain a\nplain b\n")
    hw = ok(b, "topics", "describe", topic_name)["topics"][0]["partitions"][1]["high_watermark"]
    template = kproto(b, "consume", topic_name, "--partition", "1", "--offset", str(hw - 2), "-n", "2",
                      "--template", "{partition}:{offset}:{key}:{value}:{headers}", output="table")
    assert template.returncode == 0, template.stderr
    assert template.stdout.splitlines() == [f"1:{hw - 2}:null:plain a:", f"1:{hw - 1}:null:plain b:"]
    # The old spelling of the template option still works where it cannot mean the output format.
    old = kproto(b, "consume", topic_name, "--partition", "1", "--offset", str(hw - 1), "-n", "1", "--format", "{value}", output="table")
    assert old.stdout.splitlines() == ["plain b"]


def test_cli_habits_of_kafka_users(broker: BrokerProcess, topic_name: str, tmp_path: Path) -> None:
    b = broker.bootstrap
    version = subprocess.run([sys.executable, "-m", "rivven_kproto", "--version"], capture_output=True, text=True, check=True)
    assert version.stdout.startswith("kproto ") and version.stdout.split()[1][0].isdigit()
    # Global options after the verb, as kafka-topics users type them.
    listed = subprocess.run(
        [sys.executable, "-m", "rivven_kproto", "topics", "list", "--bootstrap", b, "--format", "json"],
        capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
    )
    assert listed.returncode == 0, listed.stderr
    assert isinstance(json.loads(listed.stdout), (list, dict))
    # produce keeps stdout clean for pipes: the summary goes to stderr.
    produced = kproto(b, "produce", topic_name, "--partition", "0", stdin="\x01bin\nplain\n", output="table")
    assert produced.returncode == 0 and produced.stdout == "", produced
    assert "2 records" in produced.stderr
    # consume -e stops at the end (no idle timeout) and counts on stderr like kafka-console-consumer.
    read = kproto(b, "consume", topic_name, "--from-beginning", "-e", "--print-binary", "hex", output="table")
    assert read.returncode == 0, read.stderr
    assert read.stdout.splitlines() == [b"\x01bin".hex(), b"plain".hex()]
    assert read.stderr.strip() == "Processed a total of 2 messages"
    nothing = kproto(b, "consume", topic_name, "-e", output="table")  # from the end: nothing, at once
    assert nothing.stdout == "" and nothing.stderr.strip() == "Processed a total of 0 messages"
    # --acks 0: nothing is answered, the offsets are unknown, the records still land.
    fire = kproto(b, "produce", topic_name, "--partition", "0", "--acks", "0", stdin="fire-and-forget\n")
    assert fire.returncode == 0, fire.stderr
    assert json.loads(fire.stdout)["partitions"] == [{"partition": 0, "first_offset": -1, "last_offset": -1, "records": 1}]
    for _ in range(50):  # the broker may still be reading the request when the producer has exited
        landed = kproto(b, "consume", topic_name, "--from-beginning", "-e", output="table").stdout.splitlines()
        if "fire-and-forget" in landed:
            break
    assert "fire-and-forget" in landed
    # --group: start at the group's committed offsets, commit what was shown.
    first = kproto(b, "consume", topic_name, "--group", f"{topic_name}-g", "--from-beginning", "-n", "1", output="table")
    second = kproto(b, "consume", topic_name, "--group", f"{topic_name}-g", "-n", "1", output="table")
    assert first.returncode == 0 and second.returncode == 0, (first.stderr, second.stderr)
    assert first.stdout.splitlines() == ["\x01bin"] and second.stdout.splitlines() == ["plain"]
    # kafka-topics' --partitions, singular nouns, and empty results in one line.
    created = kproto(b, "topics", "create", f"{topic_name}-one", "--partitions", "1", output="table")
    assert created.stdout.startswith(f"created topic {topic_name}-one (1 partition,"), created.stdout
    grown = kproto(b, "topics", "add-partitions", f"{topic_name}-one", "--partitions", "2", output="table")
    assert grown.stdout.strip() == f"topic {topic_name}-one now has 2 partitions", grown.stdout
    nothing_hanging = kproto(b, "txns", "find-hanging", "--topic", topic_name, output="table")
    assert nothing_hanging.stdout.strip() == "hanging transactions: none", nothing_hanging.stdout
    # Unknown keys in a broker's --config file are named in one warning each, as Kafka does.
    config = tmp_path / "server.properties"
    config.write_text("num.partitions=2\nfoo.bar=1\n")
    own = BrokerProcess(tmp_path / "data", tmp_path / "broker.log", ["--config", str(config)]).start()
    try:
        assert "The configuration 'foo.bar' was supplied but isn't a known config." in own.log_text()
        assert "num.partitions" not in own.log_text()
    finally:
        assert own.stop() == 0


def test_bulk_consume_prints_values_as_they_are_and_commits(broker: BrokerProcess, topic_name: str) -> None:
    """The bulk path of ``consume`` (plain values, whole fetches in one write, #41): null as
    ``null``, undecodable bytes escaped, escape sequences left alone (as kafka-console-consumer and
    kcat print them), and as a group member it commits where it stopped."""
    from confluent_kafka import Producer

    b = broker.bootstrap
    ok(b, "topics", "create", topic_name, "--partitions", "1")
    producer = Producer({"bootstrap.servers": b})
    for value in (b"a", None, b"\xffz", b"\x1b[31mred"):
        producer.produce(topic_name, value=value, partition=0)
    assert producer.flush(30) == 0
    read = kproto(b, "consume", topic_name, "--from-beginning", "-e", output="table")
    assert read.returncode == 0, read.stderr
    assert read.stdout.split("\n") == ["a", "null", "\\xffz", "\x1b[31mred", ""]
    assert read.stderr.strip() == "Processed a total of 4 messages"
    member = kproto(b, "consume", topic_name, "--group", f"{topic_name}-g", "--from-beginning", "-e", output="table")
    assert member.returncode == 0 and member.stdout.count("\n") == 4, member
    producer.produce(topic_name, value=b"after", partition=0)
    assert producer.flush(30) == 0
    again = kproto(b, "consume", topic_name, "--group", f"{topic_name}-g", "-e", output="table")
    assert again.returncode == 0 and again.stdout == "after\n", again


def test_log_verify_finds_a_flipped_byte(tmp_path: Path) -> None:
    own = BrokerProcess(tmp_path / "data", tmp_path / "broker.log").start()
    topic = "verify-me"
    try:
        ok(own.bootstrap, "topics", "create", topic, "--partitions", "1")
        for chunk in range(3):  # one batch per produce run
            ok(own.bootstrap, "produce", topic, stdin="".join(f"c{chunk}-{i}\n" for i in range(4)))
    finally:
        assert own.stop() == 0
    data_dir = str(tmp_path / "data")
    assert ok("unused:1", "log", "verify", data_dir) == {"ok": True, "files": 1, "batches": 3, "records": 12}
    dumped = [json.loads(line) for line in kproto("unused:1", "log", "dump", data_dir, "--records").stdout.splitlines()]
    assert [(d["base_offset"], d["last_offset"], d["crc_valid"]) for d in dumped] == [(0, 3, True), (4, 7, True), (8, 11, True)]
    assert dumped[1]["records"][0]["value"] == "c1-0" and dumped[1]["producer_id"] == -1

    segment = tmp_path / "data" / f"{topic}-0" / ("0" * 20 + ".log")
    raw = bytearray(segment.read_bytes())
    second = dumped[1]
    raw[second["position"] + second["size"] - 3] ^= 0x40  # inside the second batch's records
    segment.write_bytes(bytes(raw))
    line = failed(kproto("unused:1", "log", "verify", data_dir), 1, "error: CORRUPT_MESSAGE: ")
    assert str(segment) in line and "batch at offset 4" in line and "CRC mismatch" in line
    rows = [json.loads(x) for x in kproto("unused:1", "log", "dump", str(segment)).stdout.splitlines()]
    assert [r["crc_valid"] for r in rows] == [True, False, True]

    segment.write_bytes(bytes(raw[: second["position"] + 30]))  # torn inside the second header
    line = failed(kproto("unused:1", "log", "verify", str(segment.parent)), 1, "error: CORRUPT_MESSAGE: ")
    assert "after offset 3" in line and "torn batch" in line


def test_errors_are_one_line_with_the_right_status(broker: BrokerProcess) -> None:
    b = broker.bootstrap
    failed(kproto(b, "consume", "no-such-topic", "-n", "1"), 1, "error: UNKNOWN_TOPIC_OR_PARTITION: ")
    down = failed(kproto(f"127.0.0.1:{unused_port()}", "topics", "list"), 1, "error: NETWORK_EXCEPTION: ")
    assert "cannot connect" in down
    failed(kproto(b, "topics", "list", "--bogus"), 2, "error: usage: ")
    failed(kproto(b, "topics", "create"), 2, "error: usage: ")
    failed(kproto(b, "topics", "create", "x", "--config", "novalue"), 2, "error: usage: ")
    failed(kproto(b, "configs", "describe"), 2, "error: usage: ")
    failed(kproto("host:notaport", "topics", "list"), 2, "error: usage: ")
    failed(kproto(b, "consume", "t", "--format", "{nope}"), 2, "error: usage: ")
    with socket.socket() as silent:  # connects, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        result = kproto(f"127.0.0.1:{silent.getsockname()[1]}", "--timeout", "0.5", "cluster", "info")
    failed(result, 1, "error: REQUEST_TIMED_OUT: ")


@pytest.mark.parametrize(
    "command",
    [
        [], ["cluster"], ["cluster", "info"], ["topics"], ["topics", "list"], ["topics", "describe"], ["topics", "create"],
        ["topics", "delete"], ["topics", "add-partitions"], ["configs"], ["configs", "describe"], ["configs", "set"],
        ["configs", "delete"], ["produce"], ["consume"], ["log"], ["log", "dump"], ["log", "verify"], ["serve"],
    ],
)
def test_every_command_has_help_with_an_example(command: list[str]) -> None:
    result = CliRunner().invoke(main, [*command, "--help"])
    assert result.exit_code == 0, result.output
    assert "Example:" in result.output and "kproto" in result.output


def test_produce_shows_progress_on_a_terminal(broker: BrokerProcess, topic_name: str, tmp_path: Path) -> None:
    """A file sent from a terminal gets a live count on stderr; stdout and pipes stay clean."""
    lines = tmp_path / "lines.txt"
    lines.write_text("".join(f"line-{i}\n" for i in range(20_000)))
    leader, follower = pty.openpty()
    env = {k: v for k, v in os.environ.items() if not k.startswith("KPROTO_")}
    command = [sys.executable, "-m", "rivven_kproto", "--bootstrap", broker.bootstrap, "produce", topic_name]
    with lines.open("rb") as stdin:
        proc = subprocess.Popen(command, stdin=stdin, stdout=subprocess.PIPE, stderr=follower, env=env)
    os.close(follower)
    shown = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        shown += chunk
    os.close(leader)
    stdout, _ = proc.communicate(timeout=RUN_TIMEOUT_S)
    assert proc.returncode == 0, shown
    assert stdout == b""
    assert b"records sent" in shown and b"20000 records to" in shown, shown
    piped = kproto(broker.bootstrap, "produce", topic_name, stdin="one\n", output="table")
    assert "records sent" not in piped.stderr and piped.stdout == ""


def bare(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """``kproto`` with exactly these arguments (no --bootstrap or --format put in front)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KPROTO_")}
    return subprocess.run([sys.executable, "-m", "rivven_kproto", *args], input=stdin, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S, env=env)


def test_kafka_tool_spellings_are_accepted(broker: BrokerProcess, topic_name: str) -> None:
    """kafka-console-*.sh and kcat habits (#41): ``--bootstrap-server`` and ``-b`` for
    ``--bootstrap`` (after the verb too), ``--topic``/``-t`` for the TOPIC argument,
    ``--max-messages`` for ``-n``. They were refused as usage errors."""
    b = broker.bootstrap
    created = bare("topics", "create", "--topic", topic_name, "--partitions", "1", "--bootstrap-server", b)
    assert created.returncode == 0, created.stderr
    produced = bare("-b", b, "produce", "--topic", topic_name, stdin="a\nb\nc\n")
    assert produced.returncode == 0, produced.stderr
    read = bare("consume", "-t", topic_name, "--from-beginning", "--max-messages", "2", "--bootstrap-server", b)
    assert read.returncode == 0, read.stderr
    assert read.stdout.splitlines() == ["a", "b"]
    described = bare("topics", "describe", "--topic", topic_name, "-b", b, "--format", "json")
    assert described.returncode == 0 and topic_name in described.stdout, described.stderr
    failed(bare("produce", topic_name, "--topic", "other", "-b", b), 2, "error: usage: ")
    failed(bare("consume", "-b", b), 2, "error: usage: ")


@pytest.mark.parametrize("command", [[], ["topics"], ["configs"], ["txns"]])
def test_a_group_without_its_verb_prints_its_help(command: list[str]) -> None:
    """As click does for a group without a command: the help as written (exit 2), not squeezed
    into one "error: usage:" line (#41)."""
    result = bare(*command)
    assert result.returncode == 2, result
    assert "error:" not in result.stderr
    assert result.stderr.startswith(f"Usage: kproto {' '.join(command)}".rstrip()), result.stderr
    assert "\nCommands:\n" in result.stderr and "Example:" in result.stderr
