"""A flush round's items (#38): both engines' items carry what the flusher reads (``FlushItem``),
and an engine refuses the other's items instead of half-syncing them."""

from __future__ import annotations

from pathlib import Path

import pytest

from rivven_kproto.broker.durable.flush import FlushItem, PendingFlush
from rivven_kproto.broker.storage.native import NativeStorage
from rivven_kproto.broker.storage.postgres.commit import PgCommit, pg_items


def _read_by_the_flusher(item: FlushItem) -> tuple[str, bool, float, bool]:
    item.release()
    return item.kind, item.synced, item.seconds, item.fenced


def test_both_engines_items_are_flush_items() -> None:
    assert _read_by_the_flusher(PendingFlush()) == ("segment", False, 0.0, False)
    assert _read_by_the_flusher(PgCommit(lambda conn: None, kind="txn/3")) == ("txn/3", False, 0.0, False)


def test_an_engine_refuses_the_other_engines_items(tmp_path: Path) -> None:
    storage = NativeStorage(tmp_path)
    with pytest.raises(TypeError, match="PgCommit"):
        storage.sync([PgCommit(lambda conn: None)])
    with pytest.raises(TypeError, match="PendingFlush"):
        pg_items([PendingFlush()])
