"""Share groups (KIP-932) on the PostgreSQL engine, one broker: the partition's leader keeps the
share state in the database (``broker/share/leaders.py``), so a kill -9 loses nothing acquired and
redelivers nothing accepted, as on the native log. The share-group offset APIs on this engine:
``test_cli_share_groups_postgres.py``."""

from __future__ import annotations

from pathlib import Path

from .broker_process import BrokerProcess
from .test_share_groups import BROKER_ENV, kill_9_round


def test_kill_9_on_postgresql_loses_nothing_acquired_and_redelivers_nothing_accepted(
        tmp_path: Path, postgres_url: str) -> None:
    kill_9_round(BrokerProcess(tmp_path / "data", tmp_path / "broker.log", ["--storage", postgres_url],
                               env=BROKER_ENV).start())

