"""A seeded randomized fault test of share groups (KIP-932) on the three-broker PostgreSQL cluster.

A producer writes while two share consumers accept; a schedule drawn from the seed kills a
random broker with SIGKILL (restarted a little later) or pauses one with SIGSTOP (shorter than
the store's session timeout, so it keeps its partitions) at random points. The checker
(``share_checker.py``): no record whose acceptance the broker confirmed is delivered again, and at
the end every record produced is accepted. Short for CI (two faults); a longer run:
``KPROTO_SHARE_FAULT_SEED=7 KPROTO_SHARE_FAULTS=10 pytest compat_tests/test_cluster_share_faults.py``.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import time
import uuid
from pathlib import Path

from .share_checker import Accepted, accept_until
from .test_cluster import NODES, all_see, bootstrap, create, produce, three_brokers
from .test_cluster_share_groups import PARTITIONS, share_consumers
from .test_share_groups import BROKER_ENV as SHARE_ENV
from .txn_helpers import TIMEOUT_S, wait_for

log = logging.getLogger(__name__)

SEED = int(os.environ.get("KPROTO_SHARE_FAULT_SEED", "1"))
FAULTS = min(int(os.environ.get("KPROTO_SHARE_FAULTS", "2")), 50)
ROUND = 60  # records produced before each fault
PAUSE_S = 1.0  # well below the store's session timeout: the paused broker keeps its claims


def test_random_kills_and_pauses_keep_every_share_promise(tmp_path: Path, postgres_url: str) -> None:
    rng = random.Random(SEED)
    env = {node: SHARE_ENV for node in NODES}
    with three_brokers(tmp_path, postgres_url, env=env) as cluster:
        servers = bootstrap(cluster)
        topic, group = f"shf-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
        create(servers, topic, PARTITIONS, 1)
        assert wait_for(lambda: all_see(cluster, set(NODES), topic), TIMEOUT_S)
        consumers = share_consumers(servers, group, topic, 2)
        accepted = Accepted()
        produced: set[bytes] = set()
        try:
            for fault in range(FAULTS):
                produced |= produce(bootstrap(cluster), topic, PARTITIONS, ROUND, f"f{fault}-")
                target = len(accepted.confirmed) + rng.randrange(ROUND // 4, ROUND)
                assert accept_until(consumers, accepted, lambda t=target: len(accepted.confirmed) >= t, 4 * TIMEOUT_S)
                node = rng.choice(NODES)
                if rng.random() < 0.5:
                    log.info("fault %d (seed %d): kill -9 node %d", fault, SEED, node)
                    cluster[node].kill()
                    assert wait_for(lambda n=node: all_see(cluster, set(NODES) - {n}), 2 * TIMEOUT_S)
                    accept_until(consumers, accepted, lambda: False, rng.uniform(0.5, 2.0))
                    cluster[node].start()
                    assert wait_for(lambda: all_see(cluster, set(NODES)), 2 * TIMEOUT_S)
                else:
                    log.info("fault %d (seed %d): pause node %d", fault, SEED, node)
                    process = cluster[node].process
                    assert process is not None
                    os.kill(process.pid, signal.SIGSTOP)
                    try:
                        time.sleep(PAUSE_S)  # the fault's length, not a wait for something to happen
                    finally:
                        os.kill(process.pid, signal.SIGCONT)
            produced |= produce(bootstrap(cluster), topic, PARTITIONS, ROUND, "last-")
            finished = accept_until(consumers, accepted, lambda: accepted.confirmed >= produced, 6 * TIMEOUT_S)
        finally:
            for share in consumers:
                share.close()
        assert not accepted.violations, f"seed {SEED}: confirmed accepted, delivered again: {sorted(set(accepted.violations))[:20]}"
        assert finished, f"seed {SEED}: never accepted: {sorted(produced - accepted.confirmed)[:20]}"
