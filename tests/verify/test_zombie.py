"""The zombie producer's own process (#41): a client library dying there is reported as the
client's crash, with its signal, and the checker carries on without counting it as an anomaly."""

from __future__ import annotations

import os
import resource
import signal
import sys
import threading
from pathlib import Path

import pytest

from rivven_kproto.verify.checker import check, passed
from rivven_kproto.verify.history import ZOMBIE, History, Transaction
from rivven_kproto.verify.report import summary, table
from rivven_kproto.verify.workload import _record_zombie
from rivven_kproto.verify.zombie import ZombieProcess, readable

ENTRY = str(Path(__file__).with_name("zombie_entries.py"))


def zombie(mode: str) -> ZombieProcess:
    return ZombieProcess({"test": True}, command=[sys.executable, ENTRY, mode])


def test_a_child_dying_of_sigabrt_at_the_attempt_is_reported_with_its_signal() -> None:
    child = zombie("abort-at-attempt")
    ready = child.wait_ready(60)
    assert ready.result == "ready" and ready.acks == {"v/0": ("t", 0, 7)}
    outcome = child.attempt("t", 1, "v/1", timeout_s=60)
    assert outcome.result == "crashed" and outcome.signal == signal.SIGABRT
    assert "SIGABRT" in outcome.crash and "double free or corruption (attempt v/1)" in outcome.crash


def test_a_child_dying_before_it_is_ready_is_reported_too() -> None:
    child = zombie("abort-at-start")
    ready = child.wait_ready(60)
    assert ready.result == "crashed" and ready.signal == signal.SIGABRT
    assert child.stop() is ready  # reaped once


def test_a_crash_after_the_refusal_keeps_both_facts() -> None:
    zombie_outcome = zombie("fenced-then-abort")
    assert zombie_outcome.wait_ready(60).result == "ready"
    outcome = zombie_outcome.attempt("t", 1, "v/1", timeout_s=60)
    assert (outcome.result, outcome.error, outcome.signal) == ("failed", "PRODUCER_FENCED", signal.SIGABRT)


def test_the_history_records_a_client_crash_not_an_anomaly() -> None:
    history = History(seed=7, bootstrap="b")
    txn = Transaction("0/1/3/zombie", 0, 2, values=[("t", 0, "0/1/3/zombie/0")], outcome=ZOMBIE)
    history.transactions[txn.key] = txn
    child = zombie("abort-at-attempt")
    child.wait_ready(60)
    _record_zombie(txn, child.attempt("t", 0, "0/1/3/zombie/1", timeout_s=60), "zombie commit", history, threading.Lock())
    assert [(e.call, e.error, e.expected) for e in history.errors] == [("zombie commit", "CLIENT_CRASH", True)]
    assert len(history.client_crashes) == 1 and "SIGABRT" in history.client_crashes[0]
    findings = check(history)
    assert passed(findings)
    doc = summary(history, findings, 1.0)
    assert doc["client_crashes"] == history.client_crashes
    assert "client crash (the client library's, not an anomaly): producer 0/2" in table(doc)


def test_a_descriptor_numbered_past_1024_can_be_waited_on() -> None:
    """The checker holds many client sockets: select.select refused the zombie's pipe (seed 13)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 2048:
        pytest.skip("the descriptor limit is below 2048")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 2048), hard))
    read_end, write_end = os.pipe()
    high = os.dup2(read_end, 1500)
    try:
        assert not readable(high, 0.01)
        os.write(write_end, b"x")
        assert readable(high, 1.0)
    finally:
        for fd in (read_end, write_end, high):
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
