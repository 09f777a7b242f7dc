"""The coordinator runtime (pure code): append, then apply, then effects; replay is live apply.

A toy shard pins the runtime's contract; the transaction coordinator, driven through a seeded
random run, shows the property the runtime exists for: replaying the entries a live run logged
gives, at every step, the state the live run has.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import pytest

from rivven_kproto.broker.coordinator_runtime import CoordinatorRuntime, Result
from rivven_kproto.broker.groups import GroupCoordinator
from rivven_kproto.broker.groups.api import CommitPartition
from rivven_kproto.broker.txn.coordinator import TransactionCoordinator
from rivven_kproto.codec.errors import Errors, KafkaError

NOW = 1_700_000_000_000


class MemoryLog:
    """A coordinator log in memory: entries in order, a snapshot replacing them on roll."""

    def __init__(self, entries: Sequence[bytes] = ()) -> None:
        self.entries = list(entries)
        self.appended = 0
        self.failing = False
        self.decisions: list[tuple[int, int | None]] = []

    snapshot_size = 0  # the group coordinator's compaction policy reads these

    @property
    def size(self) -> int:
        return sum(len(entry) for entry in self.entries)

    def append(self, payload: bytes) -> None:
        if self.failing:
            raise OSError("disk full")
        self.entries.append(payload)
        self.appended += 1

    def open(self) -> list[bytes]:
        return list(self.entries)

    def roll(self, snapshot: Iterable[bytes], *, now: bool = False) -> None:
        self.entries = list(snapshot)

    def record_decision(self, producer_id: int, epoch: int | None) -> None:
        self.decisions.append((producer_id, epoch))


# -- the runtime's contract, on a toy shard ---------------------------------------------------------


@dataclass(frozen=True)
class Ping:
    name: str


@dataclass
class Counter:
    """A shard whose state is a dict of counters; a record is (key, delta)."""

    values: dict[str, int] = field(default_factory=dict)
    seen: list[str] = field(default_factory=list)
    appends: int = 0

    def apply(self, record: tuple[str, int]) -> None:
        key, delta = record
        self.values[key] = self.values.get(key, 0) + delta

    def encode(self, records: Sequence[tuple[str, int]]) -> bytes:
        return ";".join(f"{k}={d}" for k, d in records).encode()

    def decode(self, payload: bytes) -> list[tuple[str, int]]:
        return [(k, int(d)) for k, d in (part.split("=") for part in payload.decode().split(";"))]

    def appended(self, records: Sequence[tuple[str, int]]) -> None:
        self.appends += 1


def runtime_of(shard: Counter, durable_log: MemoryLog) -> CoordinatorRuntime[tuple[str, int]]:
    return CoordinatorRuntime(durable_log, shard)


def test_records_are_one_entry_applied_after_the_append_then_effects_run() -> None:
    shard, durable_log = Counter(), MemoryLog()
    runtime = runtime_of(shard, durable_log)
    order: list[str] = []

    def ping(effect: Ping, now_ms: int) -> str:
        order.append(f"{effect.name}:{shard.values.get('a')}")  # the records are applied by now
        return effect.name.upper()

    runtime.on(Ping, ping, then=lambda effect, outcome, now_ms: shard.seen.append(outcome))
    assert runtime.run(Result("ok", [("a", 1), ("b", 2)], [Ping("x"), Ping("y")]), NOW) == "ok"
    assert durable_log.entries == [b"a=1;b=2"] and shard.values == {"a": 1, "b": 2} and shard.appends == 1
    assert order == ["x:1", "y:1"] and shard.seen == ["X", "Y"]


def test_a_failed_append_raises_and_changes_nothing() -> None:
    shard, durable_log = Counter(), MemoryLog()
    runtime = runtime_of(shard, durable_log)
    runtime.on(Ping, lambda effect, now_ms: pytest.fail("an effect ran without its records"))
    durable_log.failing = True
    with pytest.raises(OSError):
        runtime.run(Result(None, [("a", 1)], [Ping("x")]), NOW)
    assert shard.values == {} and durable_log.entries == [] and shard.appends == 0


def test_follow_ups_run_depth_first_and_a_failed_one_stops_its_chain(caplog: pytest.LogCaptureFixture) -> None:
    shard, durable_log = Counter(), MemoryLog()
    runtime = runtime_of(shard, durable_log)
    ran: list[str] = []

    def then(effect: Ping, outcome: None, now_ms: int) -> Result[None] | None:
        if effect.name == "first":  # its follow-up logs a record and pings again, before "second"
            return Result(None, [("f", 1)], [Ping("nested")])
        if effect.name == "second":
            durable_log.failing = True
            return Result(None, [("g", 1)], [Ping("never")])
        return None

    runtime.on(Ping, lambda effect, now_ms: ran.append(effect.name), then=then)
    with caplog.at_level(logging.ERROR):
        runtime.run(Result(None, [("a", 1)], [Ping("first"), Ping("second"), Ping("third")]), NOW)
    assert ran == ["first", "nested", "second", "third"]
    assert shard.values == {"a": 1, "f": 1} and durable_log.entries == [b"a=1", b"f=1"]
    assert "follow-up will be retried" in caplog.text


def test_an_effect_nobody_runs_is_a_bug() -> None:
    runtime = runtime_of(Counter(), MemoryLog())
    with pytest.raises(TypeError):
        runtime.run(Result(None, effects=[Ping("x")]), NOW)


def test_an_effect_rerouted_for_a_block_runs_as_before_after_it() -> None:
    runtime = runtime_of(Counter(), MemoryLog())
    ran: list[str] = []
    runtime.on(Ping, lambda effect, now_ms: ran.append(f"usual {effect.name}"))
    with runtime.rerouted(Ping, lambda effect, now_ms: ran.append(f"held {effect.name}")):
        runtime.run(Result(None, effects=[Ping("a")]), NOW)
    runtime.run(Result(None, effects=[Ping("b")]), NOW)
    with runtime.rerouted(Counter, lambda effect, now_ms: None):
        pass
    with pytest.raises(TypeError):  # a kind routed only for a block has no runner after it
        runtime.run(Result(None, effects=[Counter()]), NOW)
    assert ran == ["held a", "usual b"]


def test_replay_is_the_live_apply() -> None:
    live, durable_log = Counter(), MemoryLog()
    runtime = runtime_of(live, durable_log)
    for key, delta in [("a", 1), ("b", 5), ("a", -3)]:
        runtime.run(Result(None, [(key, delta)]), NOW)
    loaded = Counter()
    assert runtime_of(loaded, MemoryLog()).replay(durable_log.open()) == 3
    assert loaded.values == live.values == {"a": -2, "b": 5}


# -- the transaction coordinator: a live run and its replay -----------------------------------------


class Markers:
    """A marker writer failing the partitions in ``failing`` (as leaders elsewhere would)."""

    def __init__(self) -> None:
        self.failing: set[tuple[str, int]] = set()

    def __call__(self, pid: int, epoch: int, commit: bool, partitions: Iterable[tuple[str, int]],
                 now_ms: int) -> set[tuple[str, int]]:
        return {p for p in partitions if p in self.failing}


def coordinator(durable_log: MemoryLog, markers: Markers, ids: list[int]) -> TransactionCoordinator:
    def allocate() -> int:
        ids[0] += 1
        return ids[0]

    return TransactionCoordinator(durable_log, allocate, markers, max_timeout_ms=60_000, id_expiration_ms=200_000)


def replayed(durable_log: MemoryLog) -> TransactionCoordinator:
    fresh = coordinator(MemoryLog(), Markers(), [10**9])
    fresh.runtime.replay(durable_log.open())
    return fresh


@pytest.mark.parametrize("seed", range(8))
def test_replaying_a_live_runs_log_gives_its_state_at_every_step(seed: int) -> None:
    rng = random.Random(seed)
    durable_log, markers, ids = MemoryLog(), Markers(), [0]
    coord = coordinator(durable_log, markers, ids)
    producers: dict[str, tuple[int, int]] = {}
    now = NOW
    partitions = [("t", 0), ("t", 1), ("u", 0)]
    answers: set[Errors] = set()
    for _ in range(150):
        tid = rng.choice(["a", "b", "c"])
        pid, epoch = producers.get(tid, (-1, -1))
        op = rng.randrange(9)
        if op == 0 or pid == -1:
            error, pid, epoch = coord.init_producer_id(tid, rng.choice([1_000, 30_000]), -1, -1, now)
            if error is Errors.NONE:
                producers[tid] = (pid, epoch)
        elif op in (1, 2):
            answers.add(coord.add_partitions(tid, pid, epoch, rng.sample(partitions, 2), now,
                                             rng.choice([0, 0, 2])))
        elif op == 3:
            answers.add(coord.add_offsets(tid, pid, epoch, rng.choice(["g1", "g2"]), now))
        elif op in (4, 5):
            answers.add(coord.end_txn(tid, pid, epoch, op == 4, now))
        elif op == 6:
            error, new_pid, new_epoch = coord.end_txn_v2(tid, pid, epoch, rng.random() < 0.5, now)
            answers.add(error)
            if error is Errors.NONE:
                producers[tid] = (new_pid, new_epoch)
        elif op == 7:
            markers.failing = set(rng.sample(partitions, rng.randrange(2)))
        else:
            now += rng.choice([10, 5_000, 40_000, 250_000])  # timeouts abort, idle ids expire
            coord.tick(now)
        durable_log.failing = rng.random() < 0.05  # a failed write must change nothing either
        fresh = replayed(durable_log)
        assert fresh.txns == coord.txns
        assert fresh.by_producer == coord.by_producer
    assert Errors.NONE in answers and len(answers) > 2  # the run went through more than one path


def test_the_live_state_changes_only_through_apply(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every record the runtime logs is applied by ``apply``, and nothing else moves ``txns``."""
    durable_log, markers, ids = MemoryLog(), Markers(), [0]
    coord = coordinator(durable_log, markers, ids)
    applied: list[bytes] = []
    apply = coord.apply

    def recording(txn: object) -> None:
        applied.append(durable_log.entries[-1])
        apply(txn)  # type: ignore[arg-type]

    monkeypatch.setattr(coord, "apply", recording)
    error, pid, epoch = coord.init_producer_id("a", 10_000, -1, -1, NOW)
    assert coord.add_partitions("a", pid, epoch, [("t", 0)], NOW) is Errors.NONE
    markers.failing = {("t", 0)}
    assert coord.end_txn("a", pid, epoch, True, NOW) is Errors.NONE  # Prepare logged, marker pending
    markers.failing = set()
    coord.tick(NOW + 1)  # the marker is written: CompleteCommit logged
    assert applied == durable_log.entries and len(applied) == 4
    assert durable_log.decisions == [(pid, epoch), (pid, None)]
    assert replayed(durable_log).txns == coord.txns


