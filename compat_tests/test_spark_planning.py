"""Planning a Spark read against a real broker, without Spark: a missing subscribed topic is named."""

from __future__ import annotations

import logging

import pytest

from rivven_kproto.spark.options import parse
from rivven_kproto.spark.planning import discover
from rivven_kproto.spark.wire import Cluster

from .broker_process import BrokerProcess
from .txn_helpers import create_topics


def test_subscribing_to_a_missing_topic_logs_a_warning(broker: BrokerProcess, caplog: pytest.LogCaptureFixture) -> None:
    create_topics(broker.bootstrap, {"planned": 2})
    options = parse({"kafka.bootstrap.servers": broker.bootstrap, "subscribe": "planned,never-created"}, streaming=False)
    with caplog.at_level(logging.WARNING, logger="rivven_kproto.spark.planning"), Cluster(broker.bootstrap) as cluster:
        assert discover(cluster, options) == [("planned", 0), ("planned", 1)]
    # Only this logger's records: a client left open by an earlier test may log from its own thread.
    warned = [r.getMessage() for r in caplog.records if r.name == "rivven_kproto.spark.planning"]
    assert warned == ["subscribed topic(s) never-created do not exist: no rows from them"]
