"""A leader paused longer than the session timeout answers nothing for its old claims (issue 36, C).

Three brokers on one PostgreSQL database. The leader of a partition is stopped (SIGSTOP) until
the others have taken the partition over, and the partition grows there. Right after SIGCONT the
resumed broker still believes it leads the partition: before the fix it answered a Fetch beyond
its stale end with OFFSET_OUT_OF_RANGE (consumers with auto.offset.reset=earliest then rewound to
offset 0). A broker whose heartbeat may have expired must answer NOT_LEADER_OR_FOLLOWER until a
fresh heartbeat has confirmed what it leads; records it answers must be the real ones.

The same for a broker cut off from the database while it runs (a proxy between it and PostgreSQL
stalls; its sessions and their locks stay alive): once its heartbeat may have expired it answers
neither for its partitions nor for the coordinator shards it holds.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from confluent_kafka import Producer

from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.fetch import FetchPartition, FetchRequest, FetchResponse, FetchTopic
from rivven_kproto.codec.messages.find_coordinator import FindCoordinatorRequest
from rivven_kproto.codec.messages.heartbeat import HeartbeatRequest
from rivven_kproto.codec.records.batch import iter_headers
from rivven_kproto.codec.records.records import decode_batch

from . import raw_client
from .broker_process import BrokerProcess
from .stall_proxy import StallProxy
from .test_cluster import NODES, all_see, bootstrap, create, described_by, produce, three_brokers
from .txn_helpers import TIMEOUT_S, wait_for

log = logging.getLogger(__name__)

TOPIC = "paused-leader"
PARTITIONS = 3
BEFORE, AFTER = 200, 100  # records produced before the pause, and while the leader is paused
FETCH_AT = BEFORE + AFTER // 2  # beyond the paused broker's end, inside the real one
FETCH_VERSION = 11
TAKEOVER_S = 6 * TIMEOUT_S  # the session timeout (9 s) and two heartbeats, on a busy machine


def leader_of(broker: BrokerProcess, partition: int) -> int:
    return leaders(broker)[partition]


def leaders(broker: BrokerProcess) -> dict[int, int]:
    (topic,) = described_by(broker, [TOPIC]).topics
    return {p.partition_index: p.leader_id for p in topic.partitions}


def fetch_request(offset: int, partition: int = 0) -> FetchRequest:
    return FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                        topics=[FetchTopic(topic=TOPIC, partitions=[
                            FetchPartition(partition=partition, fetch_offset=offset, partition_max_bytes=1 << 20)])],
                        forgotten_topics_data=[])


def answer(response: FetchResponse) -> tuple[int, int, list[tuple[int, bytes | None]]]:
    """Partition 0's (error code, high watermark, (offset, value) of each record)."""
    (part,) = response.responses[0].partitions
    data = part.record_bytes()
    records = [(h.base_offset + r.offset_delta, r.value) for pos, h in iter_headers(data)
               for r in decode_batch(data[pos:pos + h.size]).records]
    return part.error_code, part.high_watermark, records


def fetch_from(broker: BrokerProcess, offset: int, partition: int = 0) -> tuple[int, int, list[tuple[int, bytes | None]]]:
    with raw_client.connect(broker.bootstrap, timeout=TIMEOUT_S) as sock:
        return answer(raw_client.call(sock, fetch_request(offset, partition), FETCH_VERSION))


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
            first_reply = answer(raw_client.receive(sock, FetchRequest.API_KEY, FETCH_VERSION))
        log.info("first answer after SIGCONT: error %s, %d records", Errors(first_reply[0]).name, len(first_reply[2]))
        check(first_reply, real)
        # Every later answer too, until the resumed broker serves the real records (it leads the
        # partition again, or forwards to its leader).
        replies: list[tuple[int, int, list[tuple[int, bytes | None]]]] = []

        def served() -> bool:
            replies.append(fetch_from(paused, FETCH_AT))
            check(replies[-1], real)
            return replies[-1][0] == Errors.NONE and bool(replies[-1][2])

        assert wait_for(served, TAKEOVER_S, interval=0.2), f"never served the real records: {replies[-3:]}"
        log.info("then %d answers until the real records: %s", len(replies),
                 [Errors(error).name for error, _, _ in replies])



def produce_to(servers: str, partition: int, count: int, prefix: str) -> dict[int, bytes]:
    """Idempotent acks=all produce to one partition; the values acknowledged, by offset."""
    producer = Producer({"bootstrap.servers": servers, "enable.idempotence": True, "linger.ms": 5,
                         "message.timeout.ms": TIMEOUT_S * 4 * 1000})
    acknowledged: dict[int, bytes] = {}
    errors: list[str] = []

    def on_delivery(err, msg) -> None:  # noqa: ANN001 - librdkafka callback
        if err is None:
            acknowledged[msg.offset()] = msg.value()
        else:
            errors.append(str(err))

    for i in range(count):
        producer.produce(TOPIC, f"{prefix}-{i}".encode(), partition=partition, on_delivery=on_delivery)
    assert producer.flush(TIMEOUT_S * 4) == 0
    assert errors == []
    return acknowledged


