"""The exactly-once checks over a :class:`History`: pure, so each can be tested on a made-up history.

Every check returns the anomalies it found, counted, with a few concrete examples (values,
offsets). A run passes when every count is zero.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .history import ABORTED, COMMITTED, UNKNOWN, ZOMBIE, History, Read, Transaction, transaction_of
from .transform import PREFIX

EXAMPLES = 5
STALL_BOUND_S = 120.0  # liveness: generous, so a loaded CI machine does not fail it

CHECKS = (
    ("lost_write", "a record of a committed transaction is missing from the read_committed log"),
    ("aborted_read", "a read_committed consumer saw a record of an aborted transaction"),
    ("early_read", "a read_committed consumer saw a record before its transaction's commit began (past the LSO)"),
    ("torn_transaction", "only part of a transaction is visible to read_committed"),
    ("duplicate", "a record is in the log at more than one offset"),
    ("wrong_ack", "the offset a producer was acknowledged holds a different record"),
    ("order", "one producer's records are out of their send order within a partition"),
    ("non_monotonic", "a consumer's successive records of a partition went back or repeated"),
    ("position_jump", "a consumer read below its group's acknowledged committed offset (e.g. a reset to 0)"),
    ("lost_idempotent", "a record the idempotent producer was acknowledged for is not in the log"),
    ("phantom", "a record nobody wrote"),
    ("zombie_write", "a fenced producer's transaction committed or became visible"),
    ("transform", "the consume-transform-produce stage lost, repeated or invented an output"),
    ("unexpected_error", "a client failed with an error Kafka would not give it here"),
    ("liveness", "a transaction (workload or transform stage) waited longer than the bound for its commit or abort"),
)


@dataclass
class Finding:
    count: int = 0
    examples: list[str] = field(default_factory=list)

    def add(self, example: str) -> None:
        self.count += 1
        if len(self.examples) < EXAMPLES:
            self.examples.append(example)


def check(history: History, stall_bound_s: float = STALL_BOUND_S) -> dict[str, Finding]:
    findings = {name: Finding() for name, _ in CHECKS}
    txns = history.transactions
    visible: dict[str, list[Read]] = defaultdict(list)
    for read in history.final_committed:
        visible[read.value].append(read)

    for txn in txns.values():
        shown = [v for _, _, v in txn.values if v in visible]
        if txn.outcome == COMMITTED:
            for _, _, value in txn.values:
                if value not in visible:
                    findings["lost_write"].add(f"{value} (transaction {txn.key} committed)")
        if txn.outcome in (COMMITTED, UNKNOWN) and shown and len(shown) < len(txn.values):
            findings["torn_transaction"].add(f"{txn.key}: {len(shown)} of {len(txn.values)} records visible")
        if txn.outcome == ZOMBIE and (txn.zombie_commit_ok or shown):
            findings["zombie_write"].add(
                f"{txn.key}: commit {'returned OK' if txn.zombie_commit_ok else 'failed'}, {len(shown)} records visible"
            )

    for read in [*history.polls, *history.final_committed]:
        writer = txns.get(transaction_of(read.value))
        if writer is not None and writer.outcome in (ABORTED, ZOMBIE):
            findings["aborted_read"].add(
                f"{read.consumer} read {read.value} at {read.topic}-{read.partition}@{read.offset} ({writer.outcome})"
            )
        elif writer is not None and 0 < read.at < writer.committing_at:
            findings["early_read"].add(
                f"{read.consumer} read {read.value} at {read.topic}-{read.partition}@{read.offset} "
                f"{writer.committing_at - read.at:.3f} s before its commit began"
            )

    idempotent = {value for _, _, value in history.idempotent}
    for reads in (history.final_committed, history.final_uncommitted):
        _duplicates_and_phantoms(reads, txns.keys(), idempotent, findings)
    _acks(history, findings)
    _idempotent(history, findings)
    _order(history, findings)
    _monotonic(history.polls, findings)
    _position_jumps(history, findings)
    for txn, stalled in stalls(history):
        if stalled > stall_bound_s:
            findings["liveness"].add(f"{txn.key} took {stalled:.1f} s (bound {stall_bound_s:.0f} s), from "
                                     f"{txn.began_at - history.started_at:.1f} s into the run")
    hung = history.faults.get("transform_hung_calls", 0)
    if hung:
        findings["liveness"].add(f"{hung} transactional call(s) of the transform stage never returned, past their own "
                                 "timeout (the stage was restarted; a client hang like librdkafka#5511, or no answer)")
    stage_s, stage_at = history.transform_stall
    if stage_s > stall_bound_s:
        findings["liveness"].add(f"the transform stage's transaction took {stage_s:.1f} s (bound {stall_bound_s:.0f} s), "
                                 f"from {stage_at:.1f} s into the run")
    _transform(history, findings)
    for error in history.errors:
        if not error.expected:
            findings["unexpected_error"].add(
                f"producer {error.producer}/{error.generation} {error.call}: {error.error}"
                f"{' (fatal)' if error.fatal else ''} {error.detail}".rstrip()
            )
    return findings


def _duplicates_and_phantoms(reads: list[Read], known: Iterable[str], idempotent: set[str],
                             findings: dict[str, Finding]) -> None:
    keys = set(known)
    where: dict[str, set[tuple[str, int, int]]] = defaultdict(set)
    for read in reads:
        where[read.value].add((read.topic, read.partition, read.offset))
    for value, places in where.items():
        if len(places) > 1:
            findings["duplicate"].add(f"{value} at {sorted(places)}")
        if transaction_of(value) not in keys and value not in idempotent:
            findings["phantom"].add(f"{value} at {sorted(places)[0]}")


def _acks(history: History, findings: dict[str, Finding]) -> None:
    at: dict[tuple[str, int, int | None], str] = {}
    for read in history.final_uncommitted:
        at[(read.topic, read.partition, read.offset)] = read.value
    for value, place in history.acks.items():
        found = at.get(place)
        txn = history.transactions.get(transaction_of(value))
        if txn is None or txn.outcome != COMMITTED:
            continue  # aborted records may be gone (retention, compaction) — only committed ones are owed
        if place[2] is not None and found != value:  # (None: librdkafka's implicit ack, see _idempotent)
            findings["wrong_ack"].add(f"{value} acknowledged at {place[0]}-{place[1]}@{place[2]}, which holds {found}")


def _idempotent(history: History, findings: dict[str, Finding]) -> None:
    """Every acknowledged idempotent record in the log (anywhere: read_uncommitted), at its offset."""
    at: dict[tuple[str, int, int | None], str] = {}
    present: set[str] = set()
    for read in history.final_uncommitted:
        at[(read.topic, read.partition, read.offset)] = read.value
        present.add(read.value)
    for value, place in history.idempotent_acks.items():
        if value not in present:
            findings["lost_idempotent"].add(f"{value} acknowledged at {place[0]}-{place[1]}@{place[2]}, not in the log")
        elif place[2] is not None and at.get(place) != value:
            # (An offset of None is librdkafka's "implicit ack": a batch whose answer was lost is
            # known persisted once a later batch of the producer is acknowledged; no offset is claimed.)
            findings["wrong_ack"].add(f"{value} acknowledged at {place[0]}-{place[1]}@{place[2]}, which holds {at.get(place)}")


def stalls(history: History) -> list[tuple[Transaction, float]]:
    """Each transaction whose commit or abort returned OK, with how long it took from the step's
    start (an init it needed included) to that answer: a healthy producer's wait for progress."""
    return [(t, t.ended_at - t.began_at) for t in history.transactions.values() if t.ended_at and t.began_at]


