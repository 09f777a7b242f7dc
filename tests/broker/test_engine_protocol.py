"""Both storage engines are ``EngineLog``s, and the protocol names every primitive the partition's
rules need from an engine (#38): a new engine is written against the protocol alone."""

from __future__ import annotations

import uuid
from pathlib import Path

from rivven_kproto.broker.log.base import PartitionLogBase
from rivven_kproto.broker.log.engine import EngineLog
from rivven_kproto.broker.storage.postgres.partition import PgPartitionLog
from rivven_kproto.broker.storage.postgres.store import PostgresStorage

from .log_helpers import NOW, config, open_log


def test_every_primitive_an_engine_must_provide_is_in_the_protocol() -> None:
    assert PartitionLogBase.__abstractmethods__ <= set(vars(EngineLog))


def test_the_native_log_is_an_engine_log(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    assert isinstance(log, EngineLog)
    log.close()


def test_the_postgresql_log_is_an_engine_log(postgres_url: str) -> None:
    storage = PostgresStorage(postgres_url)
    try:
        log = PgPartitionLog.open(storage, uuid.uuid4(), "t", 0, config(), NOW, None, new=True)
        assert isinstance(log, EngineLog)
        log.close()
    finally:
        storage.close()
