"""The ``kproto share-groups`` tests (``test_cli_share_groups.py``: describe, reset-offsets,
delete-offsets, delete, with confluent-kafka's ``ShareConsumer`` as the witness) against one
broker on the PostgreSQL engine, where the partition's leader keeps the share state in the
database and the group's coordinator reads and changes it there (``server/share_offsets.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rivven_kproto.testing.postgres import create_database

from .broker_process import BrokerProcess
from .test_cli_share_groups import (
    test_delete,
    test_delete_offsets_forgets_a_topic_which_is_then_delivered_again,
    test_list_describe_and_reset_offsets,
    test_reset_offsets_of_a_group_with_members_is_refused,
)
from .test_share_groups import BROKER_ENV

__all__ = [
    "broker",
    "test_delete",
    "test_delete_offsets_forgets_a_topic_which_is_then_delivered_again",
    "test_list_describe_and_reset_offsets",
    "test_reset_offsets_of_a_group_with_members_is_refused",
]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, postgres_server: Any) -> Iterator[BrokerProcess]:
    base: Path = tmp_path_factory.mktemp("share-cli-pg")
    process = BrokerProcess(base / "data", base / "broker.log", ["--storage", create_database(postgres_server)],
                            env=BROKER_ENV).start()
    yield process
    if process.alive():
        assert process.stop() == 0, process.log_text()[-4000:]
