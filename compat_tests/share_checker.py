"""Share consumers that accept what they get, and the checker of a share group's promises (KIP-932):
no record whose acceptance the broker confirmed is ever delivered again, and at the end every
record produced was accepted. Used by the cluster's share-group tests (a leader killed, random faults)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import AcknowledgeType, ShareConsumer

POLL_S = 0.5
COMMIT_TIMEOUT_S = 10


@dataclass
class Accepted:
    """What the consumers were told: records whose ACCEPT the broker confirmed (``confirmed``),
    and every delivery of a record confirmed accepted before (``violations``)."""

    confirmed: set[bytes] = field(default_factory=set)
    violations: list[bytes] = field(default_factory=list)
    deliveries: int = 0
    failed_commits: int = 0


def accept_round(share: ShareConsumer, accepted: Accepted) -> int:
    """One poll: accept each record, commit the acknowledgements, and count as confirmed the records of
    the partitions whose commit succeeded. The records delivered."""
    messages = [m for m in share.poll(POLL_S) if m.error() is None]
    if not messages:
        return 0
    for message in messages:
        accepted.deliveries += 1
        if message.value() in accepted.confirmed:
            accepted.violations.append(message.value())
        share.acknowledge(message, AcknowledgeType.ACCEPT)
    try:
        result = share.commit_sync(COMMIT_TIMEOUT_S) or {}
    except Exception:  # noqa: BLE001 - a commit to a dead leader: nothing of it is confirmed
        accepted.failed_commits += 1
        return len(messages)
    ok = {(tp.topic, tp.partition) for tp, error in _errors(result) if error is None}
    for message in messages:
        if (message.topic(), message.partition()) in ok:
            accepted.confirmed.add(message.value())
        else:
            accepted.failed_commits += 1
    return len(messages)


def _errors(result: Any) -> list[tuple[Any, Any]]:
    """commit_sync's answer as (TopicPartition, error) pairs (a dict, or a list of partitions)."""
    if isinstance(result, dict):
        return list(result.items())
    return [(tp, tp.error) for tp in result]


def accept_until(consumers: list[ShareConsumer], accepted: Accepted, done: Callable[[], bool], timeout_s: float,
                 between: Callable[[], None] = lambda: None) -> bool:
    """Round-robin accept rounds until ``done()`` (True) or ``timeout_s`` (False); ``between`` runs
    after each round (a fault schedule)."""
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() >= deadline:
            return False
        for share in consumers:
            accept_round(share, accepted)
        between()
    return True
