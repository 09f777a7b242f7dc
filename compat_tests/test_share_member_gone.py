"""A share consumer that goes without acknowledging its records (killed, or closed without
acknowledging): its acquired records are released at once, as Kafka's leaders release a departed
member's acquisitions when its share session's connection goes, and another member gets them long
before their acquisition lock (here 120 s) would have expired, or the group's coordinator would
have expired the member (45 s). On the native log and on the
PostgreSQL engine, where the partitions' leaders keep the share state (``broker/share/leaders.py``).
"""

from __future__ import annotations

import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .broker_process import BrokerProcess
from .test_share_groups import BROKER_ENV, consumer, fresh, poll_until, produce, values

LOCK_MS = 120_000
# Sooner than the lock (LOCK_MS) and than the member's session timeout (45 s), which would free
# them on the native log: only a release when the member's connection goes gets them here in time.
WELL_BEFORE_S = 20
ENV = {**BROKER_ENV, "KPROTO_GROUP_SHARE_RECORD_LOCK_DURATION_MS": str(LOCK_MS)}
RECORDS = [b"m%d" % i for i in range(8)]

# A share consumer in its own process: prints what it was delivered, then waits to be killed.
HOLDER = """
import sys, time
from confluent_kafka import ShareConsumer
share = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                       "share.acknowledgement.mode": "explicit"})
share.subscribe([sys.argv[3]])
deadline = time.monotonic() + 60
got = []
while not got and time.monotonic() < deadline:
    got = [m for m in share.poll(0.5) if not m.error()]
print(len(got), flush=True)
time.sleep(600)
"""


@pytest.fixture(params=["native", "postgresql"])
def broker(request: pytest.FixtureRequest, tmp_path: Path) -> BrokerProcess:
    args = ["--storage", request.getfixturevalue("postgres_url")] if request.param == "postgresql" else []
    process = BrokerProcess(tmp_path / "data", tmp_path / "broker.log", args, env=ENV).start()
    request.addfinalizer(process.kill)
    return process


def held_by_a_killed_consumer(broker: BrokerProcess, group: str, topic: str) -> None:
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, broker.bootstrap, group, topic],
                              stdout=subprocess.PIPE, text=True)
    try:
        ready, _, _ = select.select([holder.stdout], [], [], 90)
        assert ready and holder.stdout is not None, "the holding consumer never reported"
        assert int(holder.stdout.readline()) > 0
    finally:
        holder.kill()
        holder.wait(30)


def test_a_killed_members_records_go_to_another_member_at_once(broker: BrokerProcess) -> None:
    topic, group = fresh("gone-kill"), fresh("g")
    produce(broker.bootstrap, topic, RECORDS)
    held_by_a_killed_consumer(broker, group, topic)
    started = time.monotonic()
    other = consumer(broker.bootstrap, group, topic)
    try:
        got = poll_until(other, lambda got: set(values(got)) >= set(RECORDS), WELL_BEFORE_S)
    finally:
        other.close()
    assert sorted(set(values(got))) == sorted(RECORDS), f"after {time.monotonic() - started:.1f} s"


def test_a_closed_members_unacknowledged_records_go_to_another_member_at_once(broker: BrokerProcess) -> None:
    topic, group = fresh("gone-close"), fresh("g")
    produce(broker.bootstrap, topic, RECORDS)
    first = consumer(broker.bootstrap, group, topic, **{"share.acknowledgement.mode": "explicit"})
    try:
        assert poll_until(first, lambda got: len(got) > 0)
    finally:
        first.close()  # nothing acknowledged
    other = consumer(broker.bootstrap, group, topic)
    try:
        got = poll_until(other, lambda got: set(values(got)) >= set(RECORDS), WELL_BEFORE_S)
    finally:
        other.close()
    assert sorted(set(values(got))) == sorted(RECORDS)
