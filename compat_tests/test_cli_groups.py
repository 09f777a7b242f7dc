"""``kproto groups list|describe|delete|reset-offsets`` against a real broker, with a real consumer
group (confluent-kafka) as the member whose assignment, offsets and lag are shown."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from confluent_kafka import Consumer

from rivven_kproto.cli.main import main

from .broker_process import BrokerProcess
from .test_cli import failed, kproto, ok

TIMEOUT_S = 30
CLIENT_ID = "cli-groups-test"


@contextmanager
def member(bootstrap: str, group: str, topic: str) -> Iterator[Consumer]:
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "client.id": CLIENT_ID,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": 6000,
    })
    consumer.subscribe([topic])
    try:
        yield consumer
    finally:
        consumer.close()  # LeaveGroup: the group becomes Empty at once


def poll(consumer: Consumer, count: int) -> list[tuple[int, int, str]]:
    """(partition, offset, value) of ``count`` records, within the timeout."""
    seen: list[tuple[int, int, str]] = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(seen) < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            seen.append((message.partition() or 0, message.offset() or 0, (message.value() or b"").decode()))
    assert len(seen) == count, seen
    return seen


def describe(bootstrap: str, group: str) -> dict[str, Any]:
    (described,) = ok(bootstrap, "groups", "describe", group)["groups"]
    return dict(described)


def offsets(described: dict[str, Any]) -> dict[tuple[str, int], tuple[int | None, int | None, int | None]]:
    return {(o["topic"], o["partition"]): (o["committed_offset"], o["log_end_offset"], o["lag"]) for o in described["offsets"]}


def test_groups_list_describe_reset_delete(broker: BrokerProcess, topic_name: str) -> None:
    b = broker.bootstrap
    group = f"{topic_name}-group"
    ok(b, "topics", "create", topic_name, "--partitions", "2")
    ok(b, "produce", topic_name, "--partition", "0", stdin="".join(f"p0-{i}\n" for i in range(6)))
    ok(b, "produce", topic_name, "--partition", "1", stdin="".join(f"p1-{i}\n" for i in range(4)))

    with member(b, group, topic_name) as consumer:
        poll(consumer, 10)
        consumer.commit(asynchronous=False)
        listed = {g["group_id"]: g for g in ok(b, "groups", "list")["groups"]}
        assert listed[group] == {"group_id": group, "type": "classic", "protocol_type": "consumer", "state": "Stable",
                                 "coordinator": 0}
        assert group in {g["group_id"] for g in ok(b, "groups", "list", "--state", "Stable")["groups"]}
        assert group not in {g["group_id"] for g in ok(b, "groups", "list", "--state", "Empty")["groups"]}

        described = describe(b, group)
        assert (described["state"], described["protocol_type"], described["protocol"], described["coordinator"]) == (
            "Stable", "consumer", "range", 0,
        )
        (one,) = described["members"]
        assert one["client_id"] == CLIENT_ID and one["member_id"] and one["group_instance_id"] is None
        assert one["assignment"] == [{"topic": topic_name, "partition": 0}, {"topic": topic_name, "partition": 1}]
        assert offsets(described) == {(topic_name, 0): (6, 6, 0), (topic_name, 1): (4, 4, 0)}
        assert {o["member_id"] for o in described["offsets"]} == {one["member_id"]}

        ok(b, "produce", topic_name, "--partition", "1", stdin="late-0\nlate-1\nlate-2\n")
        assert offsets(describe(b, group))[(topic_name, 1)] == (4, 7, 3)

        # A live member would overwrite whatever is committed: both verbs refuse, like Kafka's tool.
        line = failed(kproto(b, "groups", "reset-offsets", group, "--all-topics", "--to-earliest"), 1, "error: NON_EMPTY_GROUP: ")
        assert "Stable" in line
        failed(kproto(b, "groups", "delete", group), 1, "error: NON_EMPTY_GROUP: ")

    described = describe(b, group)
    assert described["state"] == "Empty" and described["members"] == []
    assert offsets(described) == {(topic_name, 0): (6, 6, 0), (topic_name, 1): (4, 7, 3)}
    assert {o["member_id"] for o in described["offsets"]} == {None}

    dry = ok(b, "groups", "reset-offsets", group, "--all-topics", "--to-earliest")
    assert dry == {
        "group": group,
        "executed": False,
        "offsets": [
            {"topic": topic_name, "partition": 0, "previous_offset": 6, "new_offset": 0},
            {"topic": topic_name, "partition": 1, "previous_offset": 4, "new_offset": 0},
        ],
    }
    assert offsets(describe(b, group))[(topic_name, 0)] == (6, 6, 0)  # a dry run commits nothing

    done = ok(b, "groups", "reset-offsets", group, "--topic", f"{topic_name}:0", "--to-offset", "2", "--execute")
    assert done["executed"] is True and done["offsets"] == [{"topic": topic_name, "partition": 0, "previous_offset": 6, "new_offset": 2}]
    clamped = ok(b, "groups", "reset-offsets", group, "--topic", f"{topic_name}:1", "--to-offset", "99", "--execute")
    assert clamped["offsets"][0]["new_offset"] == 7  # clamped to the log end
    assert offsets(describe(b, group)) == {(topic_name, 0): (2, 6, 4), (topic_name, 1): (7, 7, 0)}

    # By time: the first record at or after a record's own timestamp is that record (or an earlier
    # one sharing its millisecond).
    records = [json.loads(x) for x in kproto(b, "consume", topic_name, "--partition", "1", "--from-beginning", "--idle-timeout", "1").stdout.splitlines()]
    late = next(r for r in records if r["value"] == "late-0")
    first_at = min(r["offset"] for r in records if r["timestamp"] >= late["timestamp"])
    by_time = ok(b, "groups", "reset-offsets", group, "--topic", f"{topic_name}:1", "--to-timestamp", str(late["timestamp"]), "--execute")
    assert by_time["offsets"][0]["new_offset"] == first_at
    future = ok(b, "groups", "reset-offsets", group, "--topic", topic_name, "--to-datetime", "2999-01-01T00:00:00Z")
    assert [o["new_offset"] for o in future["offsets"]] == [6, 7]  # nothing that late: the log end
    past = ok(b, "groups", "reset-offsets", group, "--topic", topic_name, "--to-datetime", "2001-01-01T00:00:00+00:00")
    assert [o["new_offset"] for o in past["offsets"]] == [0, 0]
    ok(b, "groups", "reset-offsets", group, "--topic", topic_name, "--to-latest", "--execute")
    assert offsets(describe(b, group)) == {(topic_name, 0): (6, 6, 0), (topic_name, 1): (7, 7, 0)}
    # kafka-consumer-groups' --shift-by (clamped to the log) and --by-duration.
    back = ok(b, "groups", "reset-offsets", group, "--topic", topic_name, "--shift-by", "-2", "--execute")
    assert [o["new_offset"] for o in back["offsets"]] == [4, 5]
    ahead = ok(b, "groups", "reset-offsets", group, "--topic", topic_name, "--shift-by", "10")
    assert [o["new_offset"] for o in ahead["offsets"]] == [6, 7]
    long_ago = ok(b, "groups", "reset-offsets", group, "--topic", topic_name, "--by-duration", "P10000D")
    assert [o["new_offset"] for o in long_ago["offsets"]] == [0, 0]
    failed(kproto(b, "groups", "reset-offsets", group, "--topic", topic_name, "--by-duration", "ten minutes"), 2, "error: usage: ")
    ok(b, "groups", "reset-offsets", group, "--topic", topic_name, "--to-latest", "--execute")

    # A consumer of the group resumes where the reset put it.
    ok(b, "groups", "reset-offsets", group, "--topic", f"{topic_name}:0", "--to-offset", "4", "--execute")
    with member(b, group, topic_name) as consumer:
        assert sorted(poll(consumer, 2)) == [(0, 4, "p0-4"), (0, 5, "p0-5")]

    assert ok(b, "groups", "delete", group) == {"deleted": [group]}
    assert group not in {g["group_id"] for g in ok(b, "groups", "list")["groups"]}
    failed(kproto(b, "groups", "describe", group), 1, "error: GROUP_ID_NOT_FOUND: ")
    failed(kproto(b, "groups", "delete", group), 1, "error: GROUP_ID_NOT_FOUND: ")


def test_reset_offsets_of_a_new_group_creates_it(broker: BrokerProcess, topic_name: str) -> None:
    """Kafka's tool can seed a group that never consumed: the commit creates it, Empty."""
    b = broker.bootstrap
    group = f"{topic_name}-seeded"
    ok(b, "topics", "create", topic_name, "--partitions", "1")
    ok(b, "produce", topic_name, stdin="a\nb\nc\n")
    seeded = ok(b, "groups", "reset-offsets", group, "--topic", topic_name, "--to-offset", "1", "--execute")
    assert seeded["offsets"] == [{"topic": topic_name, "partition": 0, "previous_offset": None, "new_offset": 1}]
    described = describe(b, group)
    assert described["state"] == "Empty" and offsets(described) == {(topic_name, 0): (1, 3, 2)}
    assert ok(b, "groups", "delete", group) == {"deleted": [group]}


