"""A leader paused longer than the session timeout answers nothing for its old claims (issue 36, C).

Three brokers on one PostgreSQL database. The leader of a partition is stopped (SIGSTOP) until
the others have taken the partition over, and the partition grows there. Right after SIGCONT the
resumed broker still believes it leads the partition: before the fix it answered a Fetch beyond
its stale end with OFFSET_OUT_OF_RANGE (consumers with auto.offset.reset=earliest then rewound to
offset 0). A broker whose heartbeat may have expired must answer NOT_LEADER_OR_FOLLOWER until a
fresh heartbeat has confirmed what it leads; records it answers must be the real ones.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.fetch import FetchPartition, FetchRequest, FetchResponse, FetchTopic
from rivven_kproto.codec.records.batch import iter_headers
from rivven_kproto.codec.records.records import decode_batch

from . import raw_client
from .broker_process import BrokerProcess
from .test_cluster import NODES, all_see, bootstrap, create, described_by, produce, three_brokers
from .txn_helpers import TIMEOUT_S, wait_for

TOPIC = "paused-leader"
PARTITIONS = 3
BEFORE, AFTER = 200, 100  # records produced before the pause, and while the leader is paused
FETCH_AT = BEFORE + AFTER // 2  # beyond the paused broker's end, inside the real one
FETCH_VERSION = 11
TAKEOVER_S = 6 * TIMEOUT_S  # the session timeout (9 s) and two heartbeats, on a busy machine


def leader_of(broker: BrokerProcess, partition: int) -> int:
    (topic,) = described_by(broker, [TOPIC]).topics
    return next(p.leader_id for p in topic.partitions if p.partition_index == partition)


def fetch_request(offset: int) -> FetchRequest:
    return FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                        topics=[FetchTopic(topic=TOPIC, partitions=[
                            FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)])],
                        forgotten_topics_data=[])


def answer(response: FetchResponse) -> tuple[int, int, list[tuple[int, bytes | None]]]:
    """Partition 0's (error code, high watermark, (offset, value) of each record)."""
    (part,) = response.responses[0].partitions
    data = part.record_bytes()
    records = [(h.base_offset + r.offset_delta, r.value) for pos, h in iter_headers(data)
               for r in decode_batch(data[pos:pos + h.size]).records]
    return part.error_code, part.high_watermark, records


def fetch_from(broker: BrokerProcess, offset: int) -> tuple[int, int, list[tuple[int, bytes | None]]]:
    with raw_client.connect(broker.bootstrap, timeout=TIMEOUT_S) as sock:
        return answer(raw_client.call(sock, fetch_request(offset), FETCH_VERSION))


def check(reply: tuple[int, int, list[tuple[int, bytes | None]]], real: dict[int, bytes]) -> None:
    error, high_watermark, records = reply
    assert error != Errors.OFFSET_OUT_OF_RANGE, (
        f"the resumed broker answered OFFSET_OUT_OF_RANGE at {FETCH_AT} (high watermark {high_watermark}): "
        "consumers would reset")
    assert error in (Errors.NONE, Errors.NOT_LEADER_OR_FOLLOWER), Errors(error)
    assert records == [] or error == Errors.NONE
    for offset, value in records:
        assert real.get(offset) == value, f"offset {offset}: {value!r} is not the record written there"


def test_a_resumed_leader_does_not_answer_from_its_stale_log(tmp_path: Path, postgres_url: str) -> None:
    with three_brokers(tmp_path, postgres_url) as brokers:
        create(bootstrap(brokers), TOPIC, PARTITIONS, 1)
        assert wait_for(lambda: all_see(brokers, set(NODES), TOPIC), TIMEOUT_S)
        paused_id = leader_of(brokers[1], 0)
        paused = brokers[paused_id]
        others = {node: b for node, b in brokers.items() if node != paused_id}
        first = produce(bootstrap(brokers), TOPIC, 1, BEFORE, "before-")  # partition 0 only
        assert len(first) == BEFORE
        assert fetch_from(paused, 0)[1] == BEFORE

        assert paused.process is not None
        os.kill(paused.process.pid, signal.SIGSTOP)
        stopped = time.monotonic()
        try:
            # The others see its heartbeat go stale, and one of them takes partition 0 over.
            assert wait_for(lambda: all(leader_of(b, 0) != paused_id for b in others.values()), TAKEOVER_S), \
                "the live brokers never took the paused broker's partition over"
            second = produce(",".join(b.bootstrap for b in others.values()), TOPIC, 1, AFTER, "after-")
            assert len(second) == AFTER
            assert time.monotonic() - stopped > 9.0  # longer than the session timeout, by construction
            # The Fetch waits in the socket for the broker to wake: the first thing it may answer.
            sock = raw_client.connect(paused.bootstrap, timeout=TIMEOUT_S)
            raw_client.send(sock, fetch_request(FETCH_AT), FETCH_VERSION)
        finally:
            os.kill(paused.process.pid, signal.SIGCONT)
        # The real records of partition 0, by offset (dense: one idempotent producer each time).
        real = {i: f"before-{TOPIC}-{i}".encode() for i in range(BEFORE)}
        real.update({BEFORE + i: f"after-{TOPIC}-{i}".encode() for i in range(AFTER)})
        with sock:
            check(answer(raw_client.receive(sock, FetchRequest.API_KEY, FETCH_VERSION)), real)
        # Every later answer too, until the resumed broker serves the real records (it leads the
        # partition again, or forwards to its leader).
        replies: list[tuple[int, int, list[tuple[int, bytes | None]]]] = []

        def served() -> bool:
            replies.append(fetch_from(paused, FETCH_AT))
            check(replies[-1], real)
            return replies[-1][0] == Errors.NONE and bool(replies[-1][2])

        assert wait_for(served, TAKEOVER_S, interval=0.2), f"never served the real records: {replies[-3:]}"

