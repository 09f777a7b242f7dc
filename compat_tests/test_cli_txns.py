"""``kproto produce --transactional-id``, ``consume --isolation read_committed``, ``txns ...`` and
``producers describe`` as users run them: subprocesses with ``--format json`` against a real broker.

A hung transaction is made with ``produce --exit-without-end-txn`` (hidden): the producer begins,
writes and exits without EndTxn, with a transaction timeout far longer than the test. A
*hanging* one (which no coordinator will ever complete) is made by losing the coordinator's
state: the broker is stopped, its transaction log deleted, and started again.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from rivven_kproto.cli.main import main

from .broker_process import BrokerProcess
from .test_cli import failed, kproto, ok

LONG_TIMEOUT_MS = "600000"


def lines(*values: str) -> str:
    return "".join(f"{v}\n" for v in values)


def consumed(bootstrap: str, topic: str, *, committed: bool, idle: str = "1.5") -> list[tuple[int, str]]:
    """(offset, value) of everything readable from the beginning of partition 0."""
    isolation = "read_committed" if committed else "read_uncommitted"
    result = kproto(bootstrap, "consume", topic, "--partition", "0", "--from-beginning", "--isolation", isolation, "--idle-timeout", idle)
    assert result.returncode == 0, result.stderr
    return [(r["offset"], r["value"]) for r in map(json.loads, result.stdout.splitlines())]


def values(records: list[tuple[int, str]]) -> list[str]:
    return [value for _, value in records]


def partition0(bootstrap: str, topic: str) -> dict[str, Any]:
    partition: dict[str, Any] = ok(bootstrap, "topics", "describe", topic)["topics"][0]["partitions"][0]
    return partition


def producer(bootstrap: str, topic: str, producer_id: int) -> dict[str, Any]:
    described = ok(bootstrap, "producers", "describe", topic, "0")
    assert (described["topic"], described["partition"]) == (topic, 0)
    (found,) = [p for p in described["producers"] if p["producer_id"] == producer_id]
    assert sorted(found) == [
        "coordinator_epoch", "current_txn_start_offset", "last_sequence", "last_timestamp", "producer_epoch", "producer_id",
    ]
    return dict(found)


def hang(bootstrap: str, topic: str, tid: str, *items: str) -> dict[str, Any]:
    """Begin a transaction, write ``items`` to partition 0, exit without ending it."""
    produced = ok(
        bootstrap, "produce", topic, "--partition", "0", "--transactional-id", tid,
        "--transaction-timeout-ms", LONG_TIMEOUT_MS, "--exit-without-end-txn", stdin=lines(*items),
    )
    assert produced["transaction"]["result"] == "open"
    return produced


def test_transactional_produce_commit_and_abort(broker: BrokerProcess, topic_name: str) -> None:
    b = broker.bootstrap
    tid = f"{topic_name}-writer"
    ok(b, "topics", "create", topic_name, "--partitions", "1")
    plain = ok(b, "produce", topic_name, stdin=lines("a", "b"))
    assert plain["transaction"] is None

    committed = ok(b, "produce", topic_name, "--transactional-id", tid, stdin=lines("c1", "c2"))
    txn = committed["transaction"]
    assert txn["transactional_id"] == tid and txn["result"] == "committed" and txn["producer_id"] >= 0
    assert committed["records"] == 2 and committed["partitions"] == [{"partition": 0, "first_offset": 2, "last_offset": 3, "records": 2}]

    # The broker's default transaction.version=2: the CLI speaks transactions V2 (KIP-890 part 2),
    # whose EndTxn bumps the epoch it reports as the next one.
    assert txn["transaction_version"] == 2 and txn["next_producer_epoch"] == txn["producer_epoch"] + 1
    aborted = ok(b, "produce", topic_name, "--transactional-id", tid, "--abort", stdin=lines("x1", "x2"))
    assert aborted["transaction"]["result"] == "aborted"
    # The second session of the same id fenced the first: same producer id, next epoch (after the
    # first session's commit bumped it once).
    assert aborted["transaction"]["producer_id"] == txn["producer_id"]
    assert aborted["transaction"]["producer_epoch"] == txn["producer_epoch"] + 2
    end_epoch = aborted["transaction"]["next_producer_epoch"]
    assert end_epoch == txn["producer_epoch"] + 3
    assert aborted["partitions"][0]["first_offset"] == 5  # after c1, c2 and the COMMIT marker
    ok(b, "produce", topic_name, stdin=lines("d"))

    assert values(consumed(b, topic_name, committed=True)) == ["a", "b", "c1", "c2", "d"]
    assert values(consumed(b, topic_name, committed=False)) == ["a", "b", "c1", "c2", "x1", "x2", "d"]
    offsets = partition0(b, topic_name)
    assert offsets["last_stable_offset"] == offsets["high_watermark"] == 9  # 7 records + 2 markers

    (described,) = ok(b, "txns", "describe", tid)["transactions"]
    assert described == {
        "transactional_id": tid,
        "coordinator": 0,
        "state": "CompleteAbort",
        "producer_id": txn["producer_id"],
        "producer_epoch": end_epoch,
        "timeout_ms": 60000,
        "start_time_ms": None,
        "duration_ms": None,
        "partitions": [],
    }
    listed = ok(b, "txns", "list", "--producer-id", str(txn["producer_id"]))["transactions"]
    assert listed == [{"transactional_id": tid, "producer_id": txn["producer_id"], "state": "CompleteAbort", "coordinator": 0}]
    assert tid not in {t["transactional_id"] for t in ok(b, "txns", "list", "--state", "ongoing")["transactions"]}
    assert tid in {t["transactional_id"] for t in ok(b, "txns", "list", "--state", "CompleteAbort", "--state", "Ongoing")["transactions"]}

    state = producer(b, topic_name, txn["producer_id"])
    # The abort marker carried the bumped epoch: the partition moved to it with no batch of it yet.
    assert state["producer_epoch"] == end_epoch
    assert state["current_txn_start_offset"] is None and state["last_sequence"] == -1

    # Empty input: InitProducerId only, no transaction to end.
    empty = ok(b, "produce", topic_name, "--transactional-id", tid, stdin="")
    assert empty["records"] == 0 and empty["transaction"]["result"] == "empty"


def test_hung_transaction_blocks_read_committed_until_aborted(broker: BrokerProcess, topic_name: str) -> None:
    b = broker.bootstrap
    tid = f"{topic_name}-vanished"
    ok(b, "topics", "create", topic_name, "--partitions", "1")
    ok(b, "produce", topic_name, stdin=lines("before"))
    hung = hang(b, topic_name, tid, "h1", "h2")
    pid, epoch = hung["transaction"]["producer_id"], hung["transaction"]["producer_epoch"]
    assert hung["partitions"][0]["first_offset"] == 1
    ok(b, "produce", topic_name, stdin=lines("after"))

    # read_committed stops at the last stable offset, the open transaction's first offset.
    assert consumed(b, topic_name, committed=True) == [(0, "before")]
    assert values(consumed(b, topic_name, committed=False)) == ["before", "h1", "h2", "after"]
    offsets = partition0(b, topic_name)
    assert (offsets["last_stable_offset"], offsets["high_watermark"]) == (1, 4)

    listed = ok(b, "txns", "list", "--state", "Ongoing", "--min-duration-ms", "0")["transactions"]
    assert {"transactional_id": tid, "producer_id": pid, "state": "Ongoing", "coordinator": 0} in listed
    assert tid not in {t["transactional_id"] for t in ok(b, "txns", "list", "--min-duration-ms", "3600000")["transactions"]}
    (described,) = ok(b, "txns", "describe", tid)["transactions"]
    assert described["state"] == "Ongoing" and described["timeout_ms"] == int(LONG_TIMEOUT_MS)
    assert (described["producer_id"], described["producer_epoch"]) == (pid, epoch)
    assert described["partitions"] == [{"topic": topic_name, "partition": 0}]
    assert described["start_time_ms"] > 0 and described["duration_ms"] >= 0
    state = producer(b, topic_name, pid)
    assert (state["producer_epoch"], state["current_txn_start_offset"], state["last_sequence"]) == (epoch, 1, 1)

    # Its coordinator still tracks it (and would time it out), so it is open but not hanging.
    assert ok(b, "txns", "find-hanging", "--topic", topic_name, "--max-age-ms", "0") == {"max_age_ms": 0, "transactions": []}
    (seen,) = ok(b, "txns", "find-hanging", "--topic", topic_name, "--max-age-ms", "0", "--all")["transactions"]
    assert {k: seen[k] for k in ("topic", "partition", "producer_id", "producer_epoch", "start_offset", "transactional_id", "hanging")} == {
        "topic": topic_name, "partition": 0, "producer_id": pid, "producer_epoch": epoch, "start_offset": 1,
        "transactional_id": tid, "hanging": False,
    }
    assert seen["age_ms"] >= 0 and "coordinator" in seen["reason"]
    assert ok(b, "txns", "find-hanging", "--topic", topic_name, "--max-age-ms", "3600000", "--all")["transactions"] == []
    # --all alone drops the age filter: the open transaction is listed however young it is.
    assert [t["partition"] for t in ok(b, "txns", "find-hanging", "--topic", topic_name, "--all")["transactions"]] == [seen["partition"]]

    line = failed(kproto(b, "txns", "abort", "--topic", topic_name, "--partition", "0", "--start-offset", "0"), 1, "error: INVALID_TXN_STATE: ")
    assert "open transactions start at: 1" in line
    aborted = ok(b, "txns", "abort", "--topic", topic_name, "--partition", "0", "--start-offset", "1")
    assert aborted == {
        "topic": topic_name, "partition": 0, "producer_id": pid, "producer_epoch": epoch, "coordinator_epoch": 0,
        "start_offset": 1, "aborted": True,
    }
    # The ABORT marker releases read_committed readers: they move past h1, h2 to what followed.
    assert consumed(b, topic_name, committed=True) == [(0, "before"), (3, "after")]
    offsets = partition0(b, topic_name)
    assert offsets["last_stable_offset"] == offsets["high_watermark"] == 5
    assert producer(b, topic_name, pid)["current_txn_start_offset"] is None
    failed(kproto(b, "txns", "abort", "--topic", topic_name, "--partition", "0", "--producer-id", str(pid), "--producer-epoch", str(epoch)),
           1, "error: INVALID_TXN_STATE: ")


def test_hanging_transaction_found_and_aborted_after_the_coordinator_lost_it(tmp_path: Path) -> None:
    own = BrokerProcess(tmp_path / "data", tmp_path / "broker.log").start()
    topic, tid = "hanging", "lost-writer"
    try:
        b = own.bootstrap
        ok(b, "topics", "create", topic, "--partitions", "2")
        ok(b, "produce", topic, "--partition", "0", stdin=lines("before"))
        hung = hang(b, topic, tid, "lost-1", "lost-2", "lost-3")
        pid, epoch = hung["transaction"]["producer_id"], hung["transaction"]["producer_epoch"]
        ok(b, "produce", topic, "--partition", "0", stdin=lines("after"))
        assert own.stop() == 0
        shutil.rmtree(tmp_path / "data" / "meta" / "txn")  # the coordinator forgets the transaction
        own.start()
        b = own.bootstrap

        failed(kproto(b, "txns", "describe", tid), 1, "error: TRANSACTIONAL_ID_NOT_FOUND: ")
        assert consumed(b, topic, committed=True) == [(0, "before")]  # still pinned at the LSO
        found = ok(b, "txns", "find-hanging", "--max-age-ms", "0")  # every topic
        (item,) = found["transactions"]
        assert item["age_ms"] >= 0 and item["last_timestamp"] > 0
        assert {k: v for k, v in item.items() if k not in ("age_ms", "last_timestamp")} == {
            "topic": topic, "partition": 0, "producer_id": pid, "producer_epoch": epoch, "coordinator_epoch": -1,
            "start_offset": 1, "transactional_id": None, "hanging": True, "reason": "no transactional id has this producer id",
        }
        assert ok(b, "txns", "find-hanging", "--topic", topic, "--max-age-ms", "3600000")["transactions"] == []

        aborted = ok(b, "txns", "abort", "--topic", topic, "--partition", "0", "--producer-id", str(pid), "--producer-epoch", str(epoch))
        assert (aborted["producer_id"], aborted["producer_epoch"], aborted["start_offset"]) == (pid, epoch, None)
        assert ok(b, "txns", "find-hanging", "--max-age-ms", "0", "--all")["transactions"] == []
        assert consumed(b, topic, committed=True) == [(0, "before"), (4, "after")]
    finally:
        if own.alive():
            assert own.stop() == 0


def test_txn_errors_are_one_line_with_the_right_status(broker: BrokerProcess, topic_name: str) -> None:
    b = broker.bootstrap
    ok(b, "topics", "create", topic_name, "--partitions", "1")
    line = failed(kproto(b, "txns", "describe", "never-used-id"), 1, "error: TRANSACTIONAL_ID_NOT_FOUND: ")
    assert "never-used-id" in line
    failed(kproto(b, "producers", "describe", "no-such-topic", "0"), 1, "error: UNKNOWN_TOPIC_OR_PARTITION: ")
    failed(kproto(b, "producers", "describe", topic_name, "7"), 1, "error: UNKNOWN_TOPIC_OR_PARTITION: ")
    failed(kproto(b, "txns", "abort", "--topic", "no-such-topic", "--partition", "0", "--start-offset", "0"), 1,
           "error: UNKNOWN_TOPIC_OR_PARTITION: ")
    failed(kproto(b, "txns", "find-hanging", "--topic", "no-such-topic"), 1, "error: UNKNOWN_TOPIC_OR_PARTITION: ")
    failed(kproto(b, "txns", "abort", "--topic", topic_name, "--partition", "0"), 2, "error: usage: ")
    failed(kproto(b, "txns", "abort", "--topic", topic_name, "--partition", "0", "--producer-id", "1"), 2, "error: usage: ")
    failed(kproto(b, "txns", "abort", "--topic", topic_name, "--partition", "0", "--start-offset", "1", "--producer-id", "1",
                  "--producer-epoch", "0"), 2, "error: usage: ")
    failed(kproto(b, "txns", "list", "--state", "Bogus"), 2, "error: usage: ")
    failed(kproto(b, "txns", "describe"), 2, "error: usage: ")
    failed(kproto(b, "produce", topic_name, "--abort", stdin="x\n"), 2, "error: usage: ")
    failed(kproto(b, "produce", topic_name, "--transactional-id", "", stdin="x\n"), 2, "error: usage: ")
    # A bad line aborts the transaction it was part of. Stdin arrives in pipe-sized chunks, so
    # ~300 KB of good lines are written before the bad line is read: none of them becomes visible.
    tid = f"{topic_name}-bad"
    good = "".join(f"k{i}:{'v' * 90}\n" for i in range(3000))
    bad = kproto(b, "produce", topic_name, "--partition", "0", "--transactional-id", tid, "--key-sep", ":", stdin=good + "no separator\n")
    assert "line 3001" in failed(bad, 1, "error: INVALID_RECORD: ")
    (described,) = ok(b, "txns", "describe", tid)["transactions"]
    assert described["state"] == "CompleteAbort"
    assert consumed(b, topic_name, committed=True, idle="1") == []
    assert len(consumed(b, topic_name, committed=False, idle="1")) > 0


@pytest.mark.parametrize(
    "command",
    [
        ["txns"], ["txns", "list"], ["txns", "describe"], ["txns", "abort"], ["txns", "find-hanging"],
        ["producers"], ["producers", "describe"],
    ],
)
def test_txn_commands_have_help_with_an_example(command: list[str]) -> None:
    result = CliRunner().invoke(main, [*command, "--help"])
    assert result.exit_code == 0, result.output
    assert "Example:" in result.output and "kproto" in result.output
    assert "--exit-without-end-txn" not in CliRunner().invoke(main, ["produce", "--help"]).output


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_ctrl_c_or_sigterm_during_a_transactional_produce_aborts_it(
    broker: BrokerProcess, topic_name: str, signum: signal.Signals, status: int
) -> None:
    """Ctrl-C exits 130, SIGTERM 143 (128 + the signal, as a shell reports it); both abort the open
    transaction (#41: SIGTERM left it Ongoing until its timeout)."""
    b = broker.bootstrap
    tid = f"interrupted-{signum.name}"
    ok(b, "topics", "create", topic_name, "--partitions", "1")
    env = {k: v for k, v in os.environ.items() if not k.startswith("KPROTO_")}
    command = [sys.executable, "-m", "rivven_kproto", "--bootstrap", b, "produce", topic_name,
               "--transactional-id", tid, "--transaction-timeout-ms", LONG_TIMEOUT_MS]
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert process.stdin is not None
    process.stdin.write(b"one\ntwo\n")
    process.stdin.flush()  # stdin stays open: the producer waits for more lines inside the transaction
    for _ in range(300):
        state = _state(b, tid)
        if state == "Ongoing":
            break
        time.sleep(0.1)
    else:
        raise AssertionError("the transaction never became Ongoing")
    process.send_signal(signum)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == status, (process.returncode, stderr)
    assert b"Traceback" not in stderr and b"Fatal Python error" not in stderr, stderr
    assert stdout == b""
    assert _state(b, tid) in ("PrepareAbort", "CompleteAbort"), stderr
    assert consumed(b, topic_name, committed=True) == []


def _state(bootstrap: str, tid: str) -> str | None:
    result = kproto(bootstrap, "txns", "describe", tid)
    return json.loads(result.stdout)["transactions"][0]["state"] if result.returncode == 0 else None