def test_group_errors_are_one_line_with_the_right_status(broker: BrokerProcess, topic_name: str) -> None:
    b = broker.bootstrap
    ok(b, "topics", "create", topic_name, "--partitions", "1")
    failed(kproto(b, "groups", "describe", "never-seen-group"), 1, "error: GROUP_ID_NOT_FOUND: ")
    line = failed(kproto(b, "groups", "delete", "never-seen-a", "never-seen-b"), 1, "error: GROUP_ID_NOT_FOUND: ")
    assert "never-seen-a" in line and "never-seen-b" in line
    failed(kproto(b, "groups", "reset-offsets", "g", "--topic", "no-such-topic", "--to-earliest"), 1, "error: UNKNOWN_TOPIC_OR_PARTITION: ")
    failed(kproto(b, "groups", "reset-offsets", "g", "--topic", f"{topic_name}:5", "--to-earliest"), 1, "error: UNKNOWN_TOPIC_OR_PARTITION: ")
    failed(kproto(b, "groups", "reset-offsets", "never-seen-group", "--all-topics", "--to-earliest"), 1, "error: INVALID_REQUEST: ")
    failed(kproto(b, "groups", "reset-offsets", "g", "--topic", topic_name), 2, "error: usage: ")
    failed(kproto(b, "groups", "reset-offsets", "g", "--to-latest"), 2, "error: usage: ")
    failed(kproto(b, "groups", "reset-offsets", "g", "--topic", topic_name, "--all-topics", "--to-latest"), 2, "error: usage: ")
    failed(kproto(b, "groups", "reset-offsets", "g", "--topic", topic_name, "--to-latest", "--to-offset", "1"), 2, "error: usage: ")
    failed(kproto(b, "groups", "reset-offsets", "g", "--topic", f"{topic_name}:x", "--to-latest"), 2, "error: usage: ")
    failed(kproto(b, "groups", "reset-offsets", "g", "--topic", topic_name, "--to-datetime", "yesterday"), 2, "error: usage: ")
    failed(kproto(b, "groups", "describe"), 2, "error: usage: ")


