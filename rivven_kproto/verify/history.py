"""What a verify-eos run saw, as plain data: the checker's only input, written to a file for replay.

Values are self-describing (``<producer>/<generation>/<transaction>/<index>``), so every record
read back names the transaction that wrote it. A transaction's outcome is what its client was
told: ``committed`` (commit returned OK), ``aborted`` (abort returned OK, or the transaction was
abandoned and a later instance's init fenced it), ``unknown`` (the client died of an error that
leaves the outcome open), ``zombie`` (a fenced instance tried to commit: it must not succeed).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

COMMITTED, ABORTED, UNKNOWN, ZOMBIE = "committed", "aborted", "unknown", "zombie"
OUTCOMES = (COMMITTED, ABORTED, UNKNOWN, ZOMBIE)


def value_of(producer: int, generation: int, transaction: int, index: int) -> str:
    return f"{producer}/{generation}/{transaction}/{index}"


def transaction_of(value: str) -> str:
    """The transaction key (``producer/generation/transaction``) a value belongs to."""
    return value.rsplit("/", 1)[0]


@dataclass
class Transaction:
    key: str
    producer: int
    generation: int
    values: list[tuple[str, int, str]] = field(default_factory=list)  # (topic, partition, value) in send order
    outcome: str = UNKNOWN
    zombie_commit_ok: bool = False  # a fenced instance's commit returned OK: an anomaly by itself
    committing_at: float = 0.0  # time.monotonic() just before commit was called (0: not known)
    began_at: float = 0.0  # time.monotonic() when the step began (before an init it needed)
    ended_at: float = 0.0  # when commit or abort returned OK (0: it did not, or not known)


@dataclass
class Read:
    """One record as a consumer received it."""

    consumer: str
    topic: str
    partition: int
    offset: int
    value: str
    at: float = 0.0  # time.monotonic() when the consumer returned it (0: not known, a final read)


@dataclass
class ClientError:
    producer: int
    generation: int
    call: str
    error: str  # Kafka's error name
    fatal: bool
    expected: bool  # an error Kafka itself gives in this situation (fencing a zombie, ...)
    detail: str = ""


@dataclass
class Commit:
    """Offsets a consumer group's commit was acknowledged for (a position it may not go back past)."""

    consumer: str  # the poller's mode: its group
    topic: str
    partition: int
    offset: int
    at: float  # time.monotonic() when the acknowledgement arrived


@dataclass
class Fault:
    """One fault the nemesis injected (or its end), for a replay to line up with the history."""

    at: float  # seconds since the run began
    step: int  # the workload step it was injected at (-1: a recovery, on its own thread)
    kind: str
    target: str  # "node 2", "postgres", "all"
    detail: str = ""


IDEMPOTENT = "idem"  # values of the idempotent producer: idem/<generation>/<n>


def idempotent_value(generation: int, number: int) -> str:
    return f"{IDEMPOTENT}/{generation}/{number}"


@dataclass
class History:
    seed: int
    bootstrap: str
    client: str = "confluent-kafka"  # the transactional producers' library
    topics: dict[str, int] = field(default_factory=dict)  # topic -> partitions
    transactions: dict[str, Transaction] = field(default_factory=dict)
    acks: dict[str, tuple[str, int, int | None]] = field(default_factory=dict)  # value -> (topic, partition, offset; None: unknown)
    polls: list[Read] = field(default_factory=list)  # read_committed consumers during the run
    final_committed: list[Read] = field(default_factory=list)
    final_uncommitted: list[Read] = field(default_factory=list)
    errors: list[ClientError] = field(default_factory=list)
    faults: dict[str, int] = field(default_factory=dict)
    transform: dict[str, str | int] = field(default_factory=dict)  # source, sink topics of the stage
    transform_output: list[Read] = field(default_factory=list)  # the sink, read_committed, at the end
    started_at: float = 0.0  # time.monotonic() when the run began
    transform_stall: tuple[float, float] = (0.0, 0.0)  # the stage's longest transaction: seconds, began (run time)
    commits: list[Commit] = field(default_factory=list)  # the pollers' acknowledged offset commits
    fault_log: list[Fault] = field(default_factory=list)
    idempotent: list[tuple[str, int, str]] = field(default_factory=list)  # (topic, partition, value) in send order
    idempotent_acks: dict[str, tuple[str, int, int | None]] = field(default_factory=dict)  # (offset None: implicit ack)
    client_crashes: list[str] = field(default_factory=list)  # client processes that died (the client's fault, not ours)

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self), separators=(",", ":")))

    @classmethod
    def load(cls, path: Path) -> History:
        doc = json.loads(path.read_text())
        history = cls(seed=doc["seed"], bootstrap=doc["bootstrap"], client=doc.get("client", "confluent-kafka"),
                      topics=doc["topics"], faults=doc["faults"])
        history.transactions = {
            k: Transaction(
                key=t["key"], producer=t["producer"], generation=t["generation"],
                values=[tuple(v) for v in t["values"]], outcome=t["outcome"], zombie_commit_ok=t["zombie_commit_ok"],
                committing_at=t.get("committing_at", 0.0), began_at=t.get("began_at", 0.0),
                ended_at=t.get("ended_at", 0.0),
            )
            for k, t in doc["transactions"].items()
        }
        history.acks = {k: tuple(v) for k, v in doc["acks"].items()}  # type: ignore[misc]
        history.polls = [Read(**r) for r in doc["polls"]]
        history.final_committed = [Read(**r) for r in doc["final_committed"]]
        history.final_uncommitted = [Read(**r) for r in doc["final_uncommitted"]]
        history.errors = [ClientError(**e) for e in doc["errors"]]
        history.transform = doc.get("transform", {})
        history.transform_output = [Read(**r) for r in doc.get("transform_output", [])]
        history.started_at = doc.get("started_at", 0.0)
        history.transform_stall = tuple(doc.get("transform_stall", (0.0, 0.0)))  # type: ignore[assignment]
        history.commits = [Commit(**c) for c in doc.get("commits", [])]
        history.fault_log = [Fault(**f) for f in doc.get("fault_log", [])]
        history.idempotent = [tuple(v) for v in doc.get("idempotent", [])]  # type: ignore[misc]
        history.idempotent_acks = {k: tuple(v) for k, v in doc.get("idempotent_acks", {}).items()}  # type: ignore[misc]
        history.client_crashes = list(doc.get("client_crashes", []))
        return history
