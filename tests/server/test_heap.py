"""The broker freezes the heap start-up left, so full collections skip it (issue #37 item 5)."""

from __future__ import annotations

import gc
from pathlib import Path

import trio

from rivven_kproto.broker.config import BrokerConfig
from rivven_kproto.server.app import serve


async def test_serve_freezes_the_start_up_heap_and_unfreezes_it_when_stopped(tmp_path: Path) -> None:
    gc.unfreeze()
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            await nursery.start(serve, BrokerConfig(listen_port=0, data_dir=tmp_path / "data"))
            frozen = gc.get_freeze_count()
            nursery.cancel_scope.cancel()
    assert frozen > 0  # the code, the broker's tables: skipped by every collection while serving
    assert gc.get_freeze_count() == 0