@pytest.mark.parametrize("command", [["groups"], ["groups", "list"], ["groups", "describe"], ["groups", "delete"], ["groups", "reset-offsets"]])
def test_group_commands_have_help_with_an_example(command: list[str]) -> None:
    result = CliRunner().invoke(main, [*command, "--help"])
    assert result.exit_code == 0, result.output
    assert "Example:" in result.output and "kproto" in result.output


class ConsoleMember:
    """``kproto consume --group`` as a process of its own, its printed lines collected by a thread."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        command = [sys.executable, "-m", "rivven_kproto", "--bootstrap", bootstrap, "consume", topic,
                   "--group", group, "--from-beginning", "--template", "{partition} {offset} {value}"]
        self.proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lock = threading.Lock()
        self.lines: list[tuple[int, int, str]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            partition, offset, value = line.split()
            with self.lock:
                self.lines.append((int(partition), int(offset), value))

    def consumed(self) -> list[tuple[int, int, str]]:
        with self.lock:
            return list(self.lines)

    def interrupt(self) -> str:
        """Ctrl-C: the member commits, leaves and exits 130; its stderr."""
        self.proc.send_signal(signal.SIGINT)
        _, stderr = self.proc.communicate(timeout=TIMEOUT_S)
        assert self.proc.returncode == 130, stderr
        return stderr

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()


def test_consume_with_group_shares_partitions_with_other_clients(
    broker: BrokerProcess, topic_name: str, tmp_path: Path
) -> None:
    """``consume --group`` is a real member: a confluent-kafka member gets half of the partitions,
    starts where kproto committed, and takes everything when kproto leaves at Ctrl-C."""
    from .test_groups import PARTITIONS, Member, create_topic, produce, wait_until

    b = broker.bootstrap
    group = f"{topic_name}-shared"
    create_topic(broker, topic_name)
    produce(broker, topic_name, "a", 10)
    everything = {(p, o) for p in range(PARTITIONS) for o in range(10)}
    console = ConsoleMember(b, topic_name, group)
    other: Member | None = None
    try:
        deadline = time.monotonic() + 4 * TIMEOUT_S
        while {(p, o) for p, o, _ in console.consumed()} != everything:  # the only member: it reads all
            assert console.proc.poll() is None and time.monotonic() < deadline, console.consumed()
            time.sleep(0.1)

        other = Member("confluent-kafka", broker, topic_name, group, "other", tmp_path)
        wait_until(lambda: len(other.owned()) == PARTITIONS // 2, "the confluent member's half", [other], 4 * TIMEOUT_S)
        described = describe(b, group)
        assignments = sorted(sorted(a["partition"] for a in m["assignment"]) for m in described["members"])
        assert described["state"] == "Stable" and len(assignments) == 2
        assert sorted(assignments[0] + assignments[1]) == list(range(PARTITIONS))
        assert sorted(other.owned()) in assignments

        # New records go to whichever member owns their partition; nobody re-reads the "a" records
        # (kproto committed them when the group rebalanced).
        produce(broker, topic_name, "b", 1)
        b_records = {f"b-{p}-0" for p in range(PARTITIONS)}

        def b_seen() -> set[str]:
            return {v for _, _, v in console.consumed() + other.consumed() if v.startswith("b-")}

        wait_until(lambda: b_seen() == b_records, "both members to read the b records", [other], 2 * TIMEOUT_S)
        assert {p for p, _, v in other.consumed()} == other.owned()
        assert not [v for _, _, v in other.consumed() if v.startswith("a-")]
        console_b = sorted(p for p, _, v in console.consumed() if v.startswith("b-"))
        assert console_b == sorted(set(range(PARTITIONS)) - other.owned())

        stderr = console.interrupt()
        assert f"Processed a total of {len(everything) + len(console_b)} messages" in stderr
        wait_until(lambda: other.owned() == set(range(PARTITIONS)), "the confluent member to own everything", [other])
        # kproto committed what it showed when it left, unless that commit met a rebalance (then, as
        # with Kafka's consumers, its last records are delivered again: at least once). Either way the
        # remaining member reads on from there and its commit ends the group at the log's end.
        produce(broker, topic_name, "c", 1)
        c_records = {f"c-{p}-0" for p in range(PARTITIONS)}
        wait_until(lambda: {v for _, _, v in other.consumed() if v.startswith("c-")} == c_records,
                   "the confluent member to read the c records", [other], 2 * TIMEOUT_S)
        assert not [v for _, _, v in other.consumed() if v.startswith("a-")]
        other.commit()
        assert offsets(describe(b, group)) == {(topic_name, p): (12, 12, 0) for p in range(PARTITIONS)}
        other.close()
    finally:
        console.kill()
        if other is not None:
            other.kill()
