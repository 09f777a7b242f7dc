"""Share groups (KIP-932) on the PostgreSQL engine, one broker: the partition's leader keeps the
share state in the database (``broker/share/leaders.py``), so a kill -9 loses nothing acquired and
redelivers nothing accepted, as on the native log. The share-group offset APIs are not served on
this engine yet: they say so rather than answer from state the coordinator does not have."""

from __future__ import annotations

from pathlib import Path

from rivven_kproto.codec.errors import Errors

from .broker_process import BrokerProcess
from .test_share_group_admin import describe_offsets
from .test_share_groups import BROKER_ENV, kill_9_round


def test_kill_9_on_postgresql_loses_nothing_acquired_and_redelivers_nothing_accepted(
        tmp_path: Path, postgres_url: str) -> None:
    kill_9_round(BrokerProcess(tmp_path / "data", tmp_path / "broker.log", ["--storage", postgres_url],
                               env=BROKER_ENV).start())


def test_share_group_offsets_are_refused_on_postgresql(tmp_path: Path, postgres_url: str) -> None:
    process = BrokerProcess(tmp_path / "data", tmp_path / "broker.log", ["--storage", postgres_url],
                            env=BROKER_ENV).start()
    try:
        described = describe_offsets(process, "g")
        assert described.error_code == Errors.UNSUPPORTED_VERSION, described
        assert "PostgreSQL" in (described.error_message or "")
    finally:
        process.kill()