# -- the group coordinator: its offsets, live and replayed ------------------------------------------


def offsets_of(groups: GroupCoordinator) -> tuple[list[object], list[object], set[str]]:
    return (sorted(map(repr, groups.offsets.records())), sorted(map(repr, groups.offsets.pending_records())),
            set(groups.groups))


@pytest.mark.parametrize("seed", range(4))
def test_the_group_coordinators_log_replays_to_its_offsets(seed: int) -> None:
    rng = random.Random(seed)
    durable_log = MemoryLog()
    live = GroupCoordinator(None, durable_log=durable_log)
    now = NOW
    for _ in range(120):
        group = rng.choice(["g1", "g2"])
        parts = [CommitPartition("t", p, rng.randrange(100), -1, None) for p in rng.sample(range(3), 2)]
        op = rng.randrange(6)
        durable_log.failing = rng.random() < 0.05
        try:
            if op == 0:
                live.commit_offsets(group, -1, "", None, parts, now, version=8)
            elif op == 1:
                live.commit_txn_offsets(group, rng.choice([7, 8]), 0, -1, "", None, parts, now)
            elif op == 2:
                live.complete_transaction(rng.choice([7, 8]), [group], rng.random() < 0.5)
            elif op == 3:
                live.delete_offsets(group, [("t", [rng.randrange(3)])])
            elif op == 4:
                live.delete_groups([group])
            else:
                now += 1_000
        except (KafkaError, OSError):
            pass  # refused: the log could not be written, and nothing changed
        fresh = GroupCoordinator(None, durable_log=MemoryLog(durable_log.entries))
        fresh.load(now)
        assert offsets_of(fresh) == offsets_of(live)
    assert durable_log.entries