def coordinator_answers(broker: BrokerProcess, group: str) -> tuple[int, int]:
    """(FindCoordinator's error, Heartbeat's error) for ``group``, as this broker answers them."""
    with raw_client.connect(broker.bootstrap, timeout=TIMEOUT_S) as sock:
        found = raw_client.call(sock, FindCoordinatorRequest(key_type=0, coordinator_keys=[group]), 4)
        beat = raw_client.call(sock, HeartbeatRequest(group_id=group, generation_id=1, member_id="m"), 3)
    return found.coordinators[0].error_code, beat.error_code


def via_proxy(url: str, port: int) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=f"{parts.username}@127.0.0.1:{port}"))


CUT_OFF = 3  # the broker cut off from the database (not the controller: node 1 holds the lease)
CUT_PARTITIONS = 24  # some of them led by the cut-off broker, whatever the topic id


def test_a_broker_cut_off_from_the_database_answers_for_nothing_it_claimed(tmp_path: Path, postgres_url: str) -> None:
    database = urlsplit(postgres_url)
    assert database.hostname is not None and database.port is not None
    with StallProxy((database.hostname, database.port)) as proxy, \
            three_brokers(tmp_path, postgres_url, storage_for={CUT_OFF: via_proxy(postgres_url, proxy.port)}) as brokers:
        create(bootstrap(brokers), TOPIC, CUT_PARTITIONS, 1)
        assert wait_for(lambda: all_see(brokers, set(NODES), TOPIC), TIMEOUT_S)
        partition = min(p for p, leader in leaders(brokers[1]).items() if leader == CUT_OFF)
        # A group whose coordinator shard the cut-off broker holds (the shards have settled).
        group = next(g for g in (f"cut-group-{n}" for n in range(10_000))
                     if described_shard_owner(brokers[1], g) == CUT_OFF)
        assert coordinator_answers(brokers[CUT_OFF], group) == (Errors.NONE, Errors.UNKNOWN_MEMBER_ID)
        cut_off = brokers[CUT_OFF]
        others = {node: b for node, b in brokers.items() if node != CUT_OFF}
        real = produce_to(bootstrap(brokers), partition, BEFORE, "before")
        assert sorted(real) == list(range(BEFORE))

        proxy.stall()
        try:
            assert wait_for(lambda: all(leader_of(b, partition) != CUT_OFF for b in others.values()), TAKEOVER_S), \
                "the live brokers never took the cut-off broker's partition over"
            more = produce_to(",".join(b.bootstrap for b in others.values()), partition, AFTER, "after")
            assert sorted(more) == list(range(BEFORE, BEFORE + AFTER))
            real.update(more)
            # Its heartbeat has been failing for longer than the session timeout by now.
            reply = fetch_from(cut_off, FETCH_AT, partition)
            coordination = coordinator_answers(cut_off, group)
            log.info("cut off: Fetch %s, FindCoordinator %s, Heartbeat %s", Errors(reply[0]).name,
                     Errors(coordination[0]).name, Errors(coordination[1]).name)
            assert (reply[0], coordination) == (
                Errors.NOT_LEADER_OR_FOLLOWER, (Errors.COORDINATOR_NOT_AVAILABLE, Errors.NOT_COORDINATOR)), \
                "the cut-off broker answered for what it may have lost"
        finally:
            proxy.resume()

        def served() -> bool:
            reply = fetch_from(cut_off, FETCH_AT, partition)
            check(reply, real)
            return reply[0] == Errors.NONE and bool(reply[2])

        # Back: it confirms its view, lets go of (or reads again) what moved, and serves again.
        assert wait_for(served, TAKEOVER_S, interval=0.2), "never served the real records again"
        assert wait_for(lambda: coordinator_answers(cut_off, group)[1] != Errors.NOT_COORDINATOR, TAKEOVER_S)


def described_shard_owner(broker: BrokerProcess, group: str) -> int | None:
    """The node FindCoordinator names for ``group`` (its shard's holder), as this broker answers."""
    with raw_client.connect(broker.bootstrap, timeout=TIMEOUT_S) as sock:
        found = raw_client.call(sock, FindCoordinatorRequest(key_type=0, coordinator_keys=[group]), 4)
    return found.coordinators[0].node_id if found.coordinators[0].error_code == Errors.NONE else None
