"""A killed broker stays in Metadata until its session expires, as Kafka lists it (#36, liveness).

Our brokers notice a killed one at once (its database lock ends with its session) and move its
partitions and coordinator shards away at once. Listing it no more at once as well made
librdkafka *decommission* it; when that broker was a transactional producer's cached group
coordinator, ``send_offsets_to_transaction`` then waited for a state change of a broker object
that no longer had a thread, past its own timeout (librdkafka#5511 with #5456), until some
other broker happened to connect or disconnect: the verify-eos cluster runs' "transform stage
hung" finding. Kafka lists a broker until its session times out (broker.session.timeout.ms), so
librdkafka keeps reconnecting to it, and the request finds the new coordinator.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from .test_cluster import bootstrap, create, described_by, three_brokers
from .test_cluster_shards import GROUP, TRANSACTION, coordinators
from .txn_helpers import TIMEOUT_S, wait_for

CALL_TIMEOUT_S = 10.0
HUNG_AFTER_S = CALL_TIMEOUT_S + 30.0  # a call still running then is hung (the client's own timeout is not kept)


def in_background(call: Callable[[], object]) -> Callable[[float], list[BaseException | None]]:
    """Run ``call`` on a thread of its own (a client call that may hang); the function returned
    waits for it up to the seconds given: [] while it still runs, [None] when it returned, [the
    exception] when it raised."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            call()
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 - reported by the caller
            outcome.append(exc)

    caller = threading.Thread(target=run, daemon=True)
    caller.start()

    def wait(seconds: float) -> list[BaseException | None]:
        caller.join(seconds)
        return outcome

    return wait


def _pick(brokers: dict, key_type: int, prefix: str, wanted: set[int]) -> tuple[str, int]:
    """An id with ``prefix`` whose coordinator is one of ``wanted``."""
    keys = [f"{prefix}-{i}" for i in range(64)]
    for key, node in coordinators(brokers[1], key_type, keys).items():
        if node in wanted:
            return key, node
    raise AssertionError(f"no {prefix} id coordinated by {wanted}")


def test_offsets_reach_a_group_coordinator_killed_and_restarted(tmp_path: Path, postgres_url: str) -> None:
    with three_brokers(tmp_path, postgres_url) as brokers:
        servers = bootstrap(brokers)
        create(servers, "kc-in", 1, 1)
        create(servers, "kc-out", 1, 1)
        group, doomed = _pick(brokers, GROUP, "kc-group", {2, 3})
        transactional_id, _ = _pick(brokers, TRANSACTION, "kc-txn", {1, 2, 3} - {doomed})
        doomed_port = brokers[doomed].port
        producer = Producer({"bootstrap.servers": servers, "transactional.id": transactional_id,
                             "topic.metadata.refresh.interval.ms": 1000})
        consumer = Consumer({"bootstrap.servers": servers, "group.id": group, "enable.auto.commit": False})
        consumer.assign([TopicPartition("kc-in", 0, 0)])
        producer.init_transactions(TIMEOUT_S)
        producer.begin_transaction()
        producer.produce("kc-out", b"one")
        producer.send_offsets_to_transaction([TopicPartition("kc-in", 0, 1)], consumer.consumer_group_metadata(),
                                             TIMEOUT_S)  # the producer now caches the group's coordinator
        producer.commit_transaction(TIMEOUT_S)

        brokers[doomed].kill()
        # The others stop naming it leader or coordinator at once, and still list it (its session lives on).
        assert wait_for(lambda: coordinators(brokers[1], GROUP, [group])[group] not in (None, doomed), TIMEOUT_S)
        assert doomed in {b.node_id for b in described_by(brokers[1]).brokers}
        end = time.monotonic() + 2.5  # the producer refreshes its metadata (every second) meanwhile
        while time.monotonic() < end:
            producer.poll(0.2)
        producer.begin_transaction()
        producer.produce("kc-out", b"two")
        sent = in_background(lambda: producer.send_offsets_to_transaction(
            [TopicPartition("kc-in", 0, 2)], consumer.consumer_group_metadata(), CALL_TIMEOUT_S))
        time.sleep(1.0)
        brokers[doomed].start(doomed_port)  # back on its address: its shard comes back to it
        outcome = sent(HUNG_AFTER_S)
        assert outcome, f"send_offsets_to_transaction still running {HUNG_AFTER_S:.0f} s after its {CALL_TIMEOUT_S:.0f} s timeout"
        assert outcome[0] is None, f"send_offsets_to_transaction failed: {outcome[0]}"
        producer.commit_transaction(TIMEOUT_S)
        consumer.close()
        committed = Consumer({"bootstrap.servers": servers, "group.id": group, "isolation.level": "read_committed"})

        def offset() -> int | None:
            try:  # NOT_COORDINATOR while the group's shard moves back to the restarted broker
                return committed.committed([TopicPartition("kc-in", 0)], TIMEOUT_S)[0].offset
            except KafkaException:
                return None

        try:
            assert wait_for(lambda: offset() == 2, TIMEOUT_S), f"committed offset {offset()}, not 2"
        finally:
            committed.close()

