"""A transactional batch belongs to the transactional id whose producer id and epoch it carries (#37 item 1).

A client that learned another producer's id and epoch (DescribeProducers shows them) must not get
its batch into that producer's open transaction: with a null transactional id Kafka refuses
transactional records with TRANSACTIONAL_ID_AUTHORIZATION_FAILED (with or without an authorizer);
under its own transactional id the coordinator's verification refuses a producer id that is not
that id's (INVALID_PRODUCER_ID_MAPPING). The victim's records stay exactly its own. Checked on one
broker (the coordinator in the same process) and on a cluster whose partition leader coordinates
neither id (it asks the coordinator), the attacker sending through every broker.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.find_coordinator import FindCoordinatorRequest

from .broker_process import BrokerProcess
from .test_cluster import bootstrap, create, described_by, three_brokers
from .txn_helpers import TIMEOUT_S, Raw, consume, create_topics, values, wait_for


def attack_and_check(bootstrap_servers: str, topic: str, ids: tuple[str, str], coordinator_of: Callable[[str], Raw],
                     leader: Raw, attacker_via: Raw) -> None:
    """The victim's transactional requests go to its coordinator (``coordinator_of``), its
    batches to the partition's ``leader``; the attacker sends forged batches through
    ``attacker_via``; then the victim commits and reads back only its own records."""
    victim_id, attacker_id = ids
    victim = coordinator_of(victim_id)
    pid, epoch = victim.init_producer_id(victim_id, 60_000)
    coordinator_of(attacker_id).init_producer_id(attacker_id, 60_000)  # its own id, which it may write
    assert victim.add_partitions(victim_id, pid, epoch, {topic: [0]}) == {Errors.NONE}
    assert leader.produce(topic, 0, [b"victim-0"], pid=pid, epoch=epoch, seq=0, transactional=True,
                          transactional_id=victim_id)[0] == Errors.NONE

    forged = attacker_via.produce(topic, 0, [b"forged-null-id"], pid=pid, epoch=epoch, seq=1, transactional=True)
    assert forged[0] == Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, forged
    forged = attacker_via.produce(topic, 0, [b"forged-own-id"], pid=pid, epoch=epoch, seq=1, transactional=True,
                                  transactional_id=attacker_id)
    assert forged[0] == Errors.INVALID_PRODUCER_ID_MAPPING, forged

    assert leader.produce(topic, 0, [b"victim-1"], pid=pid, epoch=epoch, seq=1, transactional=True,
                          transactional_id=victim_id) == (Errors.NONE, 1)
    assert victim.end_txn(victim_id, pid, epoch, True) == Errors.NONE
    seen = consume("confluent-kafka", bootstrap_servers, [(topic, 0)], committed=True, expected=2)
    assert values(seen) == {(topic, 0): [b"victim-0", b"victim-1"]}


def test_a_forged_transactional_batch_never_joins_another_producers_transaction(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", tmp_path / "broker.log").start()
    try:
        create_topics(broker.bootstrap, {"binding": 1})
        raw = Raw(broker.bootstrap)
        attack_and_check(broker.bootstrap, "binding", ("victim", "attacker"), lambda _: raw, raw,
                         Raw(broker.bootstrap))
    finally:
        broker.kill()


def test_on_the_cluster_through_every_broker(tmp_path: Path, postgres_url: str) -> None:
    with three_brokers(tmp_path, postgres_url) as brokers:
        raw = {node: Raw(broker.bootstrap) for node, broker in brokers.items()}

        def coordinator(tid: str) -> int:
            (found,) = raw[1].call(FindCoordinatorRequest(key_type=1, coordinator_keys=[tid]), 4).coordinators
            assert found.error_code == Errors.NONE, found
            return int(found.node_id)

        for via in brokers:
            topic = f"binding-{via}"
            create(bootstrap(brokers), topic, 1, 1)
            assert wait_for(lambda topic=topic: described_by(brokers[1], [topic]).topics[0].partitions[0].leader_id in brokers,
                            TIMEOUT_S)
            leader = int(described_by(brokers[1], [topic]).topics[0].partitions[0].leader_id)
            # Transactional ids hash to coordinator shards: take ids another broker coordinates.
            ids = tuple(next(tid for tid in (f"{role}-{via}-{n}" for n in range(500)) if coordinator(tid) != leader)
                        for role in ("victim", "attacker"))
            attack_and_check(bootstrap(brokers), topic, ids, lambda tid: raw[coordinator(tid)], raw[leader], raw[via])
