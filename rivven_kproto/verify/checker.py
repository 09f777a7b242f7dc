"""The exactly-once checks over a :class:`History`: pure, so each can be tested on a made-up history.

Every check returns the anomalies it found, counted, with a few concrete examples (values,
offsets). A run passes when every count is zero.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from .history import ABORTED, COMMITTED, UNKNOWN, ZOMBIE, History, Read, transaction_of
from .transform import PREFIX

EXAMPLES = 5

CHECKS = (
    ("lost_write", "a record of a committed transaction is missing from the read_committed log"),
    ("aborted_read", "a read_committed consumer saw a record of an aborted transaction"),
    ("early_read", "a read_committed consumer saw a record before its transaction's commit began (past the LSO)"),
    ("torn_transaction", "only part of a transaction is visible to read_committed"),
    ("duplicate", "a record is in the log at more than one offset"),
    ("wrong_ack", "the offset a producer was acknowledged holds a different record"),
    ("order", "one producer's records are out of their send order within a partition"),
    ("non_monotonic", "a consumer's successive records of a partition went back or repeated"),
    ("phantom", "a record nobody wrote"),
    ("zombie_write", "a fenced producer's transaction committed or became visible"),
    ("transform", "the consume-transform-produce stage lost, repeated or invented an output"),
    ("unexpected_error", "a client failed with an error Kafka would not give it here"),
)


@dataclass
class Finding:
    count: int = 0
    examples: list[str] = field(default_factory=list)

    def add(self, example: str) -> None:
        self.count += 1
        if len(self.examples) < EXAMPLES:
            self.examples.append(example)


def check(history: History) -> dict[str, Finding]:
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

    for reads in (history.final_committed, history.final_uncommitted):
        _duplicates_and_phantoms(reads, txns.keys(), findings)
    _acks(history, findings)
    _order(history, findings)
    _monotonic(history.polls, findings)
    _transform(history, findings)
    for error in history.errors:
        if not error.expected:
            findings["unexpected_error"].add(
                f"producer {error.producer}/{error.generation} {error.call}: {error.error}"
                f"{' (fatal)' if error.fatal else ''} {error.detail}".rstrip()
            )
    return findings


def _duplicates_and_phantoms(reads: list[Read], known: Iterable[str], findings: dict[str, Finding]) -> None:
    keys = set(known)
    where: dict[str, set[tuple[str, int, int]]] = defaultdict(set)
    for read in reads:
        where[read.value].add((read.topic, read.partition, read.offset))
    for value, places in where.items():
        if len(places) > 1:
            findings["duplicate"].add(f"{value} at {sorted(places)}")
        if transaction_of(value) not in keys:
            findings["phantom"].add(f"{value} at {sorted(places)[0]}")


def _acks(history: History, findings: dict[str, Finding]) -> None:
    at: dict[tuple[str, int, int], str] = {}
    for read in history.final_uncommitted:
        at[(read.topic, read.partition, read.offset)] = read.value
    for value, place in history.acks.items():
        found = at.get(place)
        txn = history.transactions.get(transaction_of(value))
        if txn is None or txn.outcome != COMMITTED:
            continue  # aborted records may be gone (retention, compaction) — only committed ones are owed
        if found != value:
            findings["wrong_ack"].add(f"{value} acknowledged at {place[0]}-{place[1]}@{place[2]}, which holds {found}")


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


def _monotonic(polls: list[Read], findings: dict[str, Finding]) -> None:
    last: dict[tuple[str, str, int], int] = {}
    for read in polls:
        key = (read.consumer, read.topic, read.partition)
        previous = last.get(key)
        if previous is not None and read.offset <= previous:
            findings["non_monotonic"].add(f"{read.consumer} read {read.topic}-{read.partition}@{read.offset} after @{previous}")
        last[key] = read.offset


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
