"""The share-group metrics test (``test_share_metrics.py``) on the PostgreSQL engine, where the
partitions' leaders keep the share-partitions and count their acquisitions, acknowledgements,
archives and lock expiries (``LeaderShares.stats``), beside the members the group's coordinator
counts: one broker exports both, merged per group."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rivven_kproto.testing.postgres import create_database

from .broker_process import BrokerProcess
from .test_metrics import Scraper
from .test_share_groups import BROKER_ENV
from .test_share_metrics import test_share_group_counters_follow_what_the_consumers_did

__all__ = ["metered", "test_share_group_counters_follow_what_the_consumers_did"]


@pytest.fixture(scope="module")
def metered(tmp_path_factory: pytest.TempPathFactory, postgres_server: Any) -> Iterator[tuple[BrokerProcess, Scraper]]:
    base: Path = tmp_path_factory.mktemp("share-metrics-pg")
    config = base / "server.properties"
    config.write_text("kproto.metrics.max.age.ms=0\n")  # every scrape rendered afresh: exact values
    broker = BrokerProcess(base / "data", base / "broker.log",
                           ["--metrics", "127.0.0.1:0", "--config", str(config),
                            "--storage", create_database(postgres_server)], env=BROKER_ENV).start()
    try:
        yield broker, Scraper(broker)
    finally:
        if broker.alive():
            broker.stop()
