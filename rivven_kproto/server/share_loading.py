"""A partition's share state read ahead, on a worker thread, before the request that first needs
it on this leader (PostgreSQL; ``broker/share/leaders.py``).

When a partition moves to this broker (its leader killed, or its claims lapsed), the first
ShareFetch or ShareAcknowledge for it here would replay the partition's share-state log from the
database on the event loop, stalling every connection for the time of that read. Its ``prepare``
reads those logs first on a worker thread (``PgDurableLog.preload``); the handler then replays
them from memory. A partition read by nobody ahead (a timer, a race) is still read when first
used, as before.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

import trio

from .context import RequestContext

Key = tuple[str, int]


async def read_ahead(ctx: RequestContext, keys: Iterable[Key], limiter: Any) -> None:
    shares = ctx.broker.leader_shares
    if shares is None:
        return
    wanted = shares.to_load(keys)
    if not wanted:
        return

    def read() -> None:
        for _, _, durable_log in wanted:
            durable_log.preload()

    await trio.to_thread.run_sync(read, limiter=limiter)
    for key, partition, durable_log in wanted:
        shares.read_ahead(key, partition, durable_log)


def requested(ctx: RequestContext, topics: Iterable[Any]) -> list[Key]:
    """The (topic, partition) keys of a share request's topics (by topic id)."""
    names: dict[uuid.UUID, str] = {t.meta.topic_id: name for name, t in ctx.broker.topics.items()}
    return [(names[t.topic_id], p.partition_index) for t in topics if t.topic_id in names for p in t.partitions]