def _order(history: History, findings: dict[str, Finding]) -> None:
    offsets: dict[tuple[str, int, str], int] = {}
    for read in history.final_uncommitted:
        offsets.setdefault((read.topic, read.partition, read.value), read.offset)  # a duplicate is its own check
    last: dict[tuple[int, int, str, int], tuple[int, str]] = {}
    for txn in history.transactions.values():  # insertion order is the run's order
        for topic, partition, value in txn.values:
            offset = offsets.get((topic, partition, value))
            if offset is None:
                continue
            key = (txn.producer, txn.generation, topic, partition)
            previous = last.get(key)
            if previous is not None and offset <= previous[0]:
                findings["order"].add(f"{value}@{offset} after {previous[1]}@{previous[0]} in {topic}-{partition}")
            last[key] = (offset, value)
    idempotent_last: dict[tuple[str, str, int], tuple[int, str]] = {}
    for topic, partition, value in history.idempotent:  # send order; a new producer starts its own
        offset = offsets.get((topic, partition, value))
        if offset is None:
            continue
        generation = value.rsplit("/", 1)[0]
        previous = idempotent_last.get((generation, topic, partition))
        if previous is not None and offset <= previous[0]:
            findings["order"].add(f"{value}@{offset} after {previous[1]}@{previous[0]} in {topic}-{partition}")
        idempotent_last[(generation, topic, partition)] = (offset, value)


def _monotonic(polls: list[Read], findings: dict[str, Finding]) -> None:
    last: dict[tuple[str, str, int], int] = {}
    for read in polls:
        key = (read.consumer, read.topic, read.partition)
        previous = last.get(key)
        if previous is not None and read.offset <= previous:
            findings["non_monotonic"].add(f"{read.consumer} read {read.topic}-{read.partition}@{read.offset} after @{previous}")
        last[key] = read.offset


def _position_jumps(history: History, findings: dict[str, Finding]) -> None:
    """A poller's group had a commit acknowledged at offset C of a partition before a read: the read
    may not be below C (Kafka resumes from committed offsets; only an out-of-range reset goes lower)."""
    events: list[tuple[float, int, Any]] = [(c.at, 0, c) for c in history.commits]
    events += [(r.at, 1, r) for r in history.polls if r.at]
    committed: dict[tuple[str, str, int], int] = {}
    for _, kind, event in sorted(events, key=lambda e: (e[0], e[1])):
        if kind == 0:
            key = (event.consumer, event.topic, event.partition)
            committed[key] = max(committed.get(key, 0), event.offset)
            continue
        group = event.consumer.split("#", 1)[0]
        floor = committed.get((group, event.topic, event.partition), 0)
        if event.offset < floor:
            findings["position_jump"].add(f"{event.consumer} read {event.topic}-{event.partition}@{event.offset}, "
                                          f"{floor - event.offset} below its group's committed {floor}")


def _transform(history: History, findings: dict[str, Finding]) -> None:
    """One output per committed input, none for anything else (inputs are the source's committed log)."""
    if not history.transform:
        return
    source = history.transform["source"]
    expected = {PREFIX + r.value for r in history.final_committed if r.topic == source}
    seen: dict[str, int] = defaultdict(int)
    for read in history.transform_output:
        seen[read.value] += 1
    for value in sorted(expected - set(seen)):
        findings["transform"].add(f"no output for the committed input {value[len(PREFIX):]}")
    for value, count in sorted(seen.items()):
        if count > 1:
            findings["transform"].add(f"{value} written {count} times")
        if value not in expected:
            findings["transform"].add(f"{value} has no committed input")


def passed(findings: dict[str, Finding]) -> bool:
    return all(f.count == 0 for f in findings.values())
