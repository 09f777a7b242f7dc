"""Share-group metrics (KIP-932) scraped while confluent-kafka's ``ShareConsumer`` works: records
acquired, redelivered, acknowledged by type, archived and lock expiries per group must equal what
the consumers did (explicit accept/release/reject, then a lock left to expire)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import AcknowledgeType

from .broker_process import BrokerProcess
from .test_metrics import Scraper
from .test_share_groups import BROKER_ENV, TIMEOUT_S, consumer, fresh, poll_until, produce, values


@pytest.fixture(scope="module")
def metered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, Scraper]]:
    base: Path = tmp_path_factory.mktemp("share-metrics")
    config = base / "server.properties"
    config.write_text("kproto.metrics.max.age.ms=0\n")  # every scrape rendered afresh: exact values
    broker = BrokerProcess(base / "data", base / "broker.log", ["--metrics", "127.0.0.1:0", "--config", str(config)],
                           env=BROKER_ENV).start()
    try:
        yield broker, Scraper(broker)
    finally:
        if broker.alive():
            broker.stop()


def series(group: str, name: str, **labels: str) -> str:
    """A sample's key; counters are exposed with prometheus' ``_total`` suffix."""
    extra = "".join(f',{k}="{v}"' for k, v in labels.items())
    suffix = "" if name == "members" else "_total"
    return f'rivven_share_group_{name}{suffix}{{group="{group}"{extra}}}'


def test_share_group_counters_follow_what_the_consumers_did(metered: tuple[BrokerProcess, Scraper]) -> None:
    broker, scraper = metered
    topic, group = fresh("share-metrics"), fresh("g")
    produce(broker.bootstrap, topic, [b"r%d" % i for i in range(6)])
    holder = consumer(broker.bootstrap, group, topic, **{"share.acknowledgement.mode": "explicit"})
    other = None
    try:
        got = poll_until(holder, lambda got: len(got) >= 6)
        kinds = {b"r0": AcknowledgeType.ACCEPT, b"r1": AcknowledgeType.ACCEPT, b"r2": AcknowledgeType.RELEASE,
                 b"r3": AcknowledgeType.RELEASE, b"r4": AcknowledgeType.REJECT, b"r5": AcknowledgeType.REJECT}
        for message in got:
            holder.acknowledge(message, kinds[message.value()])
        holder.commit_sync(TIMEOUT_S)
        again = poll_until(holder, lambda got: len(got) >= 2)  # the released two, delivery count 2
        assert sorted(values(again)) == [b"r2", b"r3"]
        samples = scraper.wait_for(series(group, "records_redelivered"), 2)
        assert samples[series(group, "records_acquired")] == 8
        assert samples[series(group, "records_acknowledged", type="accept")] == 2
        assert samples[series(group, "records_acknowledged", type="release")] == 2
        assert samples[series(group, "records_acknowledged", type="reject")] == 2
        assert samples[series(group, "records_archived")] == 2
        assert samples[series(group, "lock_expiries")] == 0
        # The holder neither acknowledges nor polls again: the 1.5 s locks expire and another
        # member gets the two records a third time, and accepts them.
        other = consumer(broker.bootstrap, group, topic)
        third = poll_until(other, lambda got: len(got) >= 2)
        assert {m.delivery_count() for m in third} == {3}
        other.commit_sync(TIMEOUT_S)
        samples = scraper.wait_for(series(group, "records_acknowledged", type="accept"), 4)
        assert samples[series(group, "records_acknowledged", type="accept")] == 4
        assert samples[series(group, "lock_expiries")] == 2
        assert samples[series(group, "records_acquired")] == 10
        assert samples[series(group, "records_redelivered")] == 4
        assert samples[series(group, "records_archived")] == 2
        assert samples[series(group, "members")] == 2
    finally:
        if other is not None:
            other.close()
        holder.close()
