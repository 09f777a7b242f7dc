"""The randomized transactional soak (compat_tests/txn_soak.py), short: every committed record
readable, none aborted visible, no client dying of an error Kafka would not cause, through broker
SIGKILLs, producer restarts (epoch bumps) and aborts of records that never left the client.

``TXN_SOAK_SEED`` replays a run; ``TXN_SOAK_TRANSACTIONS`` makes it longer.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from .broker_process import BrokerProcess
from .txn_soak import SoakPlan, check, run


@pytest.mark.slow
@pytest.mark.parametrize("round_", range(2))
def test_randomized_transactions_with_faults(tmp_path: Path, round_: int) -> None:
    seed = int(os.environ.get("TXN_SOAK_SEED", random.randrange(1 << 30)))
    plan = SoakPlan(
        transactions=int(os.environ.get("TXN_SOAK_TRANSACTIONS", "80")),
        seed=seed + round_,
        p_kill_broker_between=0.03,
        p_kill_broker_inside=0.03,
    )
    broker = BrokerProcess(tmp_path / "data", tmp_path / "broker.log").start()
    try:
        result = run(plan, broker, "soak")
        check(result, broker.bootstrap, "soak", plan.partitions)
    except AssertionError as exc:
        raise AssertionError(f"{exc} (replay with TXN_SOAK_SEED={plan.seed - round_})") from exc
    finally:
        broker.kill()
    assert result.transactions_committed > 0 and result.committed
    assert result.transactions_committed + result.transactions_aborted == plan.transactions
